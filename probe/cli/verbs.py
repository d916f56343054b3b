"""The ``probe`` command: a thin set of verbs, one module each (``probe.cli`` exports it).

The CLI is the composition root: ``run`` imports only collection code before the target
starts; analysis and rendering run afterwards, in the finisher process (see
``probe.cli.sidecar`` and ``probe.cli.finisher``). Every ``ProbeError`` becomes one line
on stderr and its exit status.
"""

from __future__ import annotations

import importlib
import sys

import click

from probe import __version__
from probe.errors import ProbeError

__all__ = ["cli", "main"]

# verb -> "module:command". Imported when named, so that ``probe run`` reaches the target
# without importing the other verbs (~25 ms), and ``python -m probe.cli.sidecar`` (a
# submodule: this package is imported first) without importing any.
VERBS = {
    "run": "probe.cli.run:run_command",
    "analyze": "probe.cli.analyze:analyze_command",
    "diff": "probe.cli.diff:diff_command",
    "report": "probe.cli.report:report_command",
    "watch": "probe.cli.watch:watch_command",
    "load": "probe.cli.load:load_command",
    "batch-sweep": "probe.cli.batch:batch_sweep_command",
    "export": "probe.cli.export:export_command",
    "check": "probe.cli.check:check_command",
}


class _Verbs(click.Group):
    """A group whose verbs are imported when used (click's documented lazy group)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(VERBS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in VERBS:
            return None
        module, name = VERBS[cmd_name].split(":")
        command: click.Command = getattr(importlib.import_module(module), name)
        return command


@click.group(cls=_Verbs, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="probe")
def cli() -> None:
    """Profile a Python inference service and say what limits it.

    \b
    Start with:  probe run service.py [ARGS]...
    Then:        probe report RUN_DIR --open · probe diff RUN_A RUN_B
    Staging:     probe watch --pid PID · probe watch -- CMD [ARGS]...
    Load:        probe load http://127.0.0.1:8000/predict --rate 100
    Batching:    probe batch-sweep service:model --input service:example_batch
    Export:      probe export RUN_DIR --format perfetto|chrome|speedscope
    CI gate:     probe check RUN_DIR --baseline RUN_DIR --assert 'p99 < 200ms'
    """


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="probe", standalone_mode=False)
    except ProbeError as e:
        from probe.printable import printable

        click.echo(printable(f"probe: error: {e}"), err=True)  # paths, names: escaped
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo("Aborted!", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
