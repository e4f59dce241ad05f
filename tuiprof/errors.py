"""Every failure a user can cause, as one message plus a hint.

The CLI catches `TuiprofError`, prints `error: <message>` and `hint: <hint>` and exits with
status 2; no traceback is ever shown for these.
"""

from __future__ import annotations


class TuiprofError(Exception):
    """A user-facing failure: what went wrong, and what to do about it."""

    exit_code = 2

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message

    def render(self) -> str:
        """The two lines the CLI prints."""
        text = f"error: {self.message}"
        if self.hint:
            text += f"\nhint: {self.hint}"
        return text


class UsageError(TuiprofError):
    """An impossible or malformed command-line parameter."""


class ArchError(TuiprofError):
    """An unknown GPU model, a malformed preset or an invalid override."""


class TraceError(TuiprofError):
    """A .tptrace file that is missing, corrupt, truncated, foreign or of another version."""


class OutputError(TuiprofError):
    """An output file that cannot be written."""


class BuildError(TuiprofError):
    """A CUDA source that cannot be compiled (carrying the compiler's own message), or no compiler."""


class CompiledCodeError(TuiprofError):
    """A compiled kernel that failed in a way no input can cause (Numba's entry returned a
    result with a Python exception set): its machine code or the compiled-code cache is at fault."""
