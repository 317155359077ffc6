"""Exception types, split by who can fix the problem.

``UsageError`` and its subclasses are caused by the user (a bad name, parameter
or file). The CLI prints them as one line on stderr and exits with code 2.
``StorageError`` is the environment's (a read-only or full disk, an unwritable
folder, a FIFO where a file should be): one line naming the path and the OS
reason, exit code 3. Anything else is a bug and may raise with a traceback.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable


class TokbenchError(Exception):
    """Base class of every error tokbench raises on purpose."""


class UsageError(TokbenchError):
    """A mistake in what the user asked for; reported in one line, exit code 2."""


class ParamError(UsageError):
    """A parameter that is unknown, of the wrong type or out of range."""


class UnknownNameError(UsageError):
    """A task, model, suite or format name that is not registered."""


class PluginConflictError(UsageError):
    """Installed plugins contradict each other or the hook specification."""


class StorageError(TokbenchError):
    """Reading or writing a path failed for a reason outside tokbench; reported in one line, exit code 3."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason

    @classmethod
    def from_os(cls, exc: OSError, path: object = None) -> StorageError:
        """The one-line error for ``exc``: its path (or ``path``) and the OS reason (e.g. No space left on device)."""
        return cls(exc.filename if exc.filename is not None else path, exc.strerror or str(exc))


class NotApplicable(TokbenchError):
    """A model cannot be paired with a task (for example it predicts only the last position of a task
    scored at many). Raised at planning or from a model's constructor; the pairing is recorded as
    ``not_applicable``, shown as n/a, and is never a failure."""


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest choices, or ``""``."""
    close = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.5)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"


def unknown_name(kind: str, name: str, choices: Iterable[str]) -> UnknownNameError:
    """Build the standard error for an unregistered ``kind`` called ``name``."""
    choices = sorted(choices)
    allowed = ", ".join(choices) if choices else "none registered"
    return UnknownNameError(f"unknown {kind} {name!r}{did_you_mean(name, choices)}; allowed: {allowed}")
