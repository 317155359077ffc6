"""Run records: identity and config hash, atomic writes, validation, and loading with problems reported by path."""
from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import pytest

from tokbench.errors import StorageError
from tokbench.grid import Pairing
from tokbench.plugins import registry
from tokbench.results import (RecordError, clean, config_hash, load_record, load_records, record_filename,
                              validate, write_record)
from tokbench.harness import PairingResult
from tokbench.outcome import Failure, Outcome, record_of

PROVENANCE = {"tokbench_version": "0.1.0", "git_commit": None, "python": "3.11.7", "torch": "2.13.0",
              "lightning": "2.6.0", "device": "cpu", "started_at": "2026-01-01T00:00:00Z"}


def pairing(seed: int = 0, p: float = 0.5) -> Pairing:
    reg = registry()
    task, model = reg.task("random-walk"), reg.model("attn-paper-a")
    return Pairing.of(task, model, task.resolve({"p": p}), model.resolve({}), model.recipe, seed)


def ok_record(seed: int = 0, started_at: str = PROVENANCE["started_at"]) -> dict:
    result = PairingResult(metrics={"accuracy": 0.5, "bayes_accuracy": 0.5, "normalized_accuracy": 1.0,
                                    "parent_attention": math.nan},
                           train={"steps": 50, "final_loss": 1.2, "wall_seconds": 0.3},
                           curve={"step": [0, 1], "loss": [1.23456789, 1.1], "accuracy": [0.1, 0.2]},
                           attention_profile=[0.5, 0.25, 0.25])
    return record_of(pairing(seed), Outcome(started_at, 0.3, result=result), PROVENANCE)


def failed_record(seed: int = 0) -> dict:
    outcome = Outcome(PROVENANCE["started_at"], 0.1, error="ValueError: boom", failure=Failure("train"))
    return record_of(pairing(seed), outcome, PROVENANCE)


# ---- identity ----------------------------------------------------------------------------------------------------

def test_config_hash_is_sha256_of_the_canonical_identity():
    record = ok_record()
    reordered = {k: record[k] for k in reversed(list(record))}
    assert config_hash(record) == config_hash(reordered) == record["config_hash"]
    # as docs/run-records.md states it: sha256 of the identity's JSON, keys sorted, no spaces; 16 hex characters
    identity = {key: record[key] for key in ("task", "task_version", "model", "model_version", "params", "seed")}
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    assert record["config_hash"] == hashlib.sha256(text.encode()).hexdigest()[:16]
    assert len(record["config_hash"]) == 16 and int(record["config_hash"], 16) >= 0
    assert pairing(seed=1).config_hash != pairing().config_hash != pairing(p=0.6).config_hash


def test_record_has_the_schema_fields():
    record = ok_record()
    validate(record)
    assert record["schema_version"] == 3 and record["status"] == "ok" and record["error"] is None
    assert set(record["params"]) == {"task", "model", "train"} and record["params"]["train"]["lr_grid"] == []
    assert record["metrics"]["parent_attention"] is None  # JSON has no NaN
    assert record["curve"]["loss"][0] == 1.23457  # 6 significant digits
    assert record["meta"]["recipe"] == "gd, lr 1, 50 steps, full batch"


def test_clean_turns_non_finite_floats_and_tuples_into_json():
    assert clean({"a": (1.0, math.inf), "b": -math.nan}) == {"a": [1.0, None], "b": None}


# ---- writing -----------------------------------------------------------------------------------------------------

def test_write_then_load_round_trips(tmp_path):
    record = ok_record()
    path = write_record(tmp_path, record)
    assert path.name == record_filename("random-walk", "attn-paper-a", record["config_hash"])
    assert load_record(path) == record
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left


def test_a_failed_write_leaves_neither_record_nor_temporary_file(tmp_path, monkeypatch):
    def crash(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(StorageError, match="disk full"):
        write_record(tmp_path, ok_record())
    assert list(tmp_path.iterdir()) == []


def test_an_invalid_record_is_never_written(tmp_path):
    record = ok_record()
    record["metrics"]["accuracy"] = None
    with pytest.raises(ValueError, match="metrics.accuracy: None is not of type 'number'"):
        write_record(tmp_path, record)
    assert list(tmp_path.iterdir()) == []


# ---- validation and loading ------------------------------------------------------------------------------------

def _write_raw(folder: Path, name: str, content: str) -> Path:
    path = folder / name
    path.write_text(content, encoding="utf-8")
    return path


@pytest.mark.parametrize("mutate, reason", [
    (lambda r: r.pop("schema_version"), "not a tokbench run record"),
    (lambda r: r.update(schema_version=4), "schema_version 4 is newer than this tokbench reads"),
    (lambda r: r.update(schema_version="2"), "schema_version: '2' is not one of"),
    (lambda r: r["params"]["task"].update(p=0.9), "does not match the record's identity"),
    (lambda r: r.update(status="done"), "status: 'done' is not one of"),
    (lambda r: r["provenance"].pop("torch"), "provenance: 'torch' is a required property"),
    (lambda r: r["metrics"].update(accuracy="high"), "metrics.accuracy: 'high' is not of type"),
    (lambda r: r.update(status="failed"), "error: None is not of type 'string'"),
    (lambda r: r["metrics"].update(accuracy=7.5), r"metrics.accuracy: 7.5 is greater than the maximum of 1"),
    (lambda r: r["metrics"].update(test_accuracy=-0.1), r"metrics.test_accuracy: -0.1 is less than the minimum"),
    (lambda r: r["metrics"].update(normalized_accuracy=-1), r"metrics.normalized_accuracy: -1 is less than"),
    (lambda r: r["metrics"].update(parent_attention=1.5), r"metrics.parent_attention: 1.5 is greater than"),
    (lambda r: r["metrics"].update(svm_correlation=-2), r"metrics.svm_correlation: -2 is less than the minimum of -1"),
    (lambda r: r["metrics"].update(bayes_loss=-0.5), r"metrics.bayes_loss: -0.5 is less than the minimum of 0"),
    (lambda r: r.update(failure={"phase": "train", "exit_status": None, "signal": None}),
     "failure: not allowed in a 'ok' record"),
    (lambda r: r.update(seed=-1), "seed: -1 is less than the minimum of 0"),
])
def test_invalid_records_are_reported_with_the_reason(tmp_path, mutate, reason):
    record = ok_record()
    mutate(record)
    path = _write_raw(tmp_path, record_filename("random-walk", "attn-paper-a", ok_record()["config_hash"]),
                      json.dumps(record))
    with pytest.raises(RecordError, match=reason) as info:
        load_record(path)
    assert str(info.value).startswith(str(path))


def test_loader_skips_corrupt_and_foreign_files_unless_strict(tmp_path):
    good = write_record(tmp_path, ok_record())
    truncated = _write_raw(tmp_path, "random-walk__attn-paper-a__0000000000000000.json", good.read_text()[:100])
    foreign = _write_raw(tmp_path, "package.json", '{"name": "left-pad"}')
    renamed = _write_raw(tmp_path, "copy.json", good.read_text())
    _write_raw(tmp_path, f".{good.name}.abc.tmp", "{")  # a killed writer's temporary file is ignored
    _write_raw(tmp_path, "notes.txt", "not json")

    loaded = load_records(tmp_path)
    assert list(loaded.records) == [ok_record()["config_hash"]]
    reasons = {problem.path: problem.reason for problem in loaded.problems}
    assert set(reasons) == {truncated, foreign, renamed}
    assert reasons[truncated].startswith("corrupt JSON")
    assert reasons[foreign] == "not a tokbench run record (no schema_version)"
    assert reasons[renamed].startswith("file name does not match the record")
    with pytest.raises(RecordError):
        load_records(tmp_path, strict=True)


def test_merged_folders_keep_one_record_per_pairing(tmp_path):
    write_record(tmp_path / "shard0", failed_record())
    write_record(tmp_path / "shard1", ok_record(started_at="2026-01-01T00:00:00Z"))
    write_record(tmp_path / "shard2", ok_record(started_at="2026-01-02T00:00:00Z"))
    write_record(tmp_path / "shard2", ok_record(seed=1))
    loaded = load_records(tmp_path)
    assert not loaded.problems and len(loaded.records) == 2
    kept = loaded.records[ok_record()["config_hash"]]
    assert kept["status"] == "ok" and kept["provenance"]["started_at"] == "2026-01-02T00:00:00Z"


def test_missing_folder_loads_nothing(tmp_path):
    loaded = load_records(tmp_path / "absent")
    assert loaded.records == {} and loaded.problems == []
