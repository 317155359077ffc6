"""Read the run records behind a leaderboard from one or more folders."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokbench.errors import UsageError
from tokbench.results import load_records


def load(folders: Sequence[Path]) -> list[dict[str, Any]]:
    """Every valid record under ``folders``, one per pairing and seed.

    A file that is not a valid record stops the leaderboard with its path and reason:
    published numbers must not silently lose a run. The same pairing found in two
    folders keeps one record, by the rule of :func:`tokbench.results.load_records`
    (an ok record over a failed one, then the later one).
    """
    merged: dict[str, dict[str, Any]] = {}
    for folder in folders:
        if not folder.is_dir():
            raise UsageError(f"--records {folder}: no such folder")
        loaded = load_records(folder)
        if loaded.problems:
            more = f" (and {len(loaded.problems) - 1} more)" if len(loaded.problems) > 1 else ""
            raise UsageError(f"{loaded.problems[0]}{more}; fix or remove the file")
        for key, record in loaded.records.items():
            other = merged.get(key)
            if other is None or _rank(record) > _rank(other):
                merged[key] = record
    return [merged[key] for key in sorted(merged)]


def _rank(record: dict[str, Any]) -> tuple[bool, str]:
    return record["status"] == "ok", record["provenance"]["started_at"]
