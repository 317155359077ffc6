"""``tokbench verify``: records retrain from their stored configuration; a changed number is caught."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from leaderboard_synth import record, write
from run_support import write_suite
from tokbench import verification
from tokbench.cli import main
from tokbench.results import STAMP, config_hash, load_records, provenance

ROOT = Path(__file__).resolve().parents[1]
HERE = {"python": "3.11.7", "torch": "2.13.0", "lightning": "2.6.0", "device": "cpu", "cpu": "x86_64 Some CPU"}
# 1 model x 2 seeds on a short random walk: a few seconds, trained on one thread each (2 workers on 2 cores or less).
SUITE = """
seeds = 2
[[grid]]
tasks = ["random-walk"]
models = ["attn-nope"]
[grid.task.random-walk]
context_length = 8
train_size = 32
val_size = 16
test_size = 32
[grid.train]
steps = 3
budgets = [1, 2]
"""


def _schema_3(rec: dict) -> dict:
    """``rec`` with the fields of schema 3 that the page draws from: a budget curve, a stop and an evaluation."""
    rec = json.loads(json.dumps(rec))
    rec["train"].update(max_steps=rec["params"]["train"]["steps"], stopped_because="cap")
    rec["budget_curve"] = [{"step": 10, "accuracy": 0.3}, {"step": rec["train"]["steps"],
                                                            "accuracy": rec["metrics"]["accuracy"], "final": True}]
    rec["evaluations"] = [{"overrides": {"context_length": 16}, "status": "ok", "metrics": {"accuracy": 0.4}}]
    return rec


@pytest.mark.parametrize("edit, name", [
    (lambda r: r["budget_curve"][0].update(accuracy=0.9), "budget_curve[10].accuracy"),
    (lambda r: r["evaluations"][0]["metrics"].update(accuracy=0.9), "evaluations[context_length=16].accuracy"),
    (lambda r: r["train"].update(stopped_because="target"), "train.stopped_because"),
    (lambda r: r["train"].update(steps=40), "train.steps"),
])
def test_verify_compares_every_number_the_page_shows(edit, name):
    """Before, verify compared `metrics` only: an edited budget curve, evaluation or stop passed as bit-identical."""
    rec = _schema_3(record(accuracy=0.5))
    edited = json.loads(json.dumps(rec))
    edit(edited)
    assert verification.compare(edited, rec, exact=True).mismatches == [name]
    judged_elsewhere = verification.compare(edited, rec, exact=False)
    assert judged_elsewhere.ok == (not name.endswith("accuracy")) and name in judged_elsewhere.differences


@pytest.mark.parametrize("edit, message", [
    (lambda r: r["budget_curve"][-1].update(accuracy=0.99), "budget_curve: its final point"),
    (lambda r: r["budget_curve"].reverse(), "budget_curve: its steps do not rise"),
    (lambda r: r["train"].update(steps=100050), "train.steps 100050 is more than train.max_steps 50"),
    (lambda r: r["train"].update(max_steps=200), "train.max_steps 200 is not the recipe's steps 50"),
    (lambda r: r["train"].update(steps=10**400), "train.steps"),  # was an OverflowError traceback in the leaderboard
    (lambda r: r.pop("evaluations"), "evaluations: not one per planned setting"),
])
def test_the_leaderboard_refuses_a_record_whose_numbers_contradict_each_other(tmp_path, capsys, edit, message):
    rec = _schema_3(record(accuracy=0.5))
    rec["schema_version"] = 3
    rec["params"]["evaluate"] = [{"context_length": 16}]
    rec = {**rec, "config_hash": config_hash(rec)}
    runs = write(tmp_path / "runs", [rec])
    assert main(["leaderboard", "--records", str(runs)]) == 0
    path = next(runs.glob("*.json"))
    edited = json.loads(path.read_text())
    edit(edited)
    path.write_text(json.dumps(edited))
    capsys.readouterr()
    assert main(["leaderboard", "--records", str(runs)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and str(path) in err, err


def test_the_sample_is_a_seeded_draw_independent_of_file_order():
    records = [record(seed=s, accuracy=0.5) for s in range(10)] + [record(seed=11, error="RuntimeError: x")]
    first = verification.sample(records, 4, seed=0)
    assert first == verification.sample(records[::-1], 4, seed=0) and len(first) == 4
    assert all(r["status"] == "ok" for r in verification.sample(records, None, 0))
    assert len(verification.sample(records, 50, 0)) == 10


def test_bit_identity_is_required_only_in_the_recorded_environment():
    rec = record(accuracy=0.5, diagnostics={"parent_attention": 0.9})
    rec["provenance"].update(HERE, threads=1)
    assert verification.same_environment(rec, HERE)
    two = {**rec, "provenance": {**rec["provenance"], "threads": 2}}
    assert verification.same_environment(two, HERE) and verification.threads(two) == 2  # retrained on 2 threads
    unknown = {**rec, "provenance": {k: v for k, v in rec["provenance"].items() if k != "threads"}}
    assert not verification.same_environment(unknown, HERE) and verification.threads(unknown) == 1
    older = record(accuracy=0.5)  # no processor or thread count recorded: never the same environment
    assert not verification.same_environment(older, {**HERE, "python": older["provenance"]["python"]})

    nudged = json.loads(json.dumps(rec))
    nudged["metrics"]["parent_attention"] = 0.9 + 1e-12
    assert verification.compare(rec, nudged, exact=True).mismatches == ["parent_attention"]
    assert verification.compare(rec, nudged, exact=False).ok  # diagnostics are reported, not judged, elsewhere
    moved = json.loads(json.dumps(rec))
    moved["metrics"]["accuracy"] = moved["metrics"]["test_accuracy"] = 0.5 + 1.5 * verification.ACCURACY_TOLERANCE
    assert verification.compare(rec, moved, exact=False).mismatches == ["accuracy", "test_accuracy"]
    within = json.loads(json.dumps(rec))
    within["metrics"]["accuracy"] = 0.5 + verification.ACCURACY_TOLERANCE / 2
    assert verification.compare(rec, within, exact=False).ok


def test_verify_reproduces_fresh_records_and_catches_an_edited_one(tmp_path, capsys):
    runs = tmp_path / "runs"
    suite = write_suite(tmp_path, SUITE)
    assert main(["run", "--suite", str(suite), "--out", str(runs), "-q", "-j", "2"]) == 0
    capsys.readouterr()
    for path in runs.glob("*.json"):  # as the runner records them once it writes the thread count
        rec = json.loads(path.read_text())
        rec["provenance"]["threads"] = 1
        path.write_text(json.dumps(rec))
    assert main(["verify", str(runs)]) == 0
    out = capsys.readouterr().out
    assert out.count("every metric bit-identical") == 2 and "same environment" in out

    # an edit of a budget point that keeps the record consistent: only retraining tells (the must-show of #32)
    path = sorted(runs.glob("*.json"))[1]
    published = path.read_text()
    rec = json.loads(published)
    rec["budget_curve"][0]["accuracy"] = 1.0 - rec["budget_curve"][0]["accuracy"]
    path.write_text(json.dumps(rec))
    assert main(["verify", str(runs)]) == 1
    assert "budget_curve[1].accuracy" in capsys.readouterr().out
    path.write_text(published)

    path = sorted(runs.glob("*.json"))[0]
    rec = json.loads(path.read_text())
    rec["metrics"]["accuracy"] += 0.25  # consistently: only retraining can tell (an edit of one alone fails to load)
    rec["metrics"]["normalized_accuracy"] = rec["metrics"]["accuracy"] / rec["metrics"]["bayes_accuracy"]
    rec["budget_curve"][-1]["accuracy"] = rec["metrics"]["accuracy"]
    path.write_text(json.dumps(rec))
    assert main(["verify", str(runs), "--sample", "2"]) == 1
    captured = capsys.readouterr()
    assert "FAIL" in captured.out and "accuracy" in captured.out and "1 do not" in captured.err
    assert len(load_records(runs).records) == 2 and not (runs / STAMP).exists()  # verify writes nothing

    # --stamp leaves what it found beside the records, never read as a record; the leaderboard states it
    assert main(["verify", str(runs), "--sample", "2", "--stamp"]) == 1
    found = json.loads((runs / STAMP).read_text())
    assert (found["checked"], found["reproduced"], found["same_environment"], found["sample"]) == (2, 1, 2, 2)
    assert found["failed"] == [f"random-walk x attn-nope seed {rec['seed']} ({rec['config_hash']}): differs in "
                               f"accuracy, budget_curve[{rec['train']['steps']}].accuracy, normalized_accuracy"]
    loaded = load_records(runs, strict=True)
    assert len(loaded.records) == 2 and not loaded.problems
    assert main(["leaderboard", "--records", str(runs), "--format", "md"]) == 0
    page = capsys.readouterr().out
    assert "retrained 2 of its 2 records (all in the records' own environment" in page
    assert "1 of 2 reproduced; not: random-walk x attn-nope" in page


def test_no_stamp_where_a_sampled_record_cannot_be_rebuilt_here(tmp_path, capsys):
    runs = write(tmp_path / "runs", [record(task="plugin-task-not-installed")])
    assert main(["verify", str(runs), "--stamp"]) == 1
    assert "no stamp written: 1 of the sampled records cannot be rebuilt here" in capsys.readouterr().err
    assert not (runs / STAMP).exists()


@pytest.mark.parametrize("args, message", [
    (["{missing}"], "no such folder"),
    (["{empty}"], "no ok run records"),
    (["{empty}", "--sample", "0"], "expected an integer >= 1"),
])
def test_usage_errors_are_one_line_exit_2(tmp_path, capsys, args, message):
    (tmp_path / "empty").mkdir()
    folders = {"missing": tmp_path / "missing", "empty": tmp_path / "empty"}
    try:
        code = main(["verify", *(a.format(**folders) for a in args)])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("section", ["paper"])  # the sections published that need no extra plugin (README)
def test_published_records_verify(section, monkeypatch, capsys):
    """The CI check of the published numbers: a fixed sample of 5 records of each section retrains and agrees."""
    monkeypatch.chdir(ROOT)
    assert main(["verify", f"leaderboard/records/{section}", "--sample", "5", "--seed", "0"]) == 0, capsys.readouterr()
    assert provenance(None)["cpu"]


def test_a_stamp_in_words_says_where_and_what_reproduced():
    found = {"commit": "0123456789abcdef", "checked_at": "2026-12-01T12:00:00Z", "records": 378, "sample": 5,
             "checked": 5, "reproduced": 5, "same_environment": 0, "failed": []}
    assert verification.stamp_sentence(found) == (
        "`tokbench verify --sample 5` at commit 0123456789ab (2026-12-01) retrained 5 of its 378 records (5 in "
        "another environment, where accuracies must agree within 0.02): all 5 reproduced.")


def _stamped(tmp_path, count: int = 2) -> Path:
    """A records folder with ``count`` records and the stamp a verification of all of them leaves."""
    runs = write(tmp_path / "runs", [record(seed=s, accuracy=0.5) for s in range(count)])
    verdicts = [verification.Verdict(rec, exact=True) for rec in load_records(runs).records.values()]
    found = verification.stamp(verdicts, count, None, 0, {**HERE, "git_commit": "0" * 40},
                               verification.records_digest(runs))
    (runs / STAMP).write_text(json.dumps(found))
    return runs


@pytest.mark.parametrize("forged, why", [
    ({"checked": 8, "reproduced": 9999}, "9999 reproduced of 8 checked"),
    ({"records": 2, "checked": 5000, "reproduced": 5000}, "5000 reproduced of 5000 checked of 2 records"),
    ({"checked_at": "2099-01-01T00:00:00Z"}, "is in the future"),
    ({"reproduced": 1}, "0 lines of failures for 1 records that did not reproduce"),
])
def test_an_impossible_stamp_is_refused_in_one_line(tmp_path, capsys, forged, why):
    """Before, a forged stamp ("9999 of 5000 reproduced", dated 2099) was printed on the page as it was."""
    runs = _stamped(tmp_path)
    found = json.loads((runs / STAMP).read_text())
    (runs / STAMP).write_text(json.dumps({**found, **forged}))
    assert main(["leaderboard", "--records", str(runs), "--format", "md"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(runs / STAMP) in err and why in err, err


def test_the_page_says_when_the_records_changed_since_the_stamp(tmp_path, capsys):
    runs = _stamped(tmp_path)
    assert main(["leaderboard", "--records", str(runs), "--format", "md"]) == 0
    assert "retrained 2 of its 2 records" in (page := capsys.readouterr().out) and "changed since" not in page
    write(runs, [record(seed=7, accuracy=0.5)])  # before, the page then said "3 run records" and "2 of its 2"
    assert main(["leaderboard", "--records", str(runs), "--format", "md"]) == 0
    assert "The records changed since that check (2 records then, 3 now)." in capsys.readouterr().out
    path = next(runs.glob("*__*.json"))
    path.write_text(path.read_text() + " ")  # the same count, a file edited
    found = verification.read_stamp(runs)
    assert found["changed"] == "2 records then, 3 now"
    (runs / sorted(runs.glob("*__*.json"))[-1].name).unlink()
    assert verification.read_stamp(runs)["changed"] == "2 records, not all as checked"


def test_a_published_stamp_is_in_the_manifest(tmp_path, capsys):
    """Before, SHA256SUMS left the stamp out, so an edited one passed `verify --integrity` and `sha256sum -c`."""
    runs = _stamped(tmp_path)
    board = tmp_path / "board"
    assert main(["leaderboard", "--records", str(runs), "--format", "all", "--out", str(board)]) == 0
    (board / "records" / STAMP).write_text((runs / STAMP).read_text())
    assert main(["leaderboard", "--records", str(board / "records"), "--format", "all", "--out", str(board)]) == 0
    assert f"  records/{STAMP}\n" in (board / "SHA256SUMS").read_text()
    capsys.readouterr()
    assert main(["verify", str(board), "--integrity"]) == 0
    found = json.loads((board / "records" / STAMP).read_text())
    (board / "records" / STAMP).write_text(json.dumps({**found, "commit": "deadbeef"}))
    assert main(["verify", str(board), "--integrity"]) == 1
    assert f"{STAMP}: changed since it was published" in capsys.readouterr().out


def test_the_sample_is_new_each_time_unless_a_seed_is_given(tmp_path, monkeypatch):
    """Before, --seed defaulted to 0: `verify --sample 5` drew the same 5 records every time."""
    runs = write(tmp_path / "runs", [record(seed=s, accuracy=0.5) for s in range(20)])
    drawn = []
    monkeypatch.setattr("tokbench.commands.verify._retrain",
                        lambda args, chosen, total: drawn.append(sorted(r["seed"] for r in chosen)) or 0)
    for _ in range(3):
        assert main(["verify", str(runs), "--sample", "3"]) == 0
    assert len({tuple(d) for d in drawn}) > 1  # 1140 possible draws: three equal ones have odds of 1 in 1.3 million
    drawn.clear()
    for _ in range(2):
        assert main(["verify", str(runs), "--sample", "3", "--seed", "5"]) == 0
    assert drawn[0] == drawn[1]


def test_a_record_made_on_another_device_is_compared_within_the_device_tolerance(capsys):
    """Issue 31, item 4: a record made on a GPU and checked on a CPU is judged within DEVICE_TOLERANCE and says so."""
    from tokbench.commands.verify import _line

    made = record(accuracy=0.5)
    made["provenance"]["device"] = "cuda (NVIDIA H200)"
    checked = json.loads(json.dumps(made))
    checked["provenance"]["device"] = "cpu"
    checked["metrics"]["accuracy"] = checked["metrics"]["test_accuracy"] = 0.5 + verification.DEVICE_TOLERANCE - 0.01
    verdict = verification.compare(made, checked, exact=False)
    assert verdict.ok and verdict.devices == ("cuda", "cpu") and verdict.tolerance == verification.DEVICE_TOLERANCE
    line = _line(verdict, verification.environment_differences(made, {**HERE, "device": "cpu"}))
    assert line.startswith("ok  ") and f"made on cuda, checked on cpu: within {verification.DEVICE_TOLERANCE:g}" in line
    checked["metrics"]["accuracy"] = 0.5 + verification.DEVICE_TOLERANCE + 0.01
    assert verification.compare(made, checked, exact=False).mismatches == ["accuracy"]
    same_kind = json.loads(json.dumps(checked))
    same_kind["provenance"]["device"] = "cuda (NVIDIA A100)"  # another GPU: the tolerance across machines
    same_kind["metrics"].update(accuracy=0.5 + verification.ACCURACY_TOLERANCE + 0.01, test_accuracy=0.5)
    assert verification.compare(made, same_kind, exact=False).mismatches == ["accuracy"]
