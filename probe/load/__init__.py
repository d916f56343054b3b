"""``probe load``: a load driver for services on 127.0.0.1 (see ``driver``), with a
request mix from a small file (``mix``) and latency percentiles in bounded memory
(``figures``)."""

from __future__ import annotations

from probe.load.driver import LoadSettings, Record, drive
from probe.load.figures import LoadFigures, figures
from probe.load.mix import Mix, read_mix

__all__ = ["LoadFigures", "LoadSettings", "Mix", "Record", "drive", "figures", "read_mix"]
