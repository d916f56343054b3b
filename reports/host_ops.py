"""Terminal lines for a model's host side (``diagnosis.json``'s ``cpu`` block of a trace or
of a run's torch.profiler window): the ops by self time, the time its busiest thread
spends between ops, and a decoder's growing prefix. Shared by the run's verdict
(``reports.terminal``) and a trace's (``reports.trace``); the caller passes the lines
through ``printable`` (op names come from the traced program)."""

from __future__ import annotations

from typing import Any

__all__ = ["host_op_lines"]


def host_op_lines(cpu: dict[str, Any], *, rows: int = 6, indent: str = "  ") -> list[str]:
    lines: list[str] = []
    threads = cpu.get("threads") or []
    if threads:
        t = threads[0]
        lines.append(
            f"{indent}thread {t['tid']}: {1 - t['gap_share']:.0%} of its traced "
            f"{t['span_ns'] / 1e6:,.1f} ms in ops, {t['gap_share']:.0%} outside any "
            f"op (Python, waits); {t['top_level_ops']:,} top-level ops, median "
            f"{t['median_op_ns'] / 1e3:,.1f} us"
        )
    ops = (cpu.get("ops") or [])[:rows]
    if ops:
        cost = cpu.get("profiler_op_cost_ns") or 0.0
        paid = f", {cost:,.0f} ns as the trace's gaps read it" if cost else ", none taken off"
        lines.append(f"{indent}ops by self time (less the profiler's own cost per op{paid}):")
        lines += [
            f"{indent}  {str(o['name'])[:44]:<44} {o['self_share']:6.1%}  {o['calls']:>7,} calls"
            f", mean {o['mean_ns'] / 1e3:,.1f} us{'  ' + o['dtype'] if o['dtype'] else ''}"
            for o in ops
        ]
    prefix = cpu.get("growing_prefix")
    if prefix:
        lines.append(
            f"{indent}growing prefix: {prefix['op']} on {prefix['shape']}, "
            f"{prefix['steps']} steps in {prefix['runs']} generation(s), each step "
            f"{prefix['per_step_us']:,.0f} us + {prefix['per_token_us']:,.1f} us a token of "
            f"prefix: re-run on the whole sequence (no KV cache)" + _rescaled_note(prefix)
        )
    return lines


def _rescaled_note(prefix: dict[str, Any]) -> str:
    rescaled = int(prefix.get("rescaled_steps") or 0)
    if not rescaled:
        return ""
    return f"; {rescaled} step(s) the host ran off its usual speed scaled to it in the fit"
