"""Run records: one JSON file per pairing and seed, the public result format (schema v3; v1 and v2 still load).

A record carries its identity (task and model with versions, resolved
parameters, seed), a config hash of that identity, the outcome (metrics or the
error), and provenance. The format is documented in ``docs/run-records.md``.

Writes are atomic (:func:`tokbench.storage.atomic_write`), so a killed process
leaves either the whole record or none, with the permissions of any new file.
The loader validates every record it reads against the published JSON Schema
(``docs/run-record.schema.json``: structure, types and ranges) and reports a
corrupt, foreign or out-of-range file by path with the reason.
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
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from tokbench import __version__
from tokbench.errors import StorageError, UsageError
from tokbench.storage import atomic_write, portable_name, read_regular

SCHEMA_VERSION = 3
HASH_CHARS = 16
SIGNIFICANT_DIGITS = 6  # curves and attention profiles are rounded to keep records compact
_IDENTITY_KEYS = ("task", "task_version", "model", "model_version", "params", "seed")
_HASH_RE = re.compile(rf"^[0-9a-f]{{{HASH_CHARS}}}$")


class RecordError(UsageError):
    """A file that is not a valid run record; the message names the path and the reason.

    ``newer_hash`` is the config hash of a record written by a newer tokbench, when its
    file name confirms it, else None.
    """

    def __init__(self, path: Path, reason: str, newer: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason
        self.newer_hash = None
        if newer is not None:
            claimed = newer.get("config_hash")
            if isinstance(claimed, str) and _HASH_RE.match(claimed) and path.name.endswith(f"__{claimed}.json"):
                self.newer_hash = claimed


def identity(task: str, task_version: str, model: str, model_version: str,
             params: Mapping[str, Mapping[str, Any]], seed: int) -> dict[str, Any]:
    """The fields that make a record unique; ``params`` has the keys task, model and train, and ``evaluate`` (the
    extra evaluation settings, a list of override dicts) only when there are any, so older identities keep
    their hashes."""
    kept = {k: dict(params[k]) for k in ("task", "model", "train")}
    if params.get("evaluate"):
        kept["evaluate"] = [dict(overrides) for overrides in params["evaluate"]]
    return {"task": task, "task_version": task_version, "model": model, "model_version": model_version,
            "params": kept, "seed": seed}


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


def record_filename(task: str, model: str, hash_: str, portable: bool = True) -> str:
    """The record's file name, its names made portable (:func:`tokbench.storage.portable_name`); ``portable=False``
    gives the name that older versions wrote, with a qualified name's ``:`` (such files still load)."""
    name = portable_name if portable else str
    return f"{name(task)}__{name(model)}__{hash_}.json"


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
            "torch": torch.__version__, "lightning": pl.__version__, "device": device, "cpu": cpu_model(),
            "started_at": utc_now()}


def cpu_model() -> str:
    """The processor's model name (floating-point kernels differ between processors), e.g. for ``tokbench verify``."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return f"{platform.machine()} {line.partition(':')[2].strip()}"
    except OSError:
        pass
    return platform.machine() or "unknown"


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
    """Write ``record`` atomically into ``directory`` under its canonical file name; the record of the same pairing
    under the name an older version wrote (with a qualified name's ``:``, :func:`record_filename`) is removed once the
    new file is in place, so that a rerun leaves one file per pairing.

    A record there of a newer schema version is never replaced (:class:`RecordError`), even
    when it appeared after the run planned. A failed record never replaces a finished one
    (ok or not applicable): ``--rerun all`` that fails keeps the earlier result, and the
    caller reports the failure from the record it holds.
    """
    validate(record)
    names = dict.fromkeys(record_filename(record["task"], record["model"], record["config_hash"], portable)
                          for portable in (True, False))
    path, *older = (directory / name for name in names)
    replaced = []
    for candidate in (path, *older):
        try:
            existing = load_record(candidate)
        except RecordError as exc:
            if exc.newer_hash is not None:
                raise RecordError(candidate, f"{exc.reason}; not overwritten") from None
            continue  # nothing there yet, or not a record (left as it is where the name is an older one)
        except StorageError:
            continue  # unreadable: the write itself reports what matters
        if record["status"] == "failed" and existing["status"] != "failed":
            return candidate
        if candidate != path:
            replaced.append(candidate)
    return atomic_write(path, json.dumps(record, indent=1, allow_nan=False) + "\n", replaces=replaced)


# ---- validation -------------------------------------------------------------------------------------------------

MAX_RECORD_BYTES = 16 * 2**20  # a record is a few KB; anything far larger is not one


@lru_cache(maxsize=1)
def record_schema() -> dict[str, Any]:
    """The published JSON Schema of run records (``docs/run-record.schema.json``)."""
    return json.loads((resources.files("tokbench") / "run-record.schema.json").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(record_schema())


def check_name(kind: str, name: str) -> None:
    """Raise ``ValueError`` unless ``name`` is a valid task or model name (it heads record file names)."""
    rule = record_schema()["$defs"]["name"]
    if not isinstance(name, str) or not re.fullmatch(rule["pattern"], name):
        raise ValueError(f"{kind} name {name!r} is not allowed: {rule['description']}")


def _where(error: Any) -> str:
    return ".".join(str(part) for part in error.absolute_path) or "record"


def validate(record: Any) -> None:
    """Raise ``ValueError`` with the reason if ``record`` is not a valid run record of a version this tokbench reads.

    The structure, types and ranges are the published JSON Schema's; the config hash is
    recomputed from the identity. A record of a newer schema version raises :class:`NewerRecordError`.
    """
    if not isinstance(record, dict) or "schema_version" not in record:
        raise ValueError("not a tokbench run record (no schema_version)")
    version = record["schema_version"]
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise NewerRecordError(version)
    errors = sorted(_validator().iter_errors(record), key=lambda e: (list(e.absolute_path), e.message))
    if errors:
        from jsonschema.exceptions import best_match

        error = best_match(errors)
        message = error.message if len(error.message) <= 200 else error.message[:200] + "..."
        if error.validator == "not":  # the schema's "absent": a field this status or schema version does not have
            message = f"not allowed in a {record.get('status')!r} record of schema_version {version!r}"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ValueError(f"{_where(error)}: {message}{more}")
    expected = config_hash(record)
    if record["config_hash"] != expected:
        raise ValueError(f"config_hash {record['config_hash']} does not match the record's identity ({expected}): "
                         "edited or corrupt")
    check_derived(record["metrics"])
    check_consistent(record)


def check_consistent(record: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` unless the numbers of an ok record agree with each other (what the page draws from and no
    retraining is needed to check): steps taken at most the cap, the cap the recipe's steps, the budget curve rising
    in steps to one final point at the steps taken with the record's accuracy, one evaluation per planned setting."""
    if record["status"] != "ok":
        return
    train, planned = record["train"], record["params"]["train"]
    steps, cap = train.get("steps"), train.get("max_steps")
    if isinstance(steps, int) and isinstance(cap, int) and planned and steps > cap:
        raise ValueError(f"train.steps {steps} is more than train.max_steps {cap}: edited or corrupt")
    if cap is not None and "steps" in planned and cap != planned["steps"]:
        raise ValueError(f"train.max_steps {cap} is not the recipe's steps {planned['steps']}: edited or corrupt")
    curve = record.get("budget_curve")
    if curve:
        points, finals = [point["step"] for point in curve], [bool(point.get("final")) for point in curve]
        if points != sorted(set(points)) or finals != [False] * (len(curve) - 1) + [True]:
            raise ValueError("budget_curve: its steps do not rise to one final point: edited or corrupt")
        last = curve[-1]
        if last["step"] != steps or last["accuracy"] != record["metrics"]["accuracy"]:
            raise ValueError(f"budget_curve: its final point (step {last['step']}, accuracy {last['accuracy']}) is not "
                             f"the record's (step {steps}, accuracy {record['metrics']['accuracy']}): edited or corrupt")
    evaluations = record.get("evaluations", [])
    if [entry["overrides"] for entry in evaluations] != record["params"].get("evaluate", []):
        raise ValueError("evaluations: not one per planned setting of params.evaluate, in order: edited or corrupt")


DERIVED_RELATIVE_TOLERANCE = 1e-9  # a quotient recomputed from the stored operands differs in the last bits at most
DERIVED_METRICS = {"normalized_accuracy": ("accuracy", "bayes_accuracy")}  # name -> (numerator, denominator)


def check_derived(metrics: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` unless every derived metric equals its recomputation from the primary ones.

    A derived metric is a quotient of two stored ones (:data:`DERIVED_METRICS`); where an
    operand is missing or null, or the denominator is 0, there is nothing to recompute.
    """
    for name, (numerator, denominator) in DERIVED_METRICS.items():
        value, top, bottom = metrics.get(name), metrics.get(numerator), metrics.get(denominator)
        if value is None or top is None or not bottom:
            continue
        if not math.isclose(value, top / bottom, rel_tol=DERIVED_RELATIVE_TOLERANCE):
            raise ValueError(f"metrics.{name} {value!r} is not {numerator} / {denominator} = {top / bottom!r}: "
                             "edited or corrupt")


class NewerRecordError(ValueError):
    """A record written by a newer tokbench: never overwritten, never read as if it were ours."""

    def __init__(self, version: int) -> None:
        super().__init__(f"schema_version {version} is newer than this tokbench reads ({SCHEMA_VERSION}); "
                         "upgrade tokbench to read it")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def load_record(path: Path) -> dict[str, Any]:
    """Read and validate one record; raise :class:`RecordError` naming the path and the reason.

    Only a regular file of at most ``MAX_RECORD_BYTES`` is read, so a FIFO or a device
    named ``*.json`` is reported instead of blocking or filling memory.
    """
    try:
        record = json.loads(read_regular(path, MAX_RECORD_BYTES).decode("utf-8"), parse_constant=_no_constant)
    except StorageError as exc:
        raise RecordError(path, f"unreadable: {exc.reason}") from None
    except json.JSONDecodeError as exc:
        raise RecordError(path, f"corrupt JSON: {exc}") from None
    except UnicodeDecodeError:
        raise RecordError(path, "corrupt JSON: not UTF-8") from None
    except RecursionError:
        raise RecordError(path, "corrupt JSON: nested too deeply") from None
    except ValueError as exc:  # not a regular file, too large, NaN or Infinity
        raise RecordError(path, f"unreadable: {exc}") from None
    try:
        validate(record)
    except NewerRecordError as exc:
        raise RecordError(path, str(exc), newer=record) from None
    except ValueError as exc:
        raise RecordError(path, str(exc)) from None
    expected = record_filename(record["task"], record["model"], record["config_hash"])
    if path.name not in (expected, record_filename(record["task"], record["model"], record["config_hash"], False)):
        raise RecordError(path, f"file name does not match the record (expected {expected})")
    return record


def preference(record: Mapping[str, Any]) -> tuple[bool, str]:
    """Which of two records of one pairing to keep: the larger. A finished record (ok or not applicable) over a
    failed one, then the later one."""
    return record["status"] != "failed", record["provenance"]["started_at"]


@dataclass
class LoadedRecords:
    """Valid records by config hash, the files that were skipped with their reasons, and the config hashes of
    records written by a newer tokbench (present, but not readable here)."""

    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[RecordError] = field(default_factory=list)
    newer: dict[str, RecordError] = field(default_factory=dict)
    paths: dict[str, Path] = field(default_factory=dict)  # config hash -> the file of the record kept
    duplicates: list[RecordError] = field(default_factory=list)  # a second file of one pairing, naming both


STAMP = "VERIFICATION.json"  # what `tokbench verify --stamp` writes into a records folder: not a record


def record_files(root: Path) -> Iterator[Path]:
    """Every ``*.json`` under ``root``, skipping hidden files and folders (temporary files of writes) and
    :data:`STAMP` files."""
    for path in sorted(root.rglob("*.json")):
        if path.name != STAMP and not any(part.startswith(".") for part in path.relative_to(root).parts):
            yield path


def load_records(root: Path, strict: bool = False) -> LoadedRecords:
    """Load every record under ``root`` (recursively, so copied-together shard folders work).

    An invalid file is collected in ``problems``, or raised with ``strict``; a record of a
    newer schema version goes to ``newer``. When two files hold the same pairing, the one
    :func:`preference` ranks higher is kept and ``duplicates`` names both files (raised with
    ``strict``): ``tokbench run`` resumes with the kept one, a leaderboard or a verification stops.
    """
    loaded = LoadedRecords()
    if not root.exists():
        return loaded
    for path in record_files(root):
        try:
            record = load_record(path)
        except RecordError as exc:
            if exc.newer_hash is not None:
                loaded.newer[exc.newer_hash] = exc
                continue
            if strict:
                raise
            loaded.problems.append(exc)
            continue
        key = record["config_hash"]
        other = loaded.records.get(key)
        if other is not None:
            duplicate = RecordError(path, f"the same pairing (config hash {key}) as {loaded.paths[key]}; keep one "
                                          "of the two files")
            if strict:
                raise duplicate
            loaded.duplicates.append(duplicate)
        if other is None or preference(record) > preference(other):
            loaded.records[key], loaded.paths[key] = record, path
    return loaded
