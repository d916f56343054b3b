"""The ``probe`` command: a thin set of verbs, one module each.

The CLI is the composition root: ``run`` imports only collection code before the target
starts; analysis and rendering run afterwards, in the sidecar process (see
``probe.cli.sidecar``). Every ``ProbeError`` becomes one line on stderr and its exit status.
"""

from __future__ import annotations

import sys

import click

from probe import __version__
from probe.cli.analyze import analyze_command
from probe.cli.batch import batch_sweep_command
from probe.cli.diff import diff_command
from probe.cli.load import load_command
from probe.cli.report import report_command
from probe.cli.run import run_command
from probe.cli.watch import watch_command
from probe.errors import ProbeError
from probe.reports.terminal import printable

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="probe")
def cli() -> None:
    """Profile a Python inference service and say what limits it.

    \b
    Start with:  probe run service.py [ARGS]...
    Then:        probe report RUN_DIR --open · probe diff RUN_A RUN_B
    Staging:     probe watch --pid PID · probe watch -- CMD [ARGS]...
    Load:        probe load http://127.0.0.1:8000/predict --rate 100
    Batching:    probe batch-sweep service:model --input service:example_batch
    """


cli.add_command(run_command)
cli.add_command(analyze_command)
cli.add_command(diff_command)
cli.add_command(report_command)
cli.add_command(watch_command)
cli.add_command(load_command)
cli.add_command(batch_sweep_command)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="probe", standalone_mode=False)
    except ProbeError as e:
        click.echo(printable(f"probe: error: {e}"), err=True)  # paths, names: escaped
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo("Aborted!", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
