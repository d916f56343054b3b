"""``probe analyze``: diagnose a run directory again, without profiling again."""

from __future__ import annotations

from pathlib import Path

import click

from probe.cli.options import Latency

__all__ = ["analyze_command"]


@click.command(
    "analyze", short_help="Diagnose a run directory (writes diagnosis.json), or a GPU trace."
)
@click.argument("run_dir", metavar="RUN_DIR|TRACE", type=click.Path(path_type=Path))
@click.option(
    "--json", "as_json", is_flag=True, help="Print diagnosis.json instead of the verdict."
)
@click.option("--no-write", is_flag=True, help="Do not (re)write RUN_DIR/diagnosis.json.")
@click.option(
    "--sla",
    "sla_s",
    type=Latency(),
    metavar="LATENCY",
    help="Judge a served app's capacity by this p99 (200ms, 0.5s) instead of the run's own --sla.",
)
def analyze_command(run_dir: Path, as_json: bool, no_write: bool, sla_s: float | None) -> None:
    """Diagnose RUN_DIR: what limits the service, what each fix would buy.

    \b
    Reads a run directory written by `probe run` (complete, or left behind by a
    killed process: what was flushed is salvaged, with a note), writes
    RUN_DIR/diagnosis.json and prints the verdict.

    \b
    Given a torch.profiler/Kineto trace instead (a .json or .json.gz file, recorded
    anywhere), diagnoses the trace: whether the GPU or the host limits it, GPU time
    by kernel family and precision, idle time by cause, each span's host and GPU
    time, and what each fix would buy. Nothing is written (--json prints it).

    \b
    Examples:
      probe analyze .probe/runs/20261122T101500Z-service
      probe analyze --json RUN_DIR | jq .recommendations
      probe analyze worker0.pt.trace.json.gz
    """
    from probe.printable import printable_json
    from probe.reports.json import DiagnosisJson

    if run_dir.is_file():
        _analyze_trace(run_dir, as_json)
        return
    from probe.reports.pipeline import load_analysis, verdict_text

    analysis = load_analysis(run_dir, write_json=not no_write, sla_s=sla_s)
    if as_json:
        # names from the service: no escape sequence or bidi override reaches the terminal
        click.echo(printable_json(DiagnosisJson.from_analysis(analysis).render()), nl=False)
    else:
        written = () if no_write else ("diagnosis.json",)
        click.echo(verdict_text(analysis, run_dir=run_dir, written=written))


def _analyze_trace(path: Path, as_json: bool) -> None:
    from probe.analyzers.trace_diagnosis import diagnose_trace
    from probe.printable import printable_json
    from probe.reports.json import DiagnosisJson, json_safe
    from probe.reports.trace import TraceVerdict
    from probe.rundir.kineto import read_kineto

    diagnosis = diagnose_trace(read_kineto(path))
    if as_json:
        text = DiagnosisJson(json_safe(diagnosis.to_dict())).render()
        click.echo(printable_json(text), nl=False)
    else:
        click.echo(TraceVerdict.from_trace_diagnosis(diagnosis).render())
