"""What a leak verdict says of what holds the leak and of what piles up beside it, in
words: plain Python over ``LeakVerdict.to_dict()``'s figures, no numpy -- the verdict of a
run with nothing to judge is printed without the analysis stack's imports
(``analyzers.empty_run``), and it speaks of the leak in these words too."""

from __future__ import annotations

from typing import Any

__all__ = [
    "SHARE_SAID",
    "held_by",
    "pile_notes",
    "pile_text",
    "piled",
    "small_objects_part",
    "what_holds",
]

# Where what holds a leak is said: a quarter or less of it in small objects, or three
# quarters or more. The figure itself is printed; past either line the larger part is
# on one side, which is what changes the fix (bound a container, or a buffer and native
# memory).
SHARE_SAID = 0.25


def small_objects_part(
    share: tuple[float, float] | list[float] | None, malloc: float | None
) -> tuple[str, float, bool] | None:
    """Python's small objects' part of a leak's growth: ("small" | "large", the figure,
    whether it is an estimate), or None where the witnesses leave it open. The bounds
    from the live blocks (``small_objects_share``) hold it; within them, what malloc's
    bytes did not take (``malloc_share``: the rest of the rise is mostly pymalloc's
    arenas) is the estimate."""
    if not share:
        return None
    low, high = float(share[0]), float(share[1])
    if malloc is None:
        if high <= SHARE_SAID:
            return "large", high, False
        return ("small", low, False) if low >= 1 - SHARE_SAID else None
    estimate = min(high, max(low, 1.0 - malloc))
    if estimate <= SHARE_SAID:
        return "large", estimate, True
    return ("small", estimate, True) if estimate >= 1 - SHARE_SAID else None


def piled(piles: list[dict[str, Any]] | None, *, brief: bool = False) -> str:
    """What piles up with a leak (``piling_up``), in a sentence (``brief``: a clause);
    "" where nothing does."""
    if not piles:
        return ""
    parts = []
    for p in piles:
        per = p.get("per_request")
        rate = f"{per:.2g} a request" if per else f"{p['per_s']:.3g} a second"
        parts.append(f"{p['what']} pile up ({p['first']:,} to {p['last']:,}, {rate})")
    said = " and ".join(parts)
    if brief:
        return said
    why = {
        "threads": "each thread holds its stack and what it references until it ends",
        "asyncio tasks": "each pending task holds its coroutine's frame and what it "
        "references until it finishes",
        "file descriptors": "each open socket or file holds its buffers until it is "
        "closed, and the process fails when it reaches its limit of them",
    }
    return f"{said[0].upper()}{said[1:]} with it: " + "; ".join(why[p["what"]] for p in piles) + "."


_PILE_ADVICE = {
    "threads": "a thread that never ends keeps its stack: give each wait a way to end, "
    "or hand the work to a pool made once",
    "asyncio tasks": "a task never awaited runs until its await completes: await or cancel "
    "each one (asyncio.TaskGroup, or a timeout on what it awaits)",
    "file descriptors": "close what a request opens (a with block) on every path",
}


def pile_notes(leak: dict[str, Any], open_files_limit: int | None = None) -> list[str]:
    """Notes on what piles up (``leak["piling_up"]``) where the memory was not called a
    leak: descriptors and threads run out before memory does (a descriptor a request at
    96 requests a second left RSS flat at 15.3 MiB, and reaches 1,024 open files in ten
    seconds). A leak's own text names them (``what_holds``)."""
    if leak.get("state") == "leak":
        return []
    why = ", while memory did not grow enough to call a leak"
    return [pile_text(p, open_files_limit, why=why) for p in leak.get("piling_up") or []]


def pile_text(pile: dict[str, Any], open_files_limit: int | None = None, *, why: str = "") -> str:
    """What piles up, in a line: how fast, ``why`` it is said, when descriptors reach the
    process's limit at this pace, and what to do."""
    text = f"{piled([pile], brief=True)}{why}"
    left = None if open_files_limit is None else open_files_limit - int(pile["last"])
    if pile["what"] == "file descriptors" and left is not None and pile["per_s"] > 0:
        text += (
            f": at this pace the process reaches its limit of {open_files_limit:,} open "
            f"files in {_duration(max(0, left) / pile['per_s'])} (then every open, socket "
            "and pipe fails with 'Too many open files')"
        )
    return f"{text}; {_PILE_ADVICE[pile['what']]}"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def held_by(
    share: tuple[float, float] | list[float] | None,
    malloc: float | None = None,
    *,
    brief: bool = False,
) -> str:
    """What holds a leak's growth, in a sentence (``brief``: a clause); "" where the
    witnesses leave it open."""
    return _held_text(small_objects_part(share, malloc), brief)


def _held_text(part: tuple[str, float, bool] | None, brief: bool) -> str:
    if part is None:
        return ""
    kind, figure, estimated = part
    if kind == "large":
        bound = "about" if estimated else "at most"
        said = f"{bound} {figure:.0%}" if figure >= 0.01 else "less than 1%"
        if brief:
            return f"{said} of it in small Python objects, the rest large or native"
        return (
            f"Python's small objects hold {said} of it (their live blocks hardly rose): "
            "the rest is in allocations over 512 bytes (a bytearray or bytes appended to, "
            "numpy arrays, the storage of long lists and dicts) or native memory (a C "
            "extension's, ctypes')."
        )
    said = f"about {figure:.0%}" if estimated else f"at least {figure:.0%}"
    if brief:
        return f"{said} of it in small Python objects"
    return (
        f"{said[0].upper()}{said[1:]} of it is small Python objects (their live blocks rose "
        "with it, malloc's bytes for larger allocations hardly did): a container that only "
        "grows, such as a dict keyed by ids that never repeat or a list never trimmed."
    )


def what_holds(leak: dict[str, Any], *, brief: bool = False) -> tuple[str, str]:
    """What holds a leak (``LeakVerdict.to_dict()``): its kind -- "threads", "asyncio
    tasks", "file descriptors", "large" (buffers, native memory), "small" (objects in a
    container) or "" (open) -- and what to say of it. What piles up beside it speaks
    first: that is the cause, and beside threads malloc's rest is not pymalloc's arenas
    alone (thread stacks are mapped outside both)."""
    piles = leak.get("piling_up") or []
    if piles:
        return str(piles[0]["what"]), piled(piles, brief=brief)
    part = small_objects_part(leak.get("small_objects_share"), leak.get("malloc_share"))
    return ("" if part is None else part[0]), _held_text(part, brief)
