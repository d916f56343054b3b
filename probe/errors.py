"""The one error type the CLI catches: a message for the user and an exit status."""

from __future__ import annotations

__all__ = ["EXIT_USAGE", "ProbeError"]

# Exit status for bad input (missing script, unwritable output, unreadable run dir),
# the same as click's usage errors.
EXIT_USAGE = 2


class ProbeError(Exception):
    """A failure to report as one line, with the exit status the CLI should return."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code
