"""The manifest of a published leaderboard folder: ``SHA256SUMS``, one line per file tokbench wrote there.

The format is ``sha256sum``'s (``<hex digest>  <path relative to the folder>``), so
``sha256sum -c SHA256SUMS`` checks it too. Publishing writes it last. It says which files
are tokbench's: ``--prune`` removes only files it lists, and a README.md it does not list
is not overwritten. ``tokbench verify --integrity`` checks it without training:
every listed file under the checked folder is there with its digest, and every run record
there is listed (an edited, added or removed record is reported by name).
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

from tokbench.storage import atomic_write

MANIFEST = "SHA256SUMS"


def digest(path: Path) -> str:
    """The SHA-256 of the file ``path``, in hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read(folder: Path) -> dict[str, str] | None:
    """The manifest of ``folder`` (relative POSIX path -> digest), or None when it has none."""
    path = folder / MANIFEST
    if not path.is_file():
        return None
    entries = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        hex_digest, sep, name = line.partition("  ")
        if sep and name:
            entries[name] = hex_digest
    return entries


def write(folder: Path, entries: Mapping[str, str]) -> Path:
    """Write the manifest of ``folder`` from relative path -> digest, sorted by path."""
    return atomic_write(folder / MANIFEST, "".join(f"{entries[name]}  {name}\n" for name in sorted(entries)))


def find(start: Path) -> Path | None:
    """The folder at or above ``start`` that holds a manifest, or None."""
    for folder in [start.resolve(), *start.resolve().parents]:
        if (folder / MANIFEST).is_file():
            return folder
    return None


def check(folder: Path) -> tuple[Path | None, int, list[str]]:
    """Check the run records under ``folder`` against the manifest at or above it.

    Returns the manifest's folder (None when there is none), how many listed files
    were checked, and one line per problem: a listed file that is missing or whose
    digest changed, or a record file (``*.json``) that the manifest does not list.
    """
    from tokbench.results import record_files

    root = find(folder)
    if root is None:
        return None, 0, []
    entries = read(root) or {}
    scope = folder.resolve().relative_to(root)
    inside = {name: value for name, value in entries.items() if scope == Path(".") or
              Path(name).is_relative_to(scope)}
    problems = []
    for name, expected in sorted(inside.items()):
        path = root / name
        if not path.is_file():
            problems.append(f"{path}: listed in {root / MANIFEST} but missing")
        elif digest(path) != expected:
            problems.append(f"{path}: changed since it was published (its SHA-256 differs from {root / MANIFEST})")
    for path in record_files(folder.resolve()):
        if path.relative_to(root).as_posix() not in entries:
            problems.append(f"{path}: a record that {root / MANIFEST} does not list (added after publishing)")
    return root, len(inside), problems
