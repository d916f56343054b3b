"""The function a sweep calls and the batches it calls it with.

``resolve("module:attr")`` (or ``path/to/file.py:attr``) imports the module the way
``python -m`` and uvicorn do -- the current directory first on ``sys.path`` -- and
returns the attribute. ``batch_maker(source)`` -> ``make(size)``, a batch of ``size``
examples from:

* ``module:attr`` naming a callable: called with the size, it returns the batch itself
  (the user's own way of building one: a tokenizer's padding, a collate function);
* ``module:attr`` naming examples, or a ``.npy`` file, or a ``.json`` list / ``.jsonl``
  file: examples along the first axis; a batch is ``size`` of them in turn (wrapping
  around when there are fewer), stacked the way they came: an array stays an array, a
  torch tensor a tensor, a list a list.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from probe.errors import ProbeError

__all__ = ["batch_maker", "resolve"]


def resolve(spec: str) -> Any:
    """The object ``module:attr`` (dotted attributes allowed) names; ProbeError if not."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise ProbeError(f"{spec!r} is not MODULE:NAME (e.g. service:predict)")
    module = _import(module_name)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ProbeError(f"{module_name} has no {attr!r}") from None
    return obj


def _import(name: str) -> Any:
    if name.endswith(".py"):
        path = Path(name)
        if not path.is_file():
            raise ProbeError(f"no such file: {name}")
        sys.path.insert(0, str(path.resolve().parent))
        name = path.stem
    elif "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name == name or name.startswith(f"{e.name}."):
            raise ProbeError(f"no module named {name!r} (run from its directory)") from None
        raise ProbeError(f"importing {name}: {e}") from None
    except Exception as e:  # the user's module failed while importing: one line
        raise ProbeError(f"importing {name} raised {type(e).__name__}: {e}") from None


def batch_maker(source: str) -> Callable[[int], Any]:
    """``make(size)`` -> a batch of ``size`` examples from ``source`` (module docstring)."""
    path = Path(source)
    if path.suffix in (".npy", ".json", ".jsonl") and ":" not in source:
        return _from_examples(_read_examples(path), source)
    obj = resolve(source)
    if callable(obj) and not hasattr(obj, "shape"):
        return obj
    return _from_examples(obj, source)


def _read_examples(path: Path) -> Any:
    if not path.is_file():
        raise ProbeError(f"no such input file: {path}")
    try:
        if path.suffix == ".npy":
            import numpy as np

            return np.load(path, allow_pickle=False)
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        return json.loads(text)
    except (ValueError, OSError) as e:
        raise ProbeError(f"{path} is not a readable {path.suffix[1:]} file: {e}") from None


def _from_examples(examples: Any, source: str) -> Callable[[int], Any]:
    try:
        count = len(examples)
    except TypeError:
        raise ProbeError(f"{source} is neither a function of the batch size nor examples") from None
    if count == 0:
        raise ProbeError(f"{source} holds no examples")
    if isinstance(examples, list):
        return lambda size: [examples[i % count] for i in range(size)]
    if not hasattr(examples, "shape") or not examples.shape:
        raise ProbeError(f"{source}: examples must be a list, or an array along its first axis")
    return lambda size: examples[[i % count for i in range(size)]]
