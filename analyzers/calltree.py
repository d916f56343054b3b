"""The sampled call paths as a tree: what the flame graph draws and profile exporters write.

``call_tree(samples, stacks, frames)`` -> ``CallTree``: one node per distinct call path
(root first), with the on-CPU and waiting time of every sample whose stack passes
through it (inclusive), attributed as ``analyzers.attribution`` does -- a row's CPU is
never charged to the stack it was caught blocked in. ``CallTree.pruned`` keeps the nodes
worth drawing; ``CallTree.own`` gives each node's time outside its kept children, so
the totals stay exact when small paths are folded into their parents.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import pandas as pd

from probe.analyzers.attribution import attribute, split_run_queue_waits

__all__ = ["CallTree", "call_tree"]


@dataclass(frozen=True)
class CallTree:
    """Nodes in first-seen order (parents before their children).

    ``keys[i]`` names node i by its path of frame ids (``"3;7;12"``), ``parents[i]`` is
    its parent's key (``""`` for a root), ``labels[i]`` is ``function (file.py)``;
    ``cpu_ns``/``wait_ns`` are inclusive. ``total_ns``: on-CPU plus waiting of the roots.
    """

    keys: list[str]
    parents: list[str]
    labels: list[str]
    cpu_ns: np.ndarray
    wait_ns: np.ndarray
    total_ns: float

    def __len__(self) -> int:
        return len(self.keys)

    def pruned(self, *, min_share: float, max_nodes: int) -> CallTree:
        """The nodes holding at least ``min_share`` of the total, at most ``max_nodes``
        of them (the heaviest; a parent weighs at least its child, so no kept node loses
        its parent)."""
        weight = self.cpu_ns + self.wait_ns
        keep = weight >= self.total_ns * min_share
        if keep.sum() > max_nodes:
            cut = np.sort(weight[keep])[::-1][max_nodes - 1]
            keep &= weight >= cut
        idx = np.flatnonzero(keep)
        return CallTree(
            keys=[self.keys[i] for i in idx],
            parents=[self.parents[i] for i in idx],
            labels=[self.labels[i] for i in idx],
            cpu_ns=self.cpu_ns[idx],
            wait_ns=self.wait_ns[idx],
            total_ns=self.total_ns,
        )

    def own(self, values: np.ndarray) -> np.ndarray:
        """Each node's share of ``values`` (inclusive) not in its children here."""
        position = {k: i for i, k in enumerate(self.keys)}
        children = np.zeros(len(self.keys))
        for parent, value in zip(self.parents, values, strict=True):
            i = position.get(parent)
            if i is not None:
                children[i] += value
        return np.clip(values - children, 0.0, None)


def call_tree(
    samples: pd.DataFrame,
    stacks: pd.DataFrame,
    frames: pd.DataFrame,
    brief_lock_stacks: Collection[int] = (),
) -> CallTree:
    """The call tree of a run's stack samples (empty tables give an empty tree), their
    time attributed as the breakdown's is (``brief_lock_stacks``: ``Breakdown``'s)."""
    if samples.empty or stacks.empty:
        return CallTree([], [], [], np.zeros(0), np.zeros(0), 0.0)
    per_stack = attribute(split_run_queue_waits(samples), brief_lock_stacks)
    per_stack = per_stack.groupby("stack_id")[["cpu_ns", "wait_ns"]].sum()
    frame_label = {
        int(fid): f"{fn} ({str(fname).rsplit('/', 1)[-1]})"
        for fid, fn, fname in zip(
            frames["frame_id"], frames["function"], frames["filename"], strict=True
        )
    }
    ids_of = stacks.set_index("stack_id")["frame_ids"]
    cpu: dict[str, float] = {}
    wait: dict[str, float] = {}
    parent: dict[str, str] = {}
    label: dict[str, str] = {}
    for sid, row in per_stack.iterrows():
        key = ""
        for fid in (f for f in str(ids_of.get(sid, "") or "").split(";") if f):
            child = f"{key};{fid}" if key else fid
            parent.setdefault(child, key)
            label.setdefault(child, frame_label.get(int(fid), "?"))
            cpu[child] = cpu.get(child, 0.0) + float(row["cpu_ns"])
            wait[child] = wait.get(child, 0.0) + float(row["wait_ns"])
            key = child
    keys = list(parent)
    roots = [k for k in keys if parent[k] == ""]
    total = sum(cpu[k] for k in roots) + sum(wait[k] for k in roots)
    return CallTree(
        keys=keys,
        parents=[parent[k] for k in keys],
        labels=[label[k] for k in keys],
        cpu_ns=np.array([cpu[k] for k in keys], dtype="float64"),
        wait_ns=np.array([wait[k] for k in keys], dtype="float64"),
        total_ns=float(total),
    )
