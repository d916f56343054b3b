"""``python -m probe.cli`` is ``probe``."""

from probe.cli import main

main()
