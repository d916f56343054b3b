"""The code keeps the shape CONVENTIONS.md gives it, checked on the source with ast:
short functions in the pure parts, no private name borrowed across modules, and the
pipeline's layers importing only downward (probe -> run directory -> analyzers -> reports,
the CLI on top)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# the source folders, as installed: analyzers/ and reports/ are probe.analyzers, probe.reports
PACKAGES = {"probe": "probe", "analyzers": "probe.analyzers", "reports": "probe.reports"}
# a function longer than a screen does several things; the bar issue 11 set for the pure parts
MAX_FUNCTION_LINES = 60


def modules() -> Iterator[tuple[str, Path, ast.Module]]:
    """(dotted name, path, tree) of every source module, each once (not via the symlinks)."""
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder)
            if folder == "probe" and rel.parts[0] in ("analyzers", "reports"):
                continue  # the symlinks to the folders above
            parts = [package, *rel.with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join(parts), path, ast.parse(path.read_text(), str(path))


def imported(module: str, tree: ast.Module) -> Iterator[tuple[str, list[str], int]]:
    """(module imported from, names, line) for every import, relative ones resolved."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".")[: -node.level]
                base = ".".join([*package, base] if base else package)
            yield base, [a.name for a in node.names], node.lineno


def test_every_function_in_the_analyzers_and_reports_fits_on_a_screen():
    long = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)"
        for name, path, tree in modules()
        if name.startswith(("probe.analyzers", "probe.reports"))
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (length := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES  # type: ignore[operator]
    ]
    assert not long, "functions over 60 lines:\n" + "\n".join(long)


# A private module with its one owner: the compiled halves (C or C++, no Python source)
# of probe.spans, probe.samplers.peek and probe.samplers.torch_windows are imported by
# those and nothing else.
PRIVATE_MODULE_OWNERS = {
    ("probe", "_fastspans"): "probe.spans",
    ("probe", "_tickpeek"): "probe.samplers.peek",
    ("probe", "_torchclose"): "probe.samplers.torch_windows",
}


def test_no_module_imports_another_modules_private_names():
    borrowed = [
        f"{path.relative_to(ROOT)}:{line} imports {name} from {source}"
        for module, path, tree in modules()
        for source, names, line in imported(module, tree)
        if source.startswith("probe")
        for name in names
        if name.startswith("_") and not name.startswith("__")
        if PRIVATE_MODULE_OWNERS.get((source, name)) != module
    ]
    assert not borrowed, "\n".join(borrowed)


# Each layer and what it may not import. Contracts may be read by the layers they join:
# the run directory's (probe.rundir) and the watch agent's formats
# (probe.watchdog.formats). The service side runs inside the user's process, where only
# numpy may be added (no pandas, no pyarrow from analysis); the watchdog's documented
# exception is the leak detector and the leak page, both numpy-only, which it needs in
# the service when no `probe watch` runs beside it.
FORBIDDEN = {
    "probe.analyzers": ("probe.reports", "probe.cli", "probe.session", "probe.samplers",
                        "probe.watchdog.alerts", "probe.watchdog.attribution",
                        "probe.watchdog.monitor", "probe.watchdog.limits", "probe.launcher"),
    "probe.reports": ("probe.cli", "probe.session", "probe.samplers", "probe.launcher"),
    "probe.rundir": ("probe.analyzers", "probe.reports", "probe.cli"),
    "probe.samplers": ("probe.analyzers", "probe.reports", "probe.cli", "pandas", "pyarrow"),
    "probe.session": ("probe.analyzers", "probe.reports", "probe.cli", "pandas"),
    "probe.spans": ("probe.analyzers", "probe.reports", "probe.cli", "pandas"),
    "probe.watchdog": ("probe.cli", "pandas", "pyarrow", "probe.rundir",
                       "probe.analyzers.diagnosis", "probe.reports.html"),
}  # fmt: skip
WATCHDOG_MAY_IMPORT = {"probe.analyzers.leaks", "probe.reports.leak"}


def _violations() -> list[str]:
    found = []
    for module, path, tree in modules():
        layer = next(
            (lay for lay in FORBIDDEN if module == lay or module.startswith(lay + ".")), None
        )
        for source, _, line in imported(module, tree):
            where = f"{path.relative_to(ROOT)}:{line}"
            if layer and any(source == f or source.startswith(f + ".") for f in FORBIDDEN[layer]):
                found.append(f"{where} ({layer}) imports {source}")
            elif layer == "probe.watchdog" and source.startswith(
                ("probe.analyzers", "probe.reports")
            ):
                if source not in WATCHDOG_MAY_IMPORT:
                    found.append(f"{where} (watchdog) imports {source}")
            # verbs are siblings: the end-of-run pipeline lives in reports, not in a verb
            if module.startswith("probe.cli.") and source.startswith("probe.cli."):
                # probe.cli.options is no verb: the option types every verb shares
                if source != "probe.cli.options" and not (
                    module == "probe.cli.run" and source == "probe.cli.sidecar"
                ):
                    found.append(f"{where} (a verb) imports {source}")
    return found


def test_each_layer_imports_only_what_is_below_it():
    assert not _violations(), "\n".join(_violations())


@pytest.mark.parametrize(
    "module, source",
    [("probe.analyzers.x", "probe.reports.html"), ("probe.samplers.x", "pandas")],
)
def test_the_layer_check_sees_a_wrong_import(module, source, monkeypatch):
    # the check itself: a forbidden import planted in a fake module is reported
    fake = ast.parse(f"import {source}\n")
    monkeypatch.setattr(
        __import__(__name__, fromlist=["modules"]),
        "modules",
        lambda: iter([(module, ROOT / "x.py", fake)]),
    )
    assert _violations() == [f"x.py:1 ({module.rsplit('.', 1)[0]}) imports {source}"]
