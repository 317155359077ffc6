"""Per-pairing locks, so that two ``tokbench run`` on one records folder never train a pairing twice.

Before a pairing starts, its run takes the lock ``OUT/.locks/<config hash>.lock``
(``filelock``: an OS file lock, released by the kernel when the process dies, so
a killed run leaves no stale lock). Under the lock it looks at the pairing's
record again: if another run wrote it since this run planned, that record
stands and the pairing is not trained here. A pairing whose lock another run
holds waits while the others go ahead.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from tokbench.errors import StorageError
from tokbench.grid import Pairing
from tokbench.results import RecordError, load_record

LOCK_FOLDER = ".locks"  # hidden: record loading skips it

Record = dict[str, Any]


@dataclass(frozen=True)
class Claim:
    """``state`` is "claimed" (train it), "busy" (another run is on it) or "taken" (``record`` came meanwhile)."""

    state: str
    record: Record | None = None


class PairingLocks:
    """The locks of one run on ``out_dir``; ``planned`` are the records the run's plan saw, by config hash."""

    def __init__(self, out_dir: Path, planned: Mapping[str, Record]) -> None:
        self.out_dir, self.planned = out_dir, planned
        self.folder = out_dir / LOCK_FOLDER
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError.from_os(exc, self.folder) from None
        self.held: dict[str, FileLock] = {}

    def claim(self, pairing: Pairing) -> Claim:
        lock = FileLock(self.folder / f"{pairing.config_hash}.lock")
        try:
            lock.acquire(timeout=0)
        except Timeout:
            return Claim("busy")
        except OSError as exc:
            raise StorageError.from_os(exc, lock.lock_file) from None
        current = self._current(pairing)
        if current is not None and current != self.planned.get(pairing.config_hash):
            lock.release()
            return Claim("taken", current)
        self.held[pairing.config_hash] = lock
        return Claim("claimed")

    def _current(self, pairing: Pairing) -> Record | None:
        path = self.out_dir / pairing.filename
        if not path.exists():
            return None
        try:
            return load_record(path)
        except (RecordError, StorageError):
            return None  # not a record this run could have planned against

    def release(self, pairing: Pairing) -> None:
        lock = self.held.pop(pairing.config_hash, None)
        if lock is not None:
            lock.release()

    def release_all(self) -> None:
        for lock in self.held.values():
            lock.release()
        self.held.clear()
