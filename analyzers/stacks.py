"""What each interned stack is: its leaf, whether the leaf runs native code, whose code it is.

``label_stacks(stacks, frames, library_paths)`` -> one row per ``stack_id``:

* ``function``, ``filename``, ``location`` (``file.py:line``) of the leaf frame;
* ``leaf_call``: the callable the leaf frame is calling (``""`` if it is interpreting);
* ``native``: the leaf is inside a call into native code. The sampler sees Python frames
  only; a Python callee would have pushed a frame of its own, so a leaf frame sitting on
  a call instruction (or on ``a @ b``, marked ``operator.matmul``) is running C: numpy,
  torch, a codec, the standard library's C parts -- unless the call is a builtin that
  takes nanoseconds (``ord``, ``len``, ``list.append``: ``_INTERPRETER_CALLS``), where the
  sample marks the interpreter's loop. A leaf on any other instruction is the
  interpreter executing Python bytecode;
* ``tensor``: the leaf is a numeric-library operation (a matrix product, a numpy/torch
  call, or a frame of those packages' own Python wrappers): a model computing op by op;
* ``user_function``: the deepest frame of the service's own code (not the standard
  library, not installed packages, not probe), ``name (file.py:line)``. Without spans,
  the breakdown groups by it: numpy time spent under ``rank()`` counts for ``rank``.
  ``<imports>`` where that frame is importing a module whose code is not the service's
  (start-up: ``IMPORTS``);
  A PyTorch model is one stage: inside an ``nn.Module`` call, the deepest frame of the
  service's own code *above* the outermost module call (the function that runs the
  model), or, where library code alone calls the model, its top module's ``forward``.
  A model defined in the service's files otherwise split into its modules' ``forward``
  methods: a BF16 encoder on a GPU read as ``Block.forward`` 20%, ``Attention.forward``
  18%, ``Encoder.forward`` 5%, and "no dominant bottleneck" (tests/gpu_corpus/README.md),
  where the stage that ran it held 43% of the run;
* ``idle_role``: the stack is a loop waiting for its next task (a thread-pool worker in
  its queue's ``get``...: ``analyzers.roles``), what that thread is; ``""`` otherwise;
* ``serving``: the stack runs inside a server's loop (asyncio's, ``serve_forever``...);
* ``notify_wait``: the leaf is ``threading.Condition.wait``, the thread waits to be
  notified (a queue's ``get``, an ``Event``, a ``Future``'s result, a semaphore), not for
  a mutex someone holds: a starved consumer, not a thread queued behind a lock's holder.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import pandas as pd

from probe.analyzers.roles import (
    enters_a_brief_lock,
    idle_role,
    in_pool_worker,
    in_serving_loop,
    process_transfer,
    waits_for_a_limit,
    waits_to_be_notified,
)
from probe.rundir.schema import MODULE_CALL_FILE, MODULE_CALLS

__all__ = [
    "IMPORTS",
    "LIBRARY",
    "NOT_THE_SERVICE",
    "UNKNOWN",
    "callers_of",
    "chains_of",
    "is_library_file",
    "label_stacks",
    "package_of",
]

# The user function of a stack with no frame of the service's own code (a server's loop
# under ``python -m uvicorn``, a thread a library started), and of one with no frame.
LIBRARY = "<library>"
UNKNOWN = "<unknown>"
# Where the deepest frame of the service's own code is importing a module (library code
# and the import machinery below it, ``<frozen importlib._bootstrap>``): start-up, paid
# once per process. Left to the importing function, a 1.5-s job that imports torch read
# "CPU-bound in `<module> (job.py)` (95%), vectorise the Python loops in it, 3.2x".
IMPORTS = "<imports>"
# Stages that are not the service's code: no fix there is a change the user can make.
NOT_THE_SERVICE = (LIBRARY, UNKNOWN, IMPORTS)
_IMPORT_MACHINERY = "<frozen importlib._bootstrap"  # and _bootstrap_external
_COLLECTION_CALLBACK = "probe/samplers/gc_pauses.py"

# Owners of calls that run a numeric library's kernels (np.exp, torch.matmul, um.square).
_TENSOR_OWNERS = ("np", "numpy", "torch", "F", "nn", "um", "umr", "jnp", "cp", "tf", "scipy")
_TENSOR_PACKAGES = ("/numpy/", "/torch/", "/scipy/", "/jax/", "/cupy/", "/tensorflow/")
_LIBRARY_MARKERS = ("/site-packages/", "/dist-packages/", "/lib/python3")
# Comprehensions and generator expressions have code objects of their own (3.11): their
# time belongs to the function that wrote them.
_INLINE_SCOPES = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


def is_library_file(filename: str, library_paths: Iterable[str] = ()) -> bool:
    """Standard library, an installed package, probe itself, or frozen/generated code."""
    if not filename or filename.startswith("<"):
        return True
    if any(marker in filename for marker in _LIBRARY_MARKERS):
        return True
    return any(filename.startswith(p.rstrip(os.sep) + os.sep) for p in library_paths if p)


def package_of(filename: str) -> str:
    """The top-level package or module a file belongs to: ``h11`` for
    ``.../site-packages/h11/_state.py``, ``asyncio`` for the standard library's
    ``.../lib/python3.11/asyncio/events.py``, ``os`` for ``<frozen os>``; a file of no
    library, its own name (``app.py``). probe's collection callback is the garbage
    collector's time: a thread held by a collection gives the GIL up first in it, so the
    sample taken then lands there (a torch import's collections read "gc_pauses.py 21%")."""
    if filename.replace(os.sep, "/").endswith(_COLLECTION_CALLBACK):
        return "gc"
    if filename.startswith("<frozen "):
        return filename[len("<frozen ") : -1].split(".")[0]
    path = filename.replace(os.sep, "/")
    for marker in _LIBRARY_MARKERS:  # installed packages first, then the standard library
        if marker in path:
            rest = path.rsplit(marker, 1)[1]
            if marker == "/lib/python3":  # past the version's own folder
                rest = rest.split("/", 1)[1] if "/" in rest else rest
            head = rest.split("/", 1)[0]
            return head[:-3] if head.endswith(".py") else head
    return os.path.basename(path) or filename


# Builtins that take nanoseconds: a sample on their call is the interpreter's loop, not
# native work. A pure-Python thread is paused for the sampler (which needs the GIL) at
# CPython's eval-breaker checks, and 3.11 checks right after each call returns, so a
# loop calling `ord(ch)` is caught on that CALL about as often as anywhere else
# (tests/threads_corpus's checksum_batch read cpu/native; py-spy: Python in
# rolling_hash). Calls that do real work in C (`str.split` of a page, `json.loads`,
# `re` matching, numeric kernels) stay native.
_INTERPRETER_CALLS = frozenset(
    {
        "ord", "chr", "len", "isinstance", "issubclass", "hasattr", "getattr", "setattr",
        "type", "id", "hash", "abs", "int", "float", "bool", "divmod", "round", "iter",
        "next", "append", "pop", "get", "setdefault", "items", "keys", "values", "add",
        "lower", "upper", "isalpha", "isdigit", "isspace", "isalnum", "islower", "isupper",
        "startswith", "endswith",
    }
)  # fmt: skip


def _runs_native(call: str) -> bool:
    """A leaf on this call is in native code (see ``_INTERPRETER_CALLS``)."""
    if _is_tensor_call(call):
        return True
    return call.rpartition(".")[2] not in _INTERPRETER_CALLS


def _is_tensor_call(call: str) -> bool:
    if call == "operator.matmul":
        return True
    owner = call.partition(".")[0]
    return owner in _TENSOR_OWNERS or owner.startswith("umr_")


_COLUMNS = {
    "stack_id": "int64",
    "function": "object",
    "filename": "object",
    "location": "object",
    "leaf_call": "object",
    "native": "bool",
    "tensor": "bool",
    "user_function": "object",
    "idle_role": "object",
    "serving": "bool",
    "notify_wait": "bool",
    "brief_lock": "bool",  # waits for a stdlib primitive's briefly held lock (roles)
    "between_tasks": "bool",  # a pool worker outside its tasks, no code of the service's
    # the deepest frame of the service's own code is a comprehension or a generator
    # expression: a loop over items, charged to the function that wrote it
    # (analyzers.batching.glue_share tells the two apart)
    "comprehension": "bool",
    # sends or receives data to or from another process by copy (roles.process_transfer)
    "transfer": "object",
    "limit": "object",  # the limit it waits in (roles.waits_for_a_limit), or ""
    # under ``IMPORTS``: the package the service's code is importing (``torch``), or ""
    "imported": "object",
}


def _outermost_module_call(ids: list[int], by_id: dict[int, tuple[str, str]]) -> int:
    """The index in ``ids`` (root first) of the outermost ``nn.Module`` call, or len."""
    for i, f in enumerate(ids):
        function, filename = by_id.get(f, ("", ""))
        called = function.rpartition(".")[2]  # the sampler writes qualified names
        if called in MODULE_CALLS and filename.replace(os.sep, "/").endswith(MODULE_CALL_FILE):
            return i
    return len(ids)


def _user_function(
    ids: list[int], by_id: dict[int, tuple[str, str]], library: dict[int, bool]
) -> str:
    """``name (file.py)`` of the deepest frame of the service's own code; inside a model,
    of the service's code that called it (the module doc)."""

    def first(positions: Iterable[int]) -> int | None:
        return next(
            (
                i
                for i in positions
                if not library.get(ids[i], True) and not by_id[ids[i]][0].endswith(_INLINE_SCOPES)
            ),
            None,
        )

    model = _outermost_module_call(ids, by_id)
    at = first(range(model - 1, -1, -1))  # the deepest above the model
    if at is None:  # the model's top: a model called from library code only
        at = first(range(model, len(ids)))
    below = ids[(-1 if at is None else at) + 1 :]
    if any(by_id[f][1].startswith(_IMPORT_MACHINERY) for f in below if f in by_id):
        return IMPORTS  # a module the service's own code did not write is being imported
    if at is None:
        return LIBRARY if ids else UNKNOWN
    user = ids[at]
    ufn, ufile = by_id[user]
    return f"{ufn} ({os.path.basename(ufile)})"


def _imported(ids: list[int], by_id: dict[int, tuple[str, str]], library: dict[int, bool]) -> str:
    """The package of the first module body run under the import machinery below the
    service's deepest frame: what the import its code made is loading (a dependency
    that pulls in another counts for both)."""
    ours = [i for i, f in enumerate(ids) if not library.get(f, True)]
    machinery = False
    for f in ids[ours[-1] + 1 if ours else 0 :]:
        function, filename = by_id.get(f, ("", ""))
        if filename.startswith(_IMPORT_MACHINERY):
            machinery = True
        elif machinery and function == "<module>" and not filename.startswith("<"):
            return package_of(filename)
    return ""


def label_stacks(
    stacks: pd.DataFrame, frames: pd.DataFrame, library_paths: Iterable[str] = ()
) -> pd.DataFrame:
    if stacks.empty:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in _COLUMNS.items()})
    paths = tuple(library_paths)
    by_id = {
        int(fid): (str(fn), str(fname or ""))
        for fid, fn, fname in zip(
            frames["frame_id"], frames["function"], frames["filename"], strict=True
        )
    }
    library = {fid: is_library_file(fname, paths) for fid, (_, fname) in by_id.items()}
    rows = []
    for sid, frame_ids, leaf_line, leaf_call in zip(
        stacks["stack_id"],
        stacks["frame_ids"].fillna(""),
        stacks["leaf_line"],
        stacks["leaf_call"].fillna(""),
        strict=True,
    ):
        ids = [int(f) for f in str(frame_ids).split(";") if f]
        function, filename = by_id.get(ids[-1] if ids else -1, (UNKNOWN, ""))
        line = int(leaf_line) if pd.notna(leaf_line) else 0
        call = str(leaf_call)
        named = [by_id.get(f, ("", "")) for f in ids]
        user = _user_function(ids, by_id, library)
        deepest = next((f for f in reversed(ids) if not library.get(f, True)), None)
        rows.append(
            (
                int(sid),
                function,
                filename,
                f"{os.path.basename(filename)}:{line}",
                call,
                bool(call) and _runs_native(call),
                _is_tensor_call(call) if call else any(p in filename for p in _TENSOR_PACKAGES),
                user,
                idle_role(named, call),
                in_serving_loop(named),
                waits_to_be_notified(function, filename),
                enters_a_brief_lock(named, call),
                user == LIBRARY and in_pool_worker(named),
                deepest is not None and by_id[deepest][0].endswith(_INLINE_SCOPES),
                process_transfer(named),
                waits_for_a_limit(named),
                _imported(ids, by_id, library) if user == IMPORTS else "",
            )
        )
    flags = [c for c, t in _COLUMNS.items() if t == "bool"]
    return pd.DataFrame(rows, columns=list(_COLUMNS)).astype(dict.fromkeys(flags, bool))


def _frame_labels(
    frames: pd.DataFrame, library_paths: tuple[str, ...] = ()
) -> dict[int, tuple[str, bool]]:
    """frame id -> (``name (file.py)``, whether it is not the service's own code: a
    library's, or a comprehension counted as the function that wrote it)."""
    return {
        int(fid): (
            f"{fn} ({os.path.basename(str(fname or ''))})",
            is_library_file(str(fname or ""), library_paths) or str(fn).endswith(_INLINE_SCOPES),
        )
        for fid, fn, fname in zip(
            frames["frame_id"], frames["function"], frames["filename"], strict=True
        )
    }


def chains_of(stacks: pd.DataFrame, frames: pd.DataFrame, ids: Iterable[int]) -> pd.Series:
    """The frames of the stacks ``ids`` as ``name (file.py)``, outermost first (a
    tuple), indexed by stack id."""
    wanted = stacks[stacks["stack_id"].isin(list(ids))]
    if wanted.empty or frames.empty:
        return pd.Series(dtype=object)
    named = {fid: label for fid, (label, _) in _frame_labels(frames).items()}
    return pd.Series(
        [
            tuple(named.get(int(f), "") for f in str(ids_ or "").split(";") if f)
            for ids_ in wanted["frame_ids"]
        ],
        index=wanted["stack_id"].astype(int),
        dtype=object,
    )


def callers_of(
    stacks: pd.DataFrame, frames: pd.DataFrame, stage: str, library_paths: Iterable[str] = ()
) -> frozenset[str]:
    """``name (file.py)`` of the service's own functions that call ``stage`` (a
    ``name (file.py)`` of ``label_stacks``) directly in some stack: the first frame of the
    service's code outward from the stage's outermost frame (comprehensions count as the
    function that wrote them; recursion is the stage's own)."""
    if stacks.empty or frames.empty:
        return frozenset()
    labels = _frame_labels(frames, tuple(library_paths))
    found: set[str] = set()
    for frame_ids in stacks["frame_ids"].fillna(""):
        named = [labels.get(int(f), ("", True)) for f in str(frame_ids).split(";") if f]
        at = next((i for i, (label, _) in enumerate(named) if label == stage), None)
        if at is None:
            continue
        outward = (label for label, library in reversed(named[:at]) if not library)
        caller = next((label for label in outward if label != stage), None)
        if caller is not None:
            found.add(caller)
    return frozenset(found)
