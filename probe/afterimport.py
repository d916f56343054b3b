"""Running a patch right after a module's own code, when the target imports it.

A finder placed first on ``sys.meta_path`` answers for a few module names only: it asks
the other finders for the real spec and wraps its loader, so that the patch runs right
after the module's own code (the module keeps its own loader in ``__loader__``). Used
for the servers probe wraps (``probe.serving.hooks``) and for multiprocessing's spawn
(``probe.workers``): importing those modules for the target would change what it loads.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

__all__ = ["AfterImport", "Patch"]

Patch = Callable[[ModuleType], None]
# (module name, module, patch): applies the patch and keeps what became of it
Apply = Callable[[str, ModuleType, Patch], None]


class _PatchingLoader(importlib.abc.Loader):
    """The module's own loader, then the patch."""

    def __init__(self, loader: Any, name: str, patch: Patch, apply: Apply) -> None:
        self._loader, self._name, self._patch, self._apply = loader, name, patch, apply

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # the module sees its own loader, as it would without probe
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        self._apply(self._name, module, self._patch)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._loader, attr)


class AfterImport(importlib.abc.MetaPathFinder):
    """Patches each module of ``patches`` once: now if it is already imported, else
    right after the target imports it (``install``); ``apply`` runs each patch."""

    def __init__(self, patches: dict[str, Patch], apply: Apply) -> None:
        self._patches = dict(patches)
        self._apply = apply

    def install(self) -> None:
        for name in list(self._patches):
            module = sys.modules.get(name)
            if module is not None:
                self._apply(name, module, self._patches.pop(name))
        sys.meta_path.insert(0, self)

    def uninstall(self) -> None:
        """Stop patching modules imported from now on (the ones patched stay patched)."""
        if self in sys.meta_path:
            sys.meta_path.remove(self)

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
                    spec.loader = _PatchingLoader(spec.loader, fullname, patch, self._apply)
                return spec
        return None
