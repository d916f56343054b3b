"""JSON renderer: ``diagnosis.json`` (schema ``probe.diagnosis/1``, DESIGN.md)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from probe.analyzers.diagnosis import Diagnosis

__all__ = ["json_safe", "render_json", "write_diagnosis"]


def json_safe(value: Any) -> Any:
    """NaN and infinity are not JSON: they become null (numpy scalars: Python ones)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return json_safe(value.item())
    return value


def render_json(diagnosis: Diagnosis) -> str:
    return (
        json.dumps(json_safe(diagnosis.to_dict()), indent=2, ensure_ascii=False, allow_nan=False)
        + "\n"
    )


def write_diagnosis(diagnosis: Diagnosis, run_dir: Path) -> Path:
    """Write ``run_dir/diagnosis.json`` atomically; returns its path."""
    path = run_dir / "diagnosis.json"
    tmp = run_dir / ".diagnosis.json.tmp"
    tmp.write_text(render_json(diagnosis), encoding="utf-8")
    os.replace(tmp, path)
    return path
