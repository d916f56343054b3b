"""Patches applied to servers as the target imports them (see the package docstring).

A finder placed first on ``sys.meta_path`` answers for a few module names only: it asks
the other finders for the real spec and wraps its loader, so that the patch runs right
after the module's own code. A module already imported when ``install`` is called is
patched at once. A patch that fails (a server version whose internals moved) costs the
run its request spans, never the target: the failure is kept in ``failures`` for
meta.json.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

__all__ = ["SERVERS", "UNRECOGNISED", "failures", "install", "patched", "uninstall"]

Patch = Callable[[ModuleType], None]

# What went wrong patching a server, by module name (said in meta.json).
failures: dict[str, str] = {}
# The modules patched in this process.
patched: list[str] = []


def _patch_uvicorn(module: ModuleType) -> None:
    from probe.serving.asgi import RequestSpans

    config = module.Config
    load = config.load

    @functools.wraps(load)
    def load_with_request_spans(self: Any) -> None:
        load(self)
        if not isinstance(self.loaded_app, RequestSpans):
            self.loaded_app = RequestSpans(self.loaded_app)

    config.load = load_with_request_spans


def _patch_werkzeug(module: ModuleType) -> None:
    from probe.serving.wsgi import RequestSpans

    run_simple = module.run_simple

    @functools.wraps(run_simple)
    def run_simple_with_request_spans(
        hostname: str, port: int, application: Any, *args: Any, **kwargs: Any
    ) -> Any:
        if not isinstance(application, RequestSpans):
            application = RequestSpans(application)
        return run_simple(hostname, port, application, *args, **kwargs)

    setattr(module, "run_simple", run_simple_with_request_spans)  # noqa: B010 - typed module


def _patch_anyio(module: ModuleType) -> None:
    from probe.serving.asgi import worker_thread_spans

    setattr(module, "run_sync", worker_thread_spans(module.run_sync))  # noqa: B010


# module name -> the patch applied right after it is imported
SERVERS: dict[str, Patch] = {
    "uvicorn.config": _patch_uvicorn,
    "werkzeug.serving": _patch_werkzeug,
    # Starlette's run_in_threadpool (sync routes, sync dependencies) goes through it
    "anyio.to_thread": _patch_anyio,
}


# Servers probe does not wrap, seen imported at the run's end: said in meta.json, and the
# diagnosis says how to get request spans without them. Servers only: a framework that is
# also a client (aiohttp) or an ORM (Django) says nothing of serving when imported.
UNRECOGNISED = ("gunicorn", "hypercorn", "waitress")


def _apply(name: str, module: ModuleType, patch: Patch) -> None:
    try:
        patch(module)
    except Exception as e:  # never the target's failure: the run goes on without spans
        failures[name] = f"{type(e).__name__}: {e}"
    else:
        patched.append(name)


class _PatchingLoader(importlib.abc.Loader):
    """The module's own loader, then the patch."""

    def __init__(self, loader: Any, name: str, patch: Patch) -> None:
        self._loader, self._name, self._patch = loader, name, patch

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # the module sees its own loader, as it would without probe
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        _apply(self._name, module, self._patch)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._loader, attr)


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, patches: dict[str, Patch]) -> None:
        self._patches = dict(patches)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        patch = self._patches.pop(fullname, None)  # once: a reload is the target's own
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader, fullname, patch)
                return spec
        return None


_finder: _AfterImport | None = None


def install(servers: dict[str, Patch] | None = None) -> None:
    """Patch each server in ``servers`` (default ``SERVERS``) when it is imported, or now
    if it already is. Once per process: a second call does nothing."""
    global _finder
    if _finder is not None:
        return
    pending = {}
    for name, patch in (SERVERS if servers is None else servers).items():
        module = sys.modules.get(name)
        if module is not None:
            _apply(name, module, patch)
        else:
            pending[name] = patch
    _finder = _AfterImport(pending)
    sys.meta_path.insert(0, _finder)


def uninstall() -> None:
    """Stop patching modules imported from now on (the ones patched stay patched)."""
    global _finder
    if _finder is not None and _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    _finder = None
