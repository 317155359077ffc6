"""Issue #11 attacks on run records: tampered values, hostile files, newer schema versions, odd names, holes."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from leaderboard_synth import record, seeds, write
from test_records import ok_record
from tokbench.cli import main
from tokbench.leaderboard.publish import FILES
from tokbench.results import (SCHEMA_VERSION, STAMP, RecordError, config_hash, load_records, record_filename,
                              record_files, record_schema, write_record)


def _tampered(tmp_path: Path, **metrics: float) -> Path:
    rec = ok_record()
    rec["metrics"].update(metrics)
    path = tmp_path / "runs" / record_filename(rec["task"], rec["model"], rec["config_hash"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec))
    return path


def test_an_out_of_range_accuracy_is_named_and_never_enters_a_table(tmp_path, capsys):
    path = _tampered(tmp_path, accuracy=7.5)
    assert main(["leaderboard", "--records", str(path.parent), "--format", "md"]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "metrics.accuracy: 7.5 is greater than the maximum of 1" in err
    assert len(err.strip().splitlines()) == 1
    loaded = load_records(path.parent)
    assert not loaded.records and loaded.problems[0].path == path


def test_nan_written_into_a_record_is_rejected(tmp_path):
    path = _tampered(tmp_path)
    path.write_text(path.read_text().replace('"accuracy": 0.5', '"accuracy": NaN'))
    (problem,) = load_records(path.parent).problems
    assert "NaN is not JSON" in problem.reason


@pytest.mark.parametrize("make", ["fifo", "zero", "folder", "deep", "huge"])
def test_hostile_files_named_json_neither_hang_nor_exhaust_memory(tmp_path, make):
    folder = tmp_path / "runs"
    write_record(folder, ok_record())
    hostile = folder / "x.json"
    if make == "fifo":
        os.mkfifo(hostile)
    elif make == "zero":
        hostile.symlink_to("/dev/zero")
    elif make == "folder":
        hostile.mkdir()
    elif make == "deep":
        hostile.write_text("[" * 100_000 + "]" * 100_000)
    else:
        with hostile.open("wb") as handle:  # sparse: 64 MB of nothing on disk
            handle.truncate(64 * 2**20)
    started = time.process_time()  # this process's CPU: what reading a hostile file would burn, whatever the load
    loaded = load_records(folder)
    assert time.process_time() - started < 10
    assert len(loaded.records) == 1 and [p.path for p in loaded.problems] == [hostile]


def test_records_without_normalized_accuracy_render_in_every_format(tmp_path, capsys):
    runs = tmp_path / "runs"
    for rec in seeds(2, [0.5, 0.6]):
        del rec["metrics"]["normalized_accuracy"]
        write_record(runs, rec)
    capsys.readouterr()
    for fmt in (*FILES, "terminal"):
        assert main(["leaderboard", "--records", str(runs), "--format", fmt]) == 0, fmt
        assert "0.55" in capsys.readouterr().out, fmt  # the cell's mean accuracy, (0.5 + 0.6) / 2
    assert main(["leaderboard", "--records", str(runs), "--format", "all", "--out", str(tmp_path / "board")]) == 0
    assert "0.550" in (tmp_path / "board" / FILES["md"]).read_text()


def test_version_1_records_still_load_and_version_3_is_written(tmp_path):
    old = record()  # schema_version 1, as published
    assert old["schema_version"] == 1 and SCHEMA_VERSION == 3
    write(tmp_path, [old])
    assert list(load_records(tmp_path).records.values()) == [old]
    v1_not_applicable = {**old, "status": "not_applicable", "error": "n/a", "metrics": {}}
    (tmp_path / record_filename(old["task"], old["model"], old["config_hash"])).write_text(
        json.dumps(v1_not_applicable))
    assert "status: 'not_applicable' is not one of ['ok', 'failed']" in load_records(tmp_path).problems[0].reason


def test_not_applicable_and_failure_fields_of_version_2(tmp_path):
    base = {**ok_record(), "metrics": {}, "error": "attn-paper-a predicts only the last position"}
    write_record(tmp_path, {**base, "status": "not_applicable"})
    failed = {**base, "status": "failed", "error": "worker died",
              "failure": {"phase": "worker", "exit_status": None, "signal": "SIGKILL"}}
    write_record(tmp_path / "b", failed)
    with pytest.raises(ValueError, match="failure.phase: 'lunch' is not one of"):
        write_record(tmp_path / "c", {**failed, "failure": {**failed["failure"], "phase": "lunch"}})


def _newer(folder: Path, pairing_record: dict) -> Path:
    newer = {**pairing_record, "schema_version": SCHEMA_VERSION + 1, "something_new": {"x": 1}}
    path = folder / record_filename(newer["task"], newer["model"], newer["config_hash"])
    path.write_text(json.dumps(newer))
    return path


def test_a_record_of_a_newer_schema_version_is_never_overwritten(tmp_path, capsys):
    out = tmp_path / "runs"
    argv = ["run", "--task", "random-walk", "--model", "last-token", "--seeds", "1", "--out", str(out), "-q",
            "--set", "train_size=50", "--set", "val_size=50", "--set", "test_size=50"]
    assert main(argv) == 0
    (path,) = out.glob("*.json")
    newer = _newer(out, json.loads(path.read_text()))
    before = newer.read_bytes()
    capsys.readouterr()
    for rerun in ("missing", "all"):
        assert main([*argv, "--rerun", rerun]) == 0
        err = capsys.readouterr().err
        assert err.count("written by a newer tokbench") == 1 and str(newer) in err
        assert newer.read_bytes() == before
    assert main(["leaderboard", "--records", str(out)]) == 2
    assert "newer than this tokbench reads" in capsys.readouterr().err


def test_names_that_cannot_head_a_file_are_rejected_at_registration(plugin_site, cli, tmp_path):
    env = plugin_site(bad="bad_names")
    done = cli("plugins", "--json", env=env)
    (bad,) = [p for p in json.loads(done.stdout) if p["name"] == "bad"]
    assert bad["status"] == "error" and bad["tasks"] == bad["models"] == []
    assert "is not allowed" in bad["error"] and "at most 64 characters" in bad["error"]
    done = cli("ls", "tasks", env=env)
    warnings = done.stderr.strip().splitlines()
    assert done.returncode == 0 and "walk/evil" not in done.stdout and len(warnings) == 1
    done = cli("run", "--dry-run", "--task", "walk/evil", "--out", str(tmp_path), env=env)
    assert done.returncode == 2 and "unknown task 'walk/evil'" in done.stderr and "Traceback" not in done.stderr


def test_the_published_schema_is_the_one_the_loader_uses():
    docs = Path(__file__).parents[1] / "docs" / "run-record.schema.json"
    assert json.loads(docs.read_text()) == record_schema()
    published = Path(__file__).parents[1] / "leaderboard" / "records"
    loaded = load_records(published)
    files = list(record_files(published))  # every published record loads, none is skipped
    assert files and len(loaded.records) == len(files) and not loaded.problems
    assert {p.name for p in published.rglob("*.json")} - {p.name for p in files} <= {STAMP}  # only stamps aside
    assert all(r["config_hash"] == config_hash(r) for r in loaded.records.values())


def test_writing_never_replaces_a_record_of_a_newer_schema_version(tmp_path):
    rec = ok_record()
    newer = _newer(tmp_path, rec)
    before = newer.read_bytes()
    with pytest.raises(RecordError, match="newer than this tokbench reads.*not overwritten"):
        write_record(tmp_path, rec)
    assert newer.read_bytes() == before
