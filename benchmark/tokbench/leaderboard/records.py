"""Read the run records behind a leaderboard, from folders that may name sections."""
from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokbench.errors import UsageError
from tokbench.leaderboard.aggregate import Section
from tokbench.results import load_records, preference

_NAMED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)=(.+)$")


def load(folders: Sequence[Path]) -> list[dict[str, Any]]:
    """Every valid record under ``folders``, one per pairing and seed.

    A file that is not a valid record stops the leaderboard with its path and reason:
    published numbers must not silently lose a run. The same pairing found in two
    folders keeps one record, by :func:`tokbench.results.preference` (a finished record
    over a failed one, then the later one); two ok records of it whose metrics differ are
    an error naming both files (one of them was edited or forged: no date decides which).
    """
    merged: dict[str, dict[str, Any]] = {}
    files: dict[str, Path] = {}
    for folder in folders:
        if not folder.is_dir():
            raise UsageError(f"--records {folder}: " + ("not a folder; --records names a folder of run records"
                                                        if folder.exists() else "no such folder"))
        loaded = load_records(folder)
        problems = [*loaded.problems, *loaded.newer.values(), *loaded.duplicates]
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise UsageError(f"{problems[0]}{more}; fix or remove the file")
        for key, record in loaded.records.items():
            other = merged.get(key)
            if (other is not None and record["status"] == other["status"] == "ok"
                    and record["metrics"] != other["metrics"]):
                raise UsageError(f"{files[key]} and {loaded.paths[key]} hold the same pairing with different metrics "
                                 f"(accuracy {other['metrics'].get('accuracy')} and "
                                 f"{record['metrics'].get('accuracy')}); remove the one that is not genuine")
            if other is None or preference(record) > preference(other):
                merged[key], files[key] = record, loaded.paths[key]
    return [merged[key] for key in sorted(merged)]


def load_sections(specs: Sequence[str]) -> list[Section]:
    """Sections from ``--records`` values: ``DIR`` (all merged into one unnamed leaderboard) or ``NAME=DIR``.

    Folders with the same name merge into one section; sections keep the order in which
    their names first appear. Either every value names its section or none does.
    """
    named = [_NAMED.match(spec) for spec in specs]
    if any(named) and not all(named):
        raise UsageError("--records: name every folder (NAME=DIR) or none of them")
    folders: dict[str, list[Path]] = {}
    for spec, match in zip(specs, named):
        name, folder = (match.group(1), match.group(2)) if match else ("", spec)
        folders.setdefault(name, []).append(Path(folder))
    sections = []
    for name, paths in folders.items():
        records = load(paths)
        if not records:
            where = f"section {name!r} " if name else ""
            raise UsageError(f"no run records in {where}{', '.join(map(str, paths))}; run `tokbench run` first "
                             "or pass --records DIR")
        sections.append(Section.of(records, name, paths))
    return sections
