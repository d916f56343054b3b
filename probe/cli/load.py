"""``probe load``: drive a service on 127.0.0.1 and print what its clients saw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from probe.cli.options import FiniteFloat

__all__ = ["load_command"]


@click.command("load", short_help="Drive a service on 127.0.0.1 and measure its latency.")
@click.argument("url")
@click.option(
    "--mix",
    type=click.Path(path_type=Path, dir_okay=False),
    help="TOML (or .json) file of weighted requests: [[request]] method, path, json or "
    "body_file, headers, weight, name. Default: GET the URL's path.",
)
@click.option(
    "-c", "--concurrency", type=click.IntRange(1, 10_000), metavar="N",
    help="Closed loop: N clients, each sending its next request when the last is "
    "answered (default 8 when no --rate).",
)  # fmt: skip
@click.option(
    "--rate", type=FiniteFloat(0, 1e6, low_open=True), metavar="PER_S",
    help="Open loop: requests due at this rate whatever the answers do; latency counts "
    "from each request's due time, so a stall shows in every request due during it.",
)  # fmt: skip
@click.option(
    "-d", "--duration", type=FiniteFloat(0, 86_400, low_open=True), default=10.0,
    show_default=True, metavar="SECONDS", help="How long to measure, after the warm-up.",
)  # fmt: skip
@click.option(
    "--warmup", type=FiniteFloat(0, 86_400, low_open=False), default=0.0, show_default=True,
    metavar="SECONDS", help="Load first sent for this long and left out of the figures.",
)  # fmt: skip
@click.option(
    "--timeout", type=FiniteFloat(0, 3600, low_open=True), default=10.0, show_default=True,
    metavar="SECONDS", help="The longest wait for one answer.",
)  # fmt: skip
@click.option(
    "--max-connections", type=click.IntRange(1, 10_000), default=256, show_default=True,
    help="Open loop: the most requests in flight; past it, sends go out late.",
)  # fmt: skip
@click.option(
    "--wait", "wait_s", type=FiniteFloat(0, 3600, low_open=False), default=30.0, show_default=True,
    metavar="SECONDS", help="How long to wait for the service to listen before the load.",
)  # fmt: skip
@click.option("--seed", type=int, default=0, show_default=True, help="The mix's choices.")
@click.option(
    "--allow-remote", is_flag=True,
    help="Allow a host that is not this machine's loopback.",
)  # fmt: skip
@click.option(
    "--out", type=click.Path(path_type=Path, dir_okay=False),
    help="Also write every request (id, label, due/sent/done ns, status) to this Parquet file.",
)  # fmt: skip
@click.option(
    "--sweep", "sweep_steps", metavar="STEPS",
    help="Step the load: clients (1,4,16,64) or rates (50/s,100/s,200/s), each measured for "
    "--duration after --warmup; prints throughput and latency at each step.",
)  # fmt: skip
@click.option(
    "--against", type=click.Path(path_type=Path, file_okay=False, exists=True),
    metavar="RUN_DIR",
    help="With --sweep: a probe run of the same service (its diagnosis.json); each step "
    "shows the throughput and latency its capacity analysis predicted, and the measured "
    "maximum is set beside its predicted ceiling.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def load_command(
    url: str,
    mix: Path | None,
    concurrency: int | None,
    rate: float | None,
    duration: float,
    warmup: float,
    timeout: float,
    max_connections: int,
    wait_s: float,
    seed: int,
    allow_remote: bool,
    out: Path | None,
    sweep_steps: str | None,
    against: Path | None,
    as_json: bool,
) -> None:
    """Send requests to URL (a service on 127.0.0.1) and print the latency its clients saw.

    \b
    Each request carries an x-probe-request-id header; under `probe run` the service's
    request spans take it as their id.

    \b
    Examples:
      probe load http://127.0.0.1:8000/health -c 16 -d 30
      probe load http://127.0.0.1:8000 --mix mix.toml --rate 200 --warmup 5
      probe load http://127.0.0.1:8000/predict --sweep 1,4,16,64 -d 5 --against RUN_DIR
    """
    from probe.load import LoadSettings, Mix, drive, figures, read_mix
    from probe.load.store import write_records
    from probe.load.target import parse_target, wait_until_listening
    from probe.reports.load import LoadText

    if concurrency is not None and rate is not None:
        raise click.UsageError("give --concurrency (closed loop) or --rate (open loop), not both")
    if sweep_steps is not None and (concurrency is not None or rate is not None):
        raise click.UsageError("--sweep gives each step's clients or rate: no -c or --rate")
    if sweep_steps is None and against is not None:
        raise click.UsageError("--against compares a --sweep with a run's prediction")
    if sweep_steps is not None and out is not None:
        raise click.UsageError("--out writes one load's requests: not with --sweep")
    target = parse_target(url, allow_remote=allow_remote)
    requests = read_mix(mix) if mix is not None else Mix.single(target.path)
    settings = LoadSettings(
        concurrency=None if rate is not None else (concurrency or 8),
        rate=rate,
        duration_s=duration,
        warmup_s=warmup,
        timeout_s=timeout,
        max_connections=max_connections,
        seed=seed,
    )
    if sweep_steps is not None:
        _sweep(target, requests, settings, sweep_steps, against, wait_s, as_json)
        return
    wait_until_listening(target, wait_s)
    records = drive(target.host, target.port, requests, settings)
    if out is not None:
        write_records(records, out)
    result = figures(records, mode="open" if rate is not None else "closed", duration_s=duration)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        click.echo(LoadText.from_figures(result).render())


def _sweep(
    target: Any,
    requests: Any,
    settings: Any,
    steps_text: str,
    against: Path | None,
    wait_s: float,
    as_json: bool,
) -> None:
    from probe.load import drive, figures
    from probe.load.sweep import parse_steps, sweep
    from probe.load.target import wait_until_listening
    from probe.reports.load import SweepText

    steps = parse_steps(steps_text)
    capacity = _capacity_of(against) if against is not None else None
    wait_until_listening(target, wait_s)

    def measure(step_settings: Any) -> Any:
        records = drive(target.host, target.port, requests, step_settings)
        mode = "open" if step_settings.rate is not None else "closed"
        return figures(records, mode=mode, duration_s=step_settings.duration_s)

    def progress(done: Any) -> None:
        if not as_json:  # each step as it ends: a sweep takes minutes
            click.echo(SweepText.step_line(done), err=True)

    done = sweep(steps, settings, measure, capacity, progress)
    if as_json:
        click.echo(json.dumps({"steps": [s.to_dict() for s in done], "capacity": capacity}))
    else:
        click.echo(SweepText(done, capacity).render())


def _capacity_of(run_dir: Path) -> dict[str, Any]:
    """The capacity analysis of a run directory's diagnosis.json (one clear error if it
    has none)."""
    from probe.errors import ProbeError

    path = run_dir / "diagnosis.json"
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ProbeError(f"--against {run_dir}: no readable diagnosis.json ({e})") from None
    capacity = document.get("capacity") if isinstance(document, dict) else None
    if not capacity:
        raise ProbeError(
            f"--against {run_dir}: its diagnosis has no capacity analysis (it needs a served "
            "app's requests: probe run --load SPEC …)"
        )
    return dict(capacity)
