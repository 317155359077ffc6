"""Files on disk: atomic writes with ordinary permissions, and bounded reads of regular files only.

A write goes to a hidden temporary file in the target folder, then ``os.replace``
renames it, so a killed process or a full disk leaves the old file or the whole
new one, never a truncated one. The file gets the permissions of any new file
(0666 minus the umask), so records in a shared folder stay readable to others.

A read opens without blocking and accepts only a regular file up to a size cap:
a FIFO named ``x.json`` or a link to ``/dev/zero`` is refused instead of hanging
or filling memory.

Every ``OSError`` becomes a :class:`tokbench.errors.StorageError` naming the path.

Names that head file names are made portable first (:func:`portable_name`): a
qualified name ``PLUGIN:NAME`` holds a ``:``, which Windows cannot store and
``scp`` reads as ``host:path``.
"""
from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tokbench.errors import StorageError


QUALIFIER = ":"  # the separator of qualified names, PLUGIN:NAME
PORTABLE_QUALIFIER = "."  # what stands for it in a file name: POSIX's portable file name characters only


def portable_name(name: str) -> str:
    """``name`` as it heads a file name: ``PLUGIN:NAME`` becomes ``PLUGIN.NAME``. Two names may map to one
    portable form; the file names they head stay apart by the config hash that follows them."""
    return name.replace(QUALIFIER, PORTABLE_QUALIFIER)


def _new_file_mode() -> int:
    umask = os.umask(0)  # the only portable way to read the umask is to set it and put it back
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path: Path, data: str | bytes, replaces: Sequence[Path] = ()) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically, creating the parent folder; then remove each file of
    ``replaces`` (the same content under an older name, such as a file name with a ``:``), only once the new file
    is in place: an interrupted write leaves the old file or both, never neither."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise StorageError.from_os(exc, path.parent) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, _new_file_mode())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise StorageError(path, exc.strerror or str(exc)) from None
        raise
    for older in replaces:
        if older != path:
            try:
                older.unlink(missing_ok=True)
            except OSError as exc:
                raise StorageError.from_os(exc, older) from None
    return path


def read_regular(path: Path, max_bytes: int) -> bytes:
    """The bytes of the regular file ``path``; a FIFO, device, folder or a file over ``max_bytes`` raises.

    Raises :class:`StorageError` for what the OS refuses and ``ValueError`` (with the
    reason) for a path that is not a regular file or is too large.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise StorageError.from_os(exc, path) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        if info.st_size > max_bytes:
            raise ValueError(f"{info.st_size} bytes, over the limit of {max_bytes}")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise StorageError.from_os(exc, path) from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise ValueError(f"over the limit of {max_bytes} bytes")
    return data
