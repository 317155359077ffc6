"""The manifest of a published leaderboard folder: ``SHA256SUMS``, one line per file tokbench wrote there.

The format is ``sha256sum``'s (``<hex digest>  <path relative to the folder>``), so
``sha256sum -c SHA256SUMS`` checks it too. Publishing writes it last. It says which files
are tokbench's: ``--prune`` removes only files it lists, and a README.md it does not list
is not overwritten. ``tokbench verify --integrity`` checks it without training:
every listed file under the checked folder is there with its digest, and every run record
there is listed (an edited, added or removed record is reported by name).

A manifest comes with a downloaded or cloned folder, so it is read as untrusted input: a
line that is not ``<64 hex digits>  <path>``, a path that is absolute, climbs with ``..``
or leads outside the folder through a link, or a file that is not UTF-8 text is a
:class:`~tokbench.errors.UsageError` naming the file and line, before anything is removed.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from tokbench.errors import UsageError
from tokbench.storage import atomic_write, read_regular

MANIFEST = "SHA256SUMS"
MAX_MANIFEST_BYTES = 64 * 2**20  # about 100 bytes a line: room for 600,000 files
_LINE = re.compile(r"(?P<digest>[0-9a-f]{64})  (?P<name>.+)")


def digest(path: Path) -> str:
    """The SHA-256 of the file ``path``, in hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def inside(folder: Path, name: str) -> bool:
    """Whether the relative POSIX path ``name`` names a file inside ``folder``, links resolved."""
    relative = PurePosixPath(name)
    if relative.is_absolute() or ".." in relative.parts or not relative.parts:
        return False
    return (folder / relative).resolve().is_relative_to(folder.resolve())


def read(folder: Path) -> dict[str, str] | None:
    """The manifest of ``folder`` (relative POSIX path -> digest), or None when it has none; :class:`UsageError`
    for a manifest that is not one or names a path outside ``folder``."""
    path = folder / MANIFEST
    if not path.is_file():
        return None
    try:
        text = read_regular(path, MAX_MANIFEST_BYTES).decode("utf-8")
    except (ValueError, UnicodeDecodeError) as exc:  # too large, or not text
        raise UsageError(f"{path}: not a {MANIFEST} manifest ({str(exc).split(':')[0]})") from None
    entries = {}
    for number, line in enumerate(text.splitlines(), 1):
        match = _LINE.fullmatch(line)
        if match is None:
            raise UsageError(f"{path}, line {number}: expected '<SHA-256 in hex>  <path>', got {line[:80]!r}")
        name = match["name"]
        if not inside(folder, name):
            raise UsageError(f"{path}, line {number}: {name!r} is outside {folder}; a manifest lists only files in "
                             "its own folder (nothing was changed)")
        entries[name] = match["digest"]
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
