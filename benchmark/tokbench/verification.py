"""Re-verify published run records: retrain a sample from their stored configuration and compare every metric.

A record holds everything needed to rerun it: task and model with versions,
resolved parameters, recipe and seed (its config hash checks that nothing was
lost), and the torch thread count it trained with (``provenance.threads``,
1 when absent). The rerun is compared metric by metric:

- *same environment* (Python, torch, Lightning, device, processor model and
  thread count as recorded; records that lack the processor or the thread count
  never qualify): every metric must be bit-identical;
- *another environment*: floating-point results may differ in the last digits,
  and runs that escape a saddle by rounding noise (float32 or sinusoidal
  positions on the deterministic walk) can end with completely different
  diagnostics while their accuracy stays 1.0. So only the accuracies (the
  stable quantities) must agree, within ``ACCURACY_TOLERANCE``; the other
  metrics are reported, not judged, and the keys that differ are named.

Derived metrics (``normalized_accuracy``) are never compared: loading a record
recomputes them from the primary ones (:func:`tokbench.results.check_derived`).
Retraining runs through the same isolated workers as ``tokbench run``
(:mod:`tokbench.isolation`), so a model that exits, crashes or hangs fails its
record and the verification goes on.
"""
from __future__ import annotations

import os
import random
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any

from tokbench.errors import UsageError

ACCURACY_TOLERANCE = 0.02  # measured across machines: test accuracies moved by up to 0.006, training ones by 0.018
# Across devices (a record made on a GPU, checked on a CPU, or the reverse): 18 pairings trained on one H200 agreed
# with the published CPU records within 0.04 in accuracy (the GPU trial of the GPU-speed issue).
DEVICE_TOLERANCE = 0.05
ENVIRONMENT_KEYS = ("python", "torch", "lightning", "device", "cpu", "threads")
Record = dict[str, Any]


def sample(records: Sequence[Record], size: int | None, seed: int) -> list[Record]:
    """``size`` of the ok ``records`` drawn without replacement by ``random.Random(seed)``, in config-hash order.

    The draw depends only on the set of records and the seed, never on file order, so
    a CI job verifies the same records every time. ``size`` None takes them all.
    """
    ordered = sorted((r for r in records if r["status"] == "ok"), key=lambda r: r["config_hash"])
    if size is None or size >= len(ordered):
        return ordered
    return sorted(random.Random(seed).sample(ordered, size), key=lambda r: r["config_hash"])


def records_in(folder: Path) -> Path:
    """Where the run records of ``folder`` are: a published folder (``tokbench leaderboard --format all``, with its
    manifest) keeps them in ``records/`` beside files that are not records; any other folder holds them itself."""
    from tokbench.leaderboard.publish import RECORDS_DIR
    from tokbench.manifest import MANIFEST

    published = (folder / MANIFEST).is_file() and (folder / RECORDS_DIR).is_dir()
    return folder / RECORDS_DIR if published else folder


def threads(record: Mapping[str, Any]) -> int:
    """The torch intra-op thread count the record trained with (1, the runner's default, when not recorded)."""
    return int(record["provenance"].get("threads") or 1)


def check_threads(record: Mapping[str, Any]) -> None:
    """Raise :class:`UsageError` when the record's thread count is more than this machine has cores
    (torch would try to start them all)."""
    cores = os.cpu_count() or 1
    if threads(record) > cores:
        raise UsageError(f"provenance.threads {threads(record)} is more than this machine's {cores} cores: "
                         "retrain it on a machine that has them")


def same_environment(record: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether ``record`` was made where ``current`` (this process's provenance) runs, down to the thread count."""
    recorded = record["provenance"]
    here = {**current, "threads": threads(record)}
    return all(key in recorded and recorded[key] == here.get(key) for key in ENVIRONMENT_KEYS)


# every record has these since schema 3 (metrics, and the names of :func:`shown` for its new fields)
SCHEMA_3_NUMBERS = ("chance_accuracy", "oracle_accuracy", "train.stopped_because", "budget_curve[", "evaluations[")


def is_accuracy(metric: str) -> bool:
    """Whether ``metric`` (a flat name of :func:`shown`) is an accuracy, judged within the tolerance across
    environments."""
    metric = metric.rpartition(".")[2]
    return metric == "accuracy" or metric.endswith("_accuracy")


@dataclass
class Verdict:
    """One record's verification: which metrics differ, and whether that is a mismatch."""

    record: Record
    exact: bool  # bit-identical required (same environment)
    differences: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # metric -> (published, rerun)
    mismatches: list[str] = field(default_factory=list)
    error: str | None = None
    note: str | None = None
    devices: tuple[str, str] | None = None  # (made on, checked on) when the kinds of device differ

    @property
    def tolerance(self) -> float:
        """How far an accuracy may move: :data:`DEVICE_TOLERANCE` across kinds of device, else
        :data:`ACCURACY_TOLERANCE` (no tolerance at all in the same environment)."""
        return DEVICE_TOLERANCE if self.devices else ACCURACY_TOLERANCE

    @property
    def ok(self) -> bool:
        return self.error is None and not self.mismatches


def shown(record: Record) -> dict[str, Any]:
    """Every retrained number of ``record`` that the leaderboard draws from, by a flat name: its metrics, the steps
    taken and why training stopped, the budget curve (``budget_curve[STEP].accuracy``) and each evaluation setting's
    status and metrics (``evaluations[context_length=128].accuracy``). Fields a record's schema lacks are absent."""
    numbers: dict[str, Any] = dict(record["metrics"])
    for key in ("steps", "stopped_because"):
        if key in record["train"]:
            numbers[f"train.{key}"] = record["train"][key]
    for point in record.get("budget_curve", []):
        numbers[f"budget_curve[{point['step']}].accuracy"] = point["accuracy"]
    for entry in record.get("evaluations", []):
        name = "evaluations[" + ",".join(f"{k}={v}" for k, v in entry["overrides"].items()) + "]"
        numbers[f"{name}.status"] = entry["status"]
        numbers.update({f"{name}.{metric}": value for metric, value in entry.get("metrics", {}).items()})
    return numbers


def device_kind(device: Any) -> str:
    """The kind of a record's ``provenance.device``: ``cuda`` of ``cuda (NVIDIA H200)``, ``cpu`` of ``cpu``."""
    return str(device or "unknown").split(" ")[0]


def compare(record: Record, rerun: Record, exact: bool) -> Verdict:
    """Every number of ``record`` the page shows (:func:`shown`) against ``rerun``: equal, or, across environments,
    accuracies within the tolerance (the others are reported)."""
    made, checked = (device_kind(r["provenance"].get("device")) for r in (record, rerun))
    verdict = Verdict(record, exact, devices=(made, checked) if made != checked else None)
    if rerun["status"] != "ok":
        verdict.error = f"the rerun failed: {rerun['error']}"
        return verdict
    published, again = shown(record), shown(rerun)
    for metric in sorted(set(published) | set(again)):
        before, after = published.get(metric), again.get(metric)
        if before == after or (metric not in published and record["schema_version"] < 3
                               and metric.startswith(SCHEMA_3_NUMBERS)):  # not computed when the record was written
            continue
        verdict.differences[metric] = (before, after)
        if exact:
            verdict.mismatches.append(metric)
        elif is_accuracy(metric) and not metric.endswith("normalized_accuracy") and (
                before is None or after is None or abs(before - after) > verdict.tolerance):
            verdict.mismatches.append(metric)
    return verdict


def environment_differences(record: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """``key recorded -> here`` for each environment key in which ``record`` differs from ``current``."""
    recorded, here = record["provenance"], {**current, "threads": threads(record)}
    return [f"{key} {recorded.get(key, '(not recorded)')!r} -> {here.get(key)!r}" for key in ENVIRONMENT_KEYS
            if recorded.get(key) != here.get(key)]


def rebuild(record: Record, registry: Any) -> tuple[Any, str | None]:
    """The pairing that trains ``record`` again from its stored configuration, and a note.

    A parameter that this tokbench declares and the record lacks (added since, under the
    same task and model versions) runs at its default, and the note names it; a stored
    value that resolves differently here, a task or model that is not installed or has
    another version, is a :class:`UsageError` (the configuration cannot be rebuilt).
    """
    from tokbench.grid import Pairing, Variant
    from tokbench.isolation import execute, set_threads, trainer_provenance
    from tokbench.results import clean, git_commit
    from tokbench.specs import migrate_recipe

    check_threads(record)
    for kind, names in (("task", registry.tasks), ("model", registry.models)):
        if record[kind] not in names:
            raise UsageError(f"{kind} {record[kind]!r} is not installed here: install the plugin that provides it "
                             "(`tokbench plugins` lists what is installed)")
    task, model = registry.task(record["task"]), registry.model(record["model"])
    for kind, spec, version in (("task", task, record["task_version"]), ("model", model, record["model_version"])):
        if spec.version != version:
            raise UsageError(f"{kind} {spec.name} is version {spec.version} here, the record has version {version}")
    stored = {**record["params"], "train": migrate_recipe(record["params"]["train"])}  # a removed key: ParamError
    variant = Variant(task, model, task.resolve(stored["task"]), model.resolve(stored["model"]),
                      model.recipe.override(stored["train"]), evaluate=tuple(stored.get("evaluate", ())))
    pairing = Pairing(variant, record["seed"])
    note = None
    if pairing.config_hash != record["config_hash"]:
        rebuilt = clean(pairing.variant.params)  # as written: tuples are lists
        changed = [f"{space}.{key}" for space in ("task", "model", "train") for key, value in stored[space].items()
                   if rebuilt[space].get(key) != value]
        if changed:
            raise UsageError(f"the stored {', '.join(changed)} resolve differently here: the configuration cannot "
                             "be rebuilt")
        added = [f"{space}.{key}={value}" for space in ("task", "model", "train")
                 for key, value in rebuilt[space].items() if key not in stored.get(space, {})]
        note = "parameters added since, at their defaults: " + ", ".join(added)
    return pairing, note


def records_digest(folder: Path) -> str:
    """The SHA-256 of the run-record files under ``folder`` (their paths and bytes): what a stamp checked, so that
    a record added, removed or edited since shows."""
    import hashlib

    from tokbench.results import record_files

    total = hashlib.sha256()
    for path in record_files(folder):
        total.update(f"{path.relative_to(folder).as_posix()}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n"
                     .encode())
    return total.hexdigest()


def stamp(verdicts: Sequence[Verdict], records: int, sample_size: int | None, seed: int,
          here: Mapping[str, Any], digest: str) -> dict[str, Any]:
    """What a finished ``tokbench verify --stamp`` leaves beside the records (:data:`~tokbench.results.STAMP`): the
    commit and environment it ran at, how many of how many records it retrained (their config hashes) and how many
    reproduced, a line per record that did not, and the :func:`records_digest` of the folder it checked."""
    from tokbench.results import utc_now

    failed = [f"{v.record['task']} x {v.record['model']} seed {v.record['seed']} ({v.record['config_hash']}): "
              + (v.error or "differs in " + ", ".join(v.mismatches)) for v in verdicts if not v.ok]
    return {"commit": here.get("git_commit"), "checked_at": utc_now(), "records": records,
            "sample": sample_size, "seed": seed, "checked": len(verdicts), "reproduced": len(verdicts) - len(failed),
            "same_environment": sum(v.exact for v in verdicts), "failed": failed,
            "environment": {key: here.get(key) for key in ENVIRONMENT_KEYS if key != "threads"},
            "checked_records": sorted(v.record["config_hash"] for v in verdicts), "records_digest": digest}


def stamp_sentence(found: Mapping[str, Any]) -> str:
    """The stamp in words, for the leaderboard: at which commit, how many reproduced, where they did not, and
    whether the records changed since (``changed``, set by :func:`read_stamp`)."""
    commit = str(found.get("commit") or "an uncommitted tree")[:12]
    exact, checked = found["same_environment"], found["checked"]
    where = ("all in the records' own environment, so bit-identical was required" if exact == checked else
             f"{checked - exact} in another environment, where accuracies must agree within {ACCURACY_TOLERANCE:g}")
    verdict = (f"all {checked} reproduced" if found["reproduced"] == checked else
               f"{found['reproduced']} of {checked} reproduced; not: " + "; ".join(found["failed"]))
    changed = f" The records changed since that check ({found['changed']})." if found.get("changed") else ""
    return (f"`tokbench verify --sample {found['sample'] or 'all'}` at commit {commit} "
            f"({found['checked_at'][:10]}) retrained {checked} of its {found['records']} records ({where}): "
            f"{verdict}.{changed}")


STAMP_CLOCK_SKEW = timedelta(days=1)  # a stamp dated later than now by more than this was not made by verify


def _impossible(found: Mapping[str, Any]) -> str | None:
    """Why ``found`` cannot be what ``tokbench verify --stamp`` wrote, or None."""
    counts = [found[key] for key in ("records", "checked", "reproduced", "same_environment")]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
        return "its counts are not whole numbers"
    records, checked, reproduced, exact = counts
    if not reproduced <= checked <= records or exact > checked:
        return f"{reproduced} reproduced of {checked} checked of {records} records"
    if not isinstance(found["failed"], list) or len(found["failed"]) != checked - reproduced:
        return f"{len(found['failed']) if isinstance(found['failed'], list) else 'no'} lines of failures for " \
               f"{checked - reproduced} records that did not reproduce"
    listed = found.get("checked_records")
    if listed is not None and (not isinstance(listed, list) or len(set(map(str, listed))) != checked):
        return f"it lists {len(listed) if isinstance(listed, list) else 'no'} checked records for {checked} checked"
    try:
        when = datetime.fromisoformat(str(found["checked_at"]).replace("Z", "+00:00"))
    except ValueError:
        return f"checked_at {found['checked_at']!r} is not a time"
    if when.tzinfo is None or when > datetime.now(timezone.utc) + STAMP_CLOCK_SKEW:
        return f"checked_at {found['checked_at']} is in the future"
    return None


def read_stamp(folder: Path) -> dict[str, Any] | None:
    """The stamp in ``folder`` (None where there is none, or it is not a stamp this version wrote), with ``changed``
    saying how the records differ from those it checked (None when they do not). A stamp that cannot be what
    ``verify`` wrote (more reproduced than checked, a date in the future, ...) is a :class:`UsageError`."""
    import json

    from tokbench.results import STAMP, record_files

    path = folder / STAMP
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    keys = ("commit", "checked_at", "records", "sample", "checked", "reproduced", "same_environment", "failed")
    if not isinstance(found, dict) or not all(key in found for key in keys):
        return None
    if (why := _impossible(found)) is not None:
        raise UsageError(f"{path}: not a stamp that `tokbench verify --stamp` wrote ({why}); remove it or verify "
                         "again with --stamp")
    now = sum(1 for _ in record_files(folder))
    if "records_digest" in found:  # stamps before 0.2.1 record only the count
        changed = found["records_digest"] != records_digest(folder)
    else:
        changed = now != found["records"]
    found["changed"] = None if not changed else (f"{found['records']} records then, {now} now"
                                                  if now != found["records"] else f"{now} records, not all as checked")
    return found
