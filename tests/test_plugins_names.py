"""Names that survive installing plugins: a built-in keeps its bare name, identity and config hash; a clashing
plugin gets the qualified name; record file names hold no ':'; an entry-point name is checked at load."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from leaderboard_synth import record
from run_support import write_suite
from tokbench.results import load_record, load_records, record_filename, write_record

ROOT = Path(__file__).resolve().parents[1]


def _cheapest_published(model: str) -> Path:
    """The published ok record of ``model`` that took the least training (7 s of 400 steps at the time of
    writing)."""
    records = [(json.loads(p.read_text()), p) for p in (ROOT / "leaderboard/records").glob(f"*/*__{model}__*.json")]
    return min((r["train"]["wall_seconds"], p) for r, p in records if r["status"] == "ok")[1]

WALK = """
[grid.task.random-walk]
context_length = 8
train_size = 32
val_size = 16
test_size = 32
[grid.train]
steps = 3
"""
# The built-in linear-attention and uniform, and any plugin's linear-attention (a pattern: absent is no error).
CLASH_SUITE = """
seeds = 1
[[grid]]
tasks = ["random-walk"]
models = ["linear-attention", "uniform", "*:linear-attention"]
""" + WALK
# Two tasks (one from a well-behaved plugin) x two baselines and that plugin's model: 6 pairings.
MIXED_SUITE = """
seeds = 1
[[grid]]
tasks = ["random-walk", "previous-token"]
models = ["uniform", "last-token", "two-layer-attention"]
[grid.task.previous-token]
train_size = 32
val_size = 16
test_size = 32
""" + WALK


def _models(cli, env):
    listing = cli("ls", "models", "--json", env=env)
    assert listing.returncode == 0, listing.stderr
    return {m["name"]: m for m in json.loads(listing.stdout)}


def test_a_published_built_in_record_verifies_beside_a_plugin_that_takes_its_name(cli, plugin_site, tmp_path):
    env = plugin_site(dup="duplicate_model")
    models = _models(cli, env)
    assert models["linear-attention"]["plugin"] == "tokbench"
    assert models["dup:linear-attention"]["plugin"] == "tokbench-fake-plugins"
    folder = tmp_path / "published"
    folder.mkdir()
    shutil.copy(_cheapest_published("linear-attention"), folder)
    verified = cli("verify", str(folder), env=env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "1 of 1" in verified.stdout + verified.stderr


def test_a_clash_changes_no_built_in_identity_and_no_file_name_holds_a_colon(cli, plugin_site, tmp_path):
    suite = write_suite(tmp_path, CLASH_SUITE)
    plain = cli("run", "--suite", str(suite), "--dry-run", "--out", str(tmp_path / "plain"))
    env = plugin_site(dup="duplicate_model")
    clashing = cli("run", "--suite", str(suite), "--dry-run", "--out", str(tmp_path / "plain"), env=env)
    assert plain.returncode == 0 and clashing.returncode == 0, plain.stderr + clashing.stderr
    planned = dict(line.split(None, 3)[2:] for line in clashing.stdout.splitlines() if line.startswith("run"))
    for line in plain.stdout.splitlines():
        if line.startswith("run"):  # every built-in pairing keeps its config hash
            hash_, label = line.split(None, 3)[2:]
            assert planned[hash_] == label
    assert any("dup:linear-attention" in label for label in planned.values())

    out = tmp_path / "runs"
    result = cli("run", "--suite", str(suite), "--out", str(out), "-q", env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    files = sorted(p.name for p in out.glob("*.json"))
    records = [json.loads((out / name).read_text()) for name in files]
    assert all(":" not in name for name in files)
    assert {"linear-attention", "dup:linear-attention"} <= {r["model"] for r in records}
    assert len(records) == 3 and all(r["status"] == "ok" for r in records)
    assert "random-walk__dup.linear-attention__" in " ".join(files)


def test_a_record_file_named_with_a_colon_by_an_older_version_still_loads(tmp_path):
    rec = record(model="dup:linear-attention")
    written = write_record(tmp_path, rec)
    assert written.name == record_filename("random-walk", "dup:linear-attention", rec["config_hash"])
    assert ":" not in written.name
    legacy = written.with_name(f"random-walk__dup:linear-attention__{rec['config_hash']}.json")
    written.rename(legacy)
    assert load_record(legacy)["model"] == "dup:linear-attention"
    loaded = load_records(tmp_path)
    assert list(loaded.records) == [rec["config_hash"]] and not loaded.problems


def test_an_entry_point_name_that_cannot_head_a_file_name_is_refused_and_the_rest_runs(cli, plugin_site, tmp_path):
    env = plugin_site(**{"../../../evil": "duplicate_task", "v2": "contract_v2"})
    report = {p["name"]: p for p in json.loads(cli("plugins", "--json", env=env).stdout)}
    assert report["../../../evil"]["status"] == "error" and "is not allowed" in report["../../../evil"]["error"]
    assert report["v2"]["status"] == "ok"
    suite = write_suite(tmp_path, MIXED_SUITE)
    out = tmp_path / "runs"
    result = cli("run", "--suite", str(suite), "--out", str(out), "-q", env=env)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    records = [json.loads(p.read_text()) for p in out.glob("*.json")]
    assert len(records) == 6 and all(r["status"] == "ok" for r in records)


def _legacy(path: Path) -> Path:
    """``path`` renamed to the name an older version wrote: the qualified name's ':' kept."""
    rec = json.loads(path.read_text())
    return path.rename(path.with_name(record_filename(rec["task"], rec["model"], rec["config_hash"], portable=False)))


def test_writing_a_record_removes_the_file_of_the_same_pairing_under_its_older_name(tmp_path):
    first = record(model="dup:linear-attention")
    legacy = _legacy(write_record(tmp_path, first))
    assert ":" in legacy.name
    again = record(model="dup:linear-attention", accuracy=0.5)
    written = write_record(tmp_path, again)
    assert [p.name for p in tmp_path.iterdir()] == [written.name] and ":" not in written.name
    assert load_record(written)["metrics"]["accuracy"] == 0.5

    # a failed rerun keeps the finished record, under whichever name it has
    legacy = _legacy(written)
    failed = record(model="dup:linear-attention", error="RuntimeError: boom")
    assert write_record(tmp_path, failed) == legacy and [p.name for p in tmp_path.iterdir()] == [legacy.name]
    # a finished one replaces a failed one, and its older file goes
    legacy.unlink()
    _legacy(write_record(tmp_path, failed))
    written = write_record(tmp_path, again)
    assert [p.name for p in tmp_path.iterdir()] == [written.name]


def test_a_file_under_the_older_name_that_is_no_record_is_left_alone(tmp_path):
    rec = record(model="dup:linear-attention")
    corrupt = tmp_path / record_filename(rec["task"], rec["model"], rec["config_hash"], portable=False)
    corrupt.write_text("{not json")
    written = write_record(tmp_path, rec)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([written.name, corrupt.name])


def test_rerun_all_leaves_one_file_per_pairing_where_an_older_version_wrote_a_colon(cli, plugin_site, tmp_path):
    suite = write_suite(tmp_path, CLASH_SUITE.replace('"linear-attention", "uniform", ', ""))
    env = plugin_site(dup="duplicate_model")
    out = tmp_path / "runs"
    assert cli("run", "--suite", str(suite), "--out", str(out), "-q", env=env).returncode == 0
    (path,) = out.glob("*.json")
    legacy = _legacy(path)
    before = json.loads(legacy.read_text())["provenance"]["started_at"]
    result = cli("run", "--suite", str(suite), "--out", str(out), "-q", "--rerun", "all", env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    (rerun,) = out.glob("*.json")  # the new file only, not the old one beside it
    assert rerun.name == path.name and ":" not in rerun.name and not legacy.exists()
    assert json.loads(rerun.read_text())["provenance"]["started_at"] >= before
