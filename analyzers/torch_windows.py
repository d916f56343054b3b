"""The torch.profiler windows of a ``probe run`` (``probe.samplers.torch_windows``) in the
run's diagnosis.

Each window is diagnosed as any Kineto trace is (``trace_diagnosis.diagnose_trace``); the
run's diagnosis keeps the window with the most ops (the others are listed), and its
fixes join the run's recommendations, re-estimated for the whole run by Amdahl's law: a
fix that speeds up a share ``p`` of a window by ``s`` applies to the part of the run the
windows represent, the time from the first forward pass to the end (before it: imports,
model loading, which no op-level fix touches), less the pauses the windows themselves
made. So ``p_run = p * steady / wall``, and the estimate is ``1 / ((1 - p_run) + p_run / s)``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from probe.analyzers.amdahl import amdahl, ceiling
from probe.analyzers.recommendations import Recommendation
from probe.analyzers.trace_diagnosis import TraceDiagnosis

__all__ = ["TorchWindowsDiagnosis", "torch_windows_diagnosis"]


@dataclass(frozen=True)
class TorchWindowsDiagnosis:
    windows: list[dict[str, Any]]  # meta.json's windows, each with its primary limit
    chosen: str  # the file of the window the block describes
    diagnosis: TraceDiagnosis  # that window's
    steady_share: float  # of the run's wall, the part the windows represent
    # re-estimated for the run, the window's minor ones too: the run ranks them with its
    # own (a decoder's KV cache at 1.20x in a noisy window was in neither of the run's
    # lists, where at 1.24x for the run it was among those proposed under 1.25x)
    recommendations: list[Recommendation]

    def to_dict(self) -> dict[str, Any]:
        whole = self.diagnosis.to_dict()
        return {
            "windows": self.windows,
            "window": self.chosen,
            "steady_share": round(self.steady_share, 4),
            **{k: whole[k] for k in ("primary", "run", "recommendations", "stages")},
            **{k: whole[k] for k in ("gpu", "cpu", "notes")},
        }


def torch_windows_diagnosis(
    windows: list[tuple[dict[str, Any], TraceDiagnosis, int]],
    *,
    forward_at_s: float | None,
    wall_s: float,
    collected_s: float = 0.0,
) -> TorchWindowsDiagnosis | None:
    """``windows``: (meta.json's entry, its diagnosis, its op count) per window read;
    ``forward_at_s``: when the first forward pass was seen; ``wall_s``: the run's;
    ``collected_s``: the full collections' seconds after the first forward pass."""
    if not windows:
        return None
    entry, chosen, _ = max(windows, key=lambda w: w[2])
    steady = _steady_share(forward_at_s, wall_s, [e for e, _, _ in windows], collected_s)
    listed = [{**e, "limit": _limit(d), "ops": n} for e, d, n in windows]
    return TorchWindowsDiagnosis(
        windows=listed,
        chosen=str(entry.get("file", "")),
        diagnosis=chosen,
        steady_share=steady,
        recommendations=[
            _for_the_run(r, steady, str(entry.get("file", "")))
            for r in [*chosen.recommendations, *chosen.minor_recommendations]
            if r.scope != "memory"
        ],
    )


def _steady_share(
    forward_at_s: float | None,
    wall_s: float,
    entries: list[dict[str, Any]],
    collected_s: float = 0.0,
) -> float:
    """Of the run as it would take unprofiled, the part from the first forward pass on,
    less the full collections made in it (``collected_s``): a window's shares are of its
    time outside them (``TraceEvidence.paused_ns``), so the run's collections are the
    run's to count, whether one fell in a window or none did. The windows' openings and
    closings stopped the target (``open_s``, ``stall_s``: the decoder's 0.1-s window
    stalled it 0.59 s of an 8.7-s run, where its closing held the GIL; none where it did
    not); they come after the first forward pass, so left in they read as steady work
    that a plain run does not have."""
    if forward_at_s is None or wall_s <= 0:
        return 1.0
    paused = sum(float(e.get("open_s") or 0.0) + float(e.get("stall_s") or 0.0) for e in entries)
    paused = min(paused, max(wall_s - forward_at_s, 0.0))
    plain = wall_s - paused
    steady = plain - forward_at_s - collected_s
    return min(max(steady / plain, 0.0), 1.0) if plain > 0 else 1.0


def _limit(d: TraceDiagnosis) -> str:
    if not d.run.get("gpu"):
        return "no GPU work: the host's ops only"
    return str(d.primary.get("summary", ""))


def _over_the_run(speedup: float, steady: float) -> float:
    """A window's speedup as the run's: the share of time it removes, scaled by the
    run's steady share, as the estimate's own p is."""
    removed = 1.0 - 1.0 / speedup if speedup > 0 else 0.0
    return round(1.0 / (1.0 - removed * steady), 2)


def _for_the_run(r: Recommendation, steady: float, window: str) -> Recommendation:
    p = r.p * steady
    evidence = {
        **r.evidence,
        "torch_window": window,
        "window_estimate": round(r.estimated_speedup, 3),
        "window_p": round(r.p, 4),
        "steady_share": round(steady, 4),
    }
    if r.evidence.get("speedup_range"):
        evidence["speedup_range"] = [_over_the_run(x, steady) for x in r.evidence["speedup_range"]]
    return replace(
        r,
        stage=r.stage or "torch ops",
        estimated_speedup=amdahl(p, r.s) if r.s > 0 else 1.0,
        p=p,
        ceiling=ceiling(p),
        evidence=evidence,
        model=(r.model + "; " if r.model else "")
        + f"the window's p scaled by the run's steady share ({steady:.0%})",
        scope="path",
    )
