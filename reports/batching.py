"""Dynamic-batching advice as terminal text: a sweep's (``probe batch-sweep``) and a
diagnosis's (stage spans with a ``batch`` size). Plain text: the caller escapes it for
the terminal (``probe.printable``, through ``reports.terminal``, which imports this module)."""

from __future__ import annotations

from typing import Any

__all__ = ["batching_lines", "sweep_text"]


def sweep_text(document: dict[str, Any]) -> str:
    """The advice, the latency curve it came from, and what the against-run gains."""
    advice = document["advice"]
    lines = [f"probe batch-sweep: {document['target']}", ""]
    lines += _curve_lines(advice)
    lines += ["", *_advice_lines(advice)]
    lines += _against_lines(document.get("against"), document.get("predicted"))
    lines += [f"note: {n}" for n in document.get("notes", [])]
    return "\n".join(lines)


def batching_lines(advice: dict[str, Any] | None) -> list[str]:
    """A diagnosis's batching section (``BatchAdvice.to_dict()``), under its heading."""
    if advice is None:
        return []
    head = f"Batching `{advice.get('stage', '')}` (its spans' batch sizes; the stage alone):"
    return ["", head, *_curve_lines(advice), *_advice_lines(advice)] + [
        f"  note: {n}" for n in advice.get("notes", [])
    ]


def _curve_lines(advice: dict[str, Any]) -> list[str]:
    service = advice["basis"] == "service"
    head = "service req/s" if service else "items/s"
    lines = [f"  {'batch':>6} {'calls':>6} {'p50 ms':>10} {'p99 ms':>10} {head:>14}"]
    for point in advice["curve"]:
        mark = " ◀" if point["batch"] == advice["batch"] else ""
        over = "" if point["fits_sla"] else "  over the SLA"
        lines.append(
            f"  {point['batch']:>6} {point['calls']:>6} {point['p50_ms']:>10.3f} "
            f"{point['p99_ms']:>10.3f} {point['throughput']:>14.1f}{over}{mark}"
        )
    fit = advice.get("fit")
    if fit is not None:
        lines.append(
            f"  a call: {fit['fixed_ms']:.3f} ms whatever its size + {fit['per_item_ms']:.4f} ms "
            f"a request (fit r² {fit['r2']:.2f}): batching can amortise "
            f"{fit['fixed_share']:.0%} of a lone request's call"
        )
    return lines


def _advice_lines(advice: dict[str, Any]) -> list[str]:
    gain = f" ({advice['speedup']:.2f}× batch 1)" if advice.get("speedup") else ""
    what = "the service" if advice["basis"] == "service" else "the stage alone"
    return [
        f"Advice: batch {advice['batch']}, max queue delay {advice['max_queue_delay_ms']:.2f} ms",
        f"  {what}: at most {advice['throughput']:.1f} requests/s{gain}; "
        f"p99 ≤ {advice['p99_bound_ms']:.2f} ms below that load",
    ]


def _against_lines(against: dict[str, Any] | None, predicted: dict[str, Any] | None) -> list[str]:
    """What the run the sweep was set against gains, or how to ask for it."""
    if against is None:
        return ["  (the stage alone: give --against RUN_DIR for what the whole service gains)"]
    if predicted is None:
        return []
    if against["basis"] == "throughput" and predicted["throughput_per_s"]:
        figure = f"{against['throughput_per_s']:.1f}/s → {predicted['throughput_per_s']:.1f}/s"
    else:
        figure = f"job {against['wall_s']:.2f} s → {predicted['wall_s']:.2f} s"
    lines = [
        f"  {against['run']}: {figure} predicted ({predicted['speedup']:.2f}×; "
        f"`{against['stage']}` is {against['share']:.0%} of its path at batch "
        f"{against['run_batch']})"
    ]
    around, floor = against.get("glue_from") or [], predicted.get("floor_speedup")
    if around and floor is not None:
        names = ", ".join(f"`{n}`" for n in around)
        lines.append(
            f"  {names} around the call ({against['glue_share']:.0%} of the run) counted once "
            f"a batch: {floor:.2f}× if that work is per request"
        )
    unsampled = against.get("glue_unsampled")
    if unsampled:
        names = ", ".join(f"`{n}`" for n in unsampled["callers"])
        lines.append(
            f"  {names} around the call: unmeasured (none of the {unsampled['samples']} "
            f"samples taken while the stage was called fell in its own code: up to "
            f"{unsampled['share_up_to']:.0%} of that time, 95%). The prediction counts it "
            "once a request, a floor; done once a batch, it would gain more. A longer run "
            "or a higher --hz measures it."
        )
    return lines
