"""Run records: one JSON file per pairing and seed, the public result format (schema v1).

A record carries its identity (task and model with versions, resolved
parameters, seed), a config hash of that identity, the outcome (metrics or the
error), and provenance. The format is documented in ``docs/run-records.md``.

Writes are atomic (:func:`tokbench.storage.atomic_write`), so a killed process
leaves either the whole record or none, with the permissions of any new file. The loader validates every record it reads and reports
a corrupt or foreign file by path with the reason.
"""
from __future__ import annotations

import hashlib
import json
import math
import platform
import re
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tokbench import __version__
from tokbench.errors import UsageError
from tokbench.storage import atomic_write

SCHEMA_VERSION = 1
HASH_CHARS = 16
STATUSES = ("ok", "failed")
SIGNIFICANT_DIGITS = 6  # curves and attention profiles are rounded to keep records compact
_IDENTITY_KEYS = ("task", "task_version", "model", "model_version", "params", "seed")
_HASH_RE = re.compile(rf"^[0-9a-f]{{{HASH_CHARS}}}$")


class RecordError(UsageError):
    """A file that is not a valid run record; the message names the path and the reason."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def identity(task: str, task_version: str, model: str, model_version: str,
             params: Mapping[str, Mapping[str, Any]], seed: int) -> dict[str, Any]:
    """The fields that make a record unique; ``params`` has the keys task, model and train."""
    return {"task": task, "task_version": task_version, "model": model, "model_version": model_version,
            "params": {k: dict(params[k]) for k in ("task", "model", "train")}, "seed": seed}


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no spaces; tuples become lists, as in a written record."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def config_hash(ident: Mapping[str, Any]) -> str:
    """First 16 hex characters of sha256 over the canonical JSON of the identity."""
    return hashlib.sha256(canonical_json({k: ident[k] for k in _IDENTITY_KEYS}).encode()).hexdigest()[:HASH_CHARS]


class SeedHashes:
    """:func:`config_hash` of one identity at any seed, serialising the rest once (a grid may hash a million seeds).

    The canonical JSON sorts keys, so the top-level ``seed`` is the last key before
    ``task`` and ``task_version``, whose string values cannot hold an unescaped quote:
    the last ``"seed":null`` of the text with a null seed is the place to put each seed.
    """

    def __init__(self, ident: Mapping[str, Any]) -> None:
        text = canonical_json({**{k: ident[k] for k in _IDENTITY_KEYS}, "seed": None})
        head, _, tail = text.rpartition('"seed":null')
        self.head, self.tail = f'{head}"seed":'.encode(), tail.encode()

    def __call__(self, seed: int) -> str:
        digest = hashlib.sha256(self.head)
        digest.update(b"%d%s" % (seed, self.tail))
        return digest.hexdigest()[:HASH_CHARS]


def record_filename(task: str, model: str, hash_: str) -> str:
    return f"{task}__{model}__{hash_}.json"


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def git_commit(directory: Path | None = None) -> str | None:
    """HEAD of the git checkout holding tokbench's source, or None (installed from a wheel, no git)."""
    directory = directory or Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=directory, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", commit) else None


def provenance(commit: str | None) -> dict[str, Any]:
    """Versions and device of the process that trains; ``started_at`` is filled per pairing."""
    import pytorch_lightning as pl
    import torch

    device = f"cuda ({torch.cuda.get_device_name(0)})" if torch.cuda.is_available() else "cpu"
    return {"tokbench_version": __version__, "git_commit": commit, "python": platform.python_version(),
            "torch": torch.__version__, "lightning": pl.__version__, "device": device, "started_at": utc_now()}


def round_floats(values: list[Any]) -> list[Any]:
    """Round each float to 6 significant digits; non-finite values become None."""
    return [clean(float(f"{v:.{SIGNIFICANT_DIGITS}g}")) if isinstance(v, float) else v for v in values]


def clean(obj: Any) -> Any:
    """A JSON-ready copy: tuples become lists and non-finite floats become None (JSON has no NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    return obj


def write_record(directory: Path, record: Mapping[str, Any]) -> Path:
    """Write ``record`` atomically into ``directory`` under its canonical file name."""
    validate(record)
    path = directory / record_filename(record["task"], record["model"], record["config_hash"])
    return atomic_write(path, json.dumps(record, indent=1, allow_nan=False) + "\n")


# ---- validation -------------------------------------------------------------------------------------------------

def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _require(condition: bool, reason: str) -> None:
    if not condition:
        raise ValueError(reason)


def _check_fields(obj: Any, where: str, fields: Mapping[str, Any]) -> None:
    _require(isinstance(obj, dict), f"{where} must be an object")
    for key, check in fields.items():
        _require(key in obj, f"{where} lacks {key!r}")
        _require(check(obj[key]), f"{where}.{key} has an invalid value {obj[key]!r}")


_str = lambda v: isinstance(v, str)  # noqa: E731 - a table of small predicates reads best inline
_opt_str = lambda v: v is None or isinstance(v, str)  # noqa: E731
_num_or_null = lambda v: v is None or _is_number(v)  # noqa: E731
_numbers = lambda v: isinstance(v, list) and all(_num_or_null(x) for x in v)  # noqa: E731

_TOP = {
    "task": _str, "task_version": _str, "model": _str, "model_version": _str,
    "params": lambda v: isinstance(v, dict) and all(isinstance(v.get(k), dict) for k in ("task", "model", "train")),
    "seed": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    "config_hash": lambda v: isinstance(v, str) and bool(_HASH_RE.match(v)),
    "status": lambda v: v in STATUSES,
    "error": _opt_str,
    "eval_split": lambda v: v in ("train", "val", "test"),
    "metrics": lambda v: isinstance(v, dict) and all(_num_or_null(x) for x in v.values()),
    "train": lambda v: isinstance(v, dict),
    "curve": lambda v: isinstance(v, dict) and all(_numbers(x) for x in v.values()),
    "attention_profile": lambda v: v is None or _numbers(v),
    "meta": lambda v: isinstance(v, dict),
    "provenance": lambda v: isinstance(v, dict),
}
_META = {k: _str for k in ("task_description", "task_citation", "model_description", "model_citation", "recipe")}
_PROVENANCE = {"tokbench_version": _str, "git_commit": _opt_str, "python": _str, "torch": _str,
               "lightning": _str, "device": _str, "started_at": _str}


def validate(record: Any) -> None:
    """Raise ``ValueError`` with the reason if ``record`` is not a valid schema-v1 run record."""
    _require(isinstance(record, dict), "not a tokbench run record (the JSON is not an object)")
    _require("schema_version" in record, "not a tokbench run record (no schema_version)")
    version = record["schema_version"]
    _require(version == SCHEMA_VERSION,
             f"schema_version {version!r} is not supported (this tokbench reads {SCHEMA_VERSION})")
    _check_fields(record, "record", _TOP)
    _check_fields(record["meta"], "meta", _META)
    _check_fields(record["provenance"], "provenance", _PROVENANCE)
    expected = config_hash(record)
    _require(record["config_hash"] == expected,
             f"config_hash {record['config_hash']} does not match the record's identity ({expected}): "
             "edited or corrupt")
    if record["status"] == "ok":
        _require(record["error"] is None, "an ok record must have error null")
        _require(_is_number(record["metrics"].get("accuracy")), "an ok record needs a finite metrics.accuracy")
    else:
        _require(bool(record["error"]), "a failed record needs its error")


def load_record(path: Path) -> dict[str, Any]:
    """Read and validate one record; raise :class:`RecordError` naming the path and the reason."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(path, f"unreadable: {exc}") from None
    except json.JSONDecodeError as exc:
        raise RecordError(path, f"corrupt JSON: {exc}") from None
    try:
        validate(record)
    except ValueError as exc:
        raise RecordError(path, str(exc)) from None
    expected = record_filename(record["task"], record["model"], record["config_hash"])
    if path.name != expected:
        raise RecordError(path, f"file name does not match the record (expected {expected})")
    return record


@dataclass
class LoadedRecords:
    """Valid records by config hash, and the files that were skipped with their reasons."""

    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[RecordError] = field(default_factory=list)


def _record_files(root: Path) -> Iterator[Path]:
    """Every ``*.json`` under ``root``, skipping hidden files and folders (temporary files of writes)."""
    for path in sorted(root.rglob("*.json")):
        if not any(part.startswith(".") for part in path.relative_to(root).parts):
            yield path


def load_records(root: Path, strict: bool = False) -> LoadedRecords:
    """Load every record under ``root`` (recursively, so copied-together shard folders work).

    An invalid file is collected in ``problems``, or raised with ``strict``. When two
    files hold the same pairing, an ok record wins over a failed one, then the later one.
    """
    loaded = LoadedRecords()
    if not root.exists():
        return loaded
    for path in _record_files(root):
        try:
            record = load_record(path)
        except RecordError as exc:
            if strict:
                raise
            loaded.problems.append(exc)
            continue
        key = record["config_hash"]
        other = loaded.records.get(key)
        rank = (record["status"] == "ok", record["provenance"]["started_at"])
        if other is None or rank > (other["status"] == "ok", other["provenance"]["started_at"]):
            loaded.records[key] = record
    return loaded
