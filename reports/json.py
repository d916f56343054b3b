"""JSON renderer: ``diagnosis.json`` (schema ``probe.diagnosis/1``, DESIGN.md).

``DiagnosisJson.from_analysis(analysis)`` holds the document as plain data (JSON-safe:
NaN and infinity become null); ``render()`` writes it. Also home of ``json_safe``, which
every JSON output uses (this module imports no pandas: the leak report needs it inside
a watched service).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from probe.analyzers.analysis import Analysis
    from probe.analyzers.diagnosis import Diagnosis

__all__ = ["DiagnosisJson", "json_safe"]


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


@dataclass(frozen=True)
class DiagnosisJson:
    format: ClassVar[str] = "json"
    filename: ClassVar[str] = "diagnosis.json"

    document: dict[str, Any]

    @classmethod
    def from_diagnosis(cls, diagnosis: Diagnosis) -> DiagnosisJson:
        return cls(json_safe(diagnosis.to_dict()))

    @classmethod
    def from_analysis(cls, analysis: Analysis) -> DiagnosisJson:
        return cls.from_diagnosis(analysis.diagnosis)

    def render(self) -> str:
        return json.dumps(self.document, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
