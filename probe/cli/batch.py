"""``probe batch-sweep``: time a model stage at several batch sizes and say which to serve."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from probe.cli.options import FiniteFloat, Latency
from probe.errors import ProbeError

if TYPE_CHECKING:  # the sweep's module loads lazily, as the verb runs
    from probe.batching.sweep import Progress

__all__ = ["batch_sweep_command"]


class _Sizes(click.ParamType):
    name = "sizes"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from probe.batching.sweep import parse_sizes

        if isinstance(value, tuple):
            return value
        try:
            return parse_sizes(str(value))
        except ValueError as e:
            self.fail(f"{value!r}: {e} (give 1,2,4,8 or 1-64)", param, ctx)


@click.command(
    "batch-sweep", short_help="Time a model function at several batch sizes; advise batching."
)
@click.argument("target", metavar="MODULE:FUNCTION")
@click.option(
    "--input", "source", required=True, metavar="SOURCE",
    help="What to call it with: MODULE:NAME of a function of the batch size that returns "
    "a batch, or of examples (an array or tensor along its first axis, a list); or a "
    ".npy, .json or .jsonl file of examples.",
)  # fmt: skip
@click.option(
    "--sizes", type=_Sizes(), default="1-64", show_default=True,
    help="Batch sizes: 1,2,4,8 or FIRST-LAST (doubling).",
)  # fmt: skip
@click.option(
    "--time", "min_time_s", type=FiniteFloat(0, 3600), default=0.5, show_default=True,
    metavar="SECONDS",
    help="How long each size is timed, its passes together (at least 5 calls a pass, at "
    "most 2000 in all).",
)  # fmt: skip
@click.option(
    "--passes", type=click.IntRange(1, 100), default=3, show_default=True, metavar="N",
    help="Times each size is visited, in turn with the others: a size's latency is its "
    "best pass's median, so a slow spell of the host slows one pass, not the size.",
)  # fmt: skip
@click.option(
    "--sla", "sla_s", type=Latency(), metavar="LATENCY",
    help="The p99 a request must stay within (50ms, 0.2s): batches that cannot are not advised.",
)  # fmt: skip
@click.option(
    "--rate", type=FiniteFloat(0, 1e7), metavar="PER_S",
    help="The requests a second the service receives: caps the queue delay at the time "
    "a batch takes to fill.",
)  # fmt: skip
@click.option(
    "--against", "run_dir", type=click.Path(path_type=Path, file_okay=False), metavar="RUN_DIR",
    help="A probe run of the service: the stage's share of it turns the stage's speedup "
    "into the service's (what `probe diff --sweep` then checks).",
)  # fmt: skip
@click.option(
    "--stage",
    metavar="NAME",
    help="The stage in --against's run (default: the function's name).",
)
@click.option(
    "--run-batch", type=click.IntRange(1, 1_000_000), default=1, show_default=True,
    metavar="N",
    help="The batch size the --against run served at.",
)  # fmt: skip
@click.option(
    "-o", "--out", "out_dir", type=click.Path(path_type=Path, file_okay=False),
    help="Directory for batch_sweep.json (default: probe-sweep-DATE-TIME).",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the advice as JSON.")
def batch_sweep_command(
    target: str,
    source: str,
    sizes: tuple[int, ...],
    min_time_s: float,
    passes: int,
    sla_s: float | None,
    rate: float | None,
    run_dir: Path | None,
    stage: str | None,
    run_batch: int,
    out_dir: Path | None,
    as_json: bool,
) -> None:
    """Call MODULE:FUNCTION at each batch size, time it, and advise dynamic batching.

    \b
    The function takes one batch (the model stage of a service: a forward pass, a
    numpy model); probe imports it from the current directory, calls it a few times
    to warm up, then times it at each size. From the latency by size it recommends the
    batch size and the maximum queue delay to configure (Triton's max_queue_delay,
    TorchServe's max_batch_delay), with the throughput they buy and the p99 they cost.

    \b
    Example:
      probe run -o before service.py
      probe batch-sweep service:score --input service:example_batch --against before
      (serve at the advised size) probe run -o after service.py --batch 16
      probe diff before after --sweep probe-sweep-...
    """
    from probe.batching import SweepSettings, batch_maker, resolve, sweep, write_sweep
    from probe.printable import printable
    from probe.reports.batching import sweep_text

    function = resolve(target)
    if not callable(function):
        raise ProbeError(f"{target} is not a function")
    against = _against(run_dir, stage or target.rpartition(":")[2].split(".")[-1], run_batch)
    make = batch_maker(source)
    settings = SweepSettings(sizes=sizes, min_time_s=min_time_s, passes=passes)
    calls, notes = sweep(function, make, settings, progress=_progress(passes))
    document = _document(target, source, settings, calls, notes, against, sla_s, rate)
    out = out_dir or Path(time.strftime("probe-sweep-%Y%m%d-%H%M%S"))
    path = write_sweep(out, calls, document)
    if as_json:
        click.echo(json.dumps(document, indent=2))
    else:
        click.echo(printable(sweep_text(document)))
        click.echo(printable(f"\nSweep: {path}"))


def _progress(passes: int) -> Progress:
    def say(k: int, size: int, latencies: list[float]) -> None:
        ordered = sorted(latencies)
        p50 = ordered[len(ordered) // 2]
        click.echo(
            f"  pass {k + 1}/{passes}  batch {size:>5}: {len(latencies):>4} calls, "
            f"p50 {p50 * 1e3:9.3f} ms, {size / p50:10.1f} items/s",
            err=True,
        )

    return say


def _against(run_dir: Path | None, stage: str, run_batch: int) -> dict[str, Any] | None:
    """The run the sweep is set against: the stage's share of its path and its basis."""
    if run_dir is None:
        return None
    from probe.analyzers.batching import stage_share
    from probe.analyzers.diagnosis import diagnose
    from probe.rundir.reader import load

    run = load(run_dir)
    d = diagnose(run)
    try:
        name, share = stage_share(d.breakdown.stages, stage)
    except LookupError as e:
        raise ProbeError(f"{run_dir}: {e}; name it with --stage") from None
    served = d.breakdown.requests.count > 0
    # a batch job's loop around the call runs once a call (analyzers.batching); a served
    # request runs its handler whatever the batch, and spans time their stage exactly
    exact = served or d.breakdown.source == "spans"
    glue, around, unsampled = (0.0, [], None) if exact else _glue(run, d, name)
    return {
        "share_from": d.breakdown.source,
        "stacks_at_tick": _stacks_at_tick(run.meta),
        "run": str(run_dir.resolve()),
        "stage": name,
        "share": round(share, 6),
        "glue_share": round(glue, 6),
        "glue_from": around,
        # callers of the stage whose own code drew no sample while it ran: the loop
        # around the call unmeasured (its bound), not absent
        "glue_unsampled": unsampled,
        "run_batch": run_batch,
        "basis": "throughput" if served else "job",
        "throughput_per_s": d.run.get("throughput_per_s") if served else None,
        "wall_s": None if served else d.run.get("wall_s"),
    }


def _glue(run: Any, d: Any, stage: str) -> tuple[float, list[str], dict[str, Any] | None]:
    """The stage's callers' own share of the run while it was called and their names;
    where callers were found but none of their own code was sampled then, what bounds
    that share (``calls_unsampled_around``), else None."""
    from probe.analyzers.batching import calls_unsampled_around, glue_share
    from probe.analyzers.stacks import callers_of, label_stacks

    library = (run.meta.get("python") or {}).get("library_paths", ())
    stacks, frames = run.tables["stacks"], run.tables["frames"]
    callers = callers_of(stacks, frames, stage, library)
    if not callers:
        return 0.0, [], None
    labels = label_stacks(stacks, frames, library)[["stack_id", "user_function", "comprehension"]]
    samples = run.tables["samples"][["ts_ns", "stack_id"]].merge(labels, on="stack_id")
    share, named = glue_share(samples, d.breakdown.stages, stage, callers)
    if named:
        return share, named, None
    n, up_to = calls_unsampled_around(samples, stage)
    unsampled = {"callers": sorted(callers - {stage}), "samples": n, "share_up_to": round(up_to, 4)}
    return share, named, unsampled if unsampled["callers"] else None


def _document(
    target: str,
    source: str,
    settings: Any,
    calls: Any,
    notes: list[str],
    against: dict[str, Any] | None,
    sla_s: float | None,
    rate: float | None,
) -> dict[str, Any]:
    from probe.analyzers.batching import across_passes, advise, batch_curve

    curve = batch_curve(calls)
    advice = advise(
        curve,
        run_share=against["share"] if against else None,
        run_batch=against["run_batch"] if against else 1,
        run_glue=against["glue_share"] if against else 0.0,
        sla_s=sla_s,
        rate=rate,
    )
    if advice is None:
        raise ProbeError(f"no batch size of {target} was timed enough to judge")
    predicted = _predicted(against, advice.speedup_over_run, advice.floor_over_run)
    spread = None
    if against and predicted:
        spread = across_passes(calls, advice, against["share"], against["glue_share"])
        across = None if spread is None else [round(spread.low, 4), round(spread.high, 4)]
        predicted["across_passes"] = across
    moved = None if spread is None else spread.note()
    return {
        "target": target,
        "predicted": predicted,
        "input": source,
        "sizes": list(settings.sizes),
        "time_per_size_s": settings.min_time_s,
        "passes": settings.passes,
        "host": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS")
            or os.environ.get("OMP_NUM_THREADS"),
        },
        "against": against,
        "advice": advice.to_dict(),
        "notes": notes + advice.notes + _share_notes(against) + ([moved] if moved else []),
    }


def _predicted(
    against: dict[str, Any] | None, speedup: float | None, floor: float | None
) -> dict[str, Any] | None:
    """The run's own figure at the advised size: its rate times the speedup (or its job's
    wall time over it); ``floor_speedup``: the speedup with the loop around the call
    counted once a request; ``across_passes`` (set by the caller): what the sweep's
    passes predict each on its own, lowest and highest."""
    if against is None or speedup is None:
        return None
    rate, wall = against["throughput_per_s"], against["wall_s"]
    return {
        "speedup": round(speedup, 4),
        "floor_speedup": None if floor is None else round(floor, 4),
        "throughput_per_s": None if not rate else round(rate * speedup, 3),
        "wall_s": None if not wall else round(wall / speedup, 4),
    }


def _stacks_at_tick(meta: dict[str, Any]) -> bool:
    """Were the run's stacks read at the ticks (``probe.samplers.peek``), nearly all?"""
    at_tick = (meta.get("collector") or {}).get("stacks_at_tick") or {}
    read, refused = at_tick.get("read", 0), at_tick.get("refused", 0)
    return read > 0 and refused * 10 <= read


def _share_notes(against: dict[str, Any] | None) -> list[str]:
    if against is None or against["share_from"] == "spans":
        return []
    if against.get("stacks_at_tick"):
        return [
            f"`{against['stage']}`'s share of the run comes from stack samples (a "
            "sample's error, not an exact figure): @probe.stage on it gives its exact share"
        ]
    return [
        f"`{against['stage']}`'s share of the run comes from stack samples read once the "
        "sampler had the GIL, which lean toward calls that release it (a numeric "
        "stage's): the prediction may be high; @probe.stage on it gives its exact share"
    ]
