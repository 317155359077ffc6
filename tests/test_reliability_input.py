"""Issue #11 attacks on input and storage: publishing never deletes records, full disks, formula injection."""
from __future__ import annotations

import csv
import io
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from conftest import run_cli
from leaderboard_synth import record, seeds, write
from run_support import write_suite
from tokbench.cli import main
from tokbench.grid import Pairing, expand, parse_settings
from tokbench.plugins import Registry, registry
from tokbench.progress import variant_labels
from tokbench.results import config_hash
from tokbench.suites import parse_suite


def _section(model: str, n: int = 2) -> list[dict]:
    return seeds(n, [0.5, 0.6], model=model)


def test_publishing_one_section_keeps_the_other_sections_records(tmp_path):
    paper, default = write(tmp_path / "paper", _section("attn-paper-a")), write(tmp_path / "default", _section("m"))
    out = tmp_path / "board"
    both = ["--records", f"paper={paper}", "--records", f"default={default}", "--format", "all", "--out", str(out)]
    assert main(["leaderboard", *both]) == 0
    assert main(["leaderboard", "--records", f"paper={paper}", "--format", "all", "--out", str(out)]) == 0
    assert len(list((out / "records" / "default").glob("*.json"))) == 2
    # Even --prune removes only what an earlier publish wrote in the published section's own folder.
    earlier = write(tmp_path / "earlier", [*_section("attn-paper-a"), record(seed=9, model="old")])
    assert main(["leaderboard", "--records", f"paper={earlier}", "--format", "all", "--out", str(out)]) == 0
    stale = out / "records" / "paper"
    assert main(["leaderboard", "--records", f"paper={paper}", "--format", "all", "--out", str(out), "--prune"]) == 0
    assert len(list((out / "records" / "default").glob("*.json"))) == 2
    assert len(list(stale.glob("*.json"))) == 2 and not list(stale.glob("*__old__*"))


def test_an_unnamed_publish_never_deletes_records_without_prune(tmp_path):
    source = write(tmp_path / "runs", _section("attn-paper-a"))
    earlier = write(tmp_path / "earlier", [*_section("attn-paper-a"), record(seed=9, model="old")])
    out = tmp_path / "board"
    assert main(["leaderboard", "--records", str(earlier), "--format", "all", "--out", str(out)]) == 0
    kept = out / "records"
    assert main(["leaderboard", "--records", str(source), "--format", "all", "--out", str(out)]) == 0
    assert len(list(kept.glob("*__old__*"))) == 1
    assert main(["leaderboard", "--records", str(source), "--format", "all", "--out", str(out), "--prune"]) == 0
    assert not list(kept.glob("*__old__*")) and len(list(kept.glob("*.json"))) == 2


def _limited_file_size(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, like a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_full_disk_leaves_no_truncated_plot_and_is_one_line_exit_3(tmp_path):
    source = write(tmp_path / "runs", _section("attn-paper-a"))
    out = tmp_path / "board"
    assert main(["leaderboard", "--records", str(source), "--format", "all", "--out", str(out)]) == 0
    before = {p: p.read_bytes() for p in (out / "plots").iterdir()}
    assert max(map(len, before.values())) > 8000  # the limit below cuts every large plot short
    done = subprocess.run([sys.executable, "-m", "tokbench.cli", "leaderboard", "--records", str(source),
                           "--format", "all", "--out", str(out)], capture_output=True, text=True, timeout=300,
                          preexec_fn=_limited_file_size(8000))
    assert done.returncode == 3, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "File too large" in done.stderr
    assert {p: p.read_bytes() for p in (out / "plots").iterdir()} == before  # old plots whole, no temporary files


def test_leaderboard_out_naming_a_file_is_one_line(tmp_path, capsys):
    source = write(tmp_path / "runs", _section("attn-paper-a"))
    target = tmp_path / "board.md"
    target.write_text("mine")
    for fmt in ("md", "all"):
        assert main(["leaderboard", "--records", str(source), "--format", fmt, "--out", str(target)]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "is a file" in err
    assert target.read_text() == "mine"


def test_csv_cells_that_look_like_formulas_are_text(tmp_path, capsys):
    source = write(tmp_path / "runs", seeds(2, [0.5, 0.6], model_version="=HYPERLINK(\"http://x\")")
                   + seeds(2, [0.5, 0.6], model="last-token", model_version="-1+1", model_params={}))
    assert main(["leaderboard", "--records", str(source), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {r["model_version"] for r in rows} == {"'=HYPERLINK(\"http://x\")", "'-1+1"}
    assert all(not cell.startswith(("=", "+", "@")) for r in rows for cell in r.values())
    assert float(rows[0]["accuracy_mean"]) > 0  # numbers stay numbers


def test_records_are_written_with_the_umask_not_0600(tmp_path):
    old = os.umask(0o022)
    try:
        path = next(write(tmp_path / "runs", [record()]).glob("*.json"))
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


# ---- parameters, suites and planning ---------------------------------------------------------------------------

def _usage_error(capsys, argv: list[str], needle: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err, err


DRY = ["run", "--dry-run", "--task", "random-walk", "--model", "attn-rope"]


@pytest.mark.parametrize("setting", ["p=nan", "train.lr=inf", "init_sigma=inf", "train.lr_grid=0.1,nan", "p=-inf"])
def test_non_finite_values_are_rejected_everywhere(tmp_path, capsys, setting):
    _usage_error(capsys, [*DRY, "--out", str(tmp_path), "--set", setting], "is not finite")


def test_non_finite_values_in_a_suite_and_in_show_are_rejected(tmp_path, capsys):
    suite = write_suite(tmp_path, "seeds = 1\n[[grid]]\ntasks = ['random-walk']\nmodels = ['last-token']\n"
                                  "[grid.task.random-walk]\np = nan\n", "nan.toml")
    _usage_error(capsys, ["run", "--dry-run", "--suite", str(suite), "--out", str(tmp_path)], "nan.toml:6: p=nan")
    _usage_error(capsys, ["show", "task", "random-walk", "--set", "p=nan"], "is not finite")


@pytest.mark.parametrize("content, needle", [
    (b"seeds = 1\n# caf\xe9\n[[grid]]\ntasks = '*'\nmodels = '*'\n", "not UTF-8"),
    (b"seeds = 1\ngrid = [1, 2]\n", "grid must be [[grid]] tables"),
    (b"seeds = 1\n[[grid]]\ntasks = '*'\nmodels = '*'\ntask = 3\n", "expected tables of parameters"),
])
def test_malformed_suite_files_are_one_line_exit_2(tmp_path, capsys, content, needle):
    suite = tmp_path / "bad.toml"
    suite.write_bytes(content)
    _usage_error(capsys, ["run", "--dry-run", "--suite", str(suite), "--out", str(tmp_path)], needle)


def test_a_fifo_as_suite_does_not_hang(tmp_path, capsys):
    fifo = tmp_path / "s.toml"
    os.mkfifo(fifo)
    _usage_error(capsys, ["run", "--dry-run", "--suite", str(fifo), "--out", str(tmp_path)], "not a regular file")


def test_an_empty_shard_exits_0_with_a_note(tmp_path, capsys):
    argv = ["run", "--task", "random-walk", "--model", "last-token", "--seeds", "2", "--out", str(tmp_path / "r")]
    assert main([*argv, "--shard", "2/3"]) == 0
    out, err = capsys.readouterr()
    assert "shard 2/3 of this grid is empty" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_task_and_model_patterns_on_the_command_line(tmp_path, capsys):
    assert main(["run", "--suite", "survey", "--dry-run", "--task", "random-walk", "--model", "attn-rope*",
                 "--seeds", "1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "random-walk × attn-rope seed 0" in out and "random-walk × attn-rope-zeroinit seed 0" in out
    assert "2 pairings" in out
    _usage_error(capsys, ["run", "--dry-run", "--model", "atn-*", "--out", str(tmp_path)], "matches no registered")


def test_a_task_constraint_is_a_usage_error_at_planning(tmp_path, capsys):
    _usage_error(capsys, ["run", "--dry-run", "--task", "scc-automaton", "--model", "last-token",
                          "--set", "task.num_sccs=7", "--out", str(tmp_path)], "num_sccs=7 must lie in [1, K=")


def test_an_untrained_model_does_not_depend_on_the_recipe():
    base = registry()
    reg = Registry(base.tasks, {**base.models, "last-token": replace(base.models["last-token"], trained=False)}, [])
    suite = parse_suite("seeds = 1\n[[grid]]\ntasks = ['random-walk']\nmodels = ['last-token', 'attn-rope']\n",
                        "s.toml", "s")
    plain = {p.model_spec.name: p for p in expand(suite, reg)}
    steps = {p.model_spec.name: p for p in expand(suite, reg, settings=parse_settings(["train.steps=7"]))}
    assert plain["last-token"].config_hash == steps["last-token"].config_hash
    assert plain["last-token"].identity["params"]["train"] == {}
    assert plain["attn-rope"].config_hash != steps["attn-rope"].config_hash


def test_pairing_says_when_it_is_not_applicable():
    reg = registry()
    task, model = reg.tasks["random-walk"], replace(reg.models["attn-rope"], predicts="last")
    positions = replace(task, scoring="positions")
    assert Pairing.of(task, model, task.resolve(), model.resolve(), model.recipe, 0).not_applicable is None
    reason = Pairing.of(positions, model, task.resolve(), model.resolve(), model.recipe, 0).not_applicable
    assert reason == model.applicability(positions) and "last position" in reason


def test_the_fast_seed_hash_is_the_config_hash():
    (pairing, *_) = expand(parse_suite(BIG_SUITE.format(seeds=3), "s.toml", "s"), registry())
    for seed in (0, 7, 10**12):
        assert pairing.variant.hashes(seed) == config_hash({**pairing.identity, "seed": seed})


def test_variant_labels_are_linear_in_the_grid():
    idents = [{"task": "t", "model": "m", "config_hash": f"{i:016x}",
               "params": {"task": {"p": i / 30000}, "model": {}, "train": {}}, "seed": 0} for i in range(30000)]
    started = time.process_time()  # this process's CPU time, not the machine's load
    labels = variant_labels(idents)
    assert time.process_time() - started < 5  # the quadratic scan took minutes
    assert len(set(labels.values())) == 30000 and labels[f"{7:016x}"] == f"p={7 / 30000:g}"


BIG_SUITE = """seeds = {seeds}
[[grid]]
tasks = ["random-walk"]
models = ["attn-paper-a", "last-token"]
"""


def test_a_dry_run_of_a_hundred_thousand_pairings_is_quick(tmp_path):
    suite = write_suite(tmp_path, BIG_SUITE.format(seeds=50_000), "big.toml")
    done = run_cli("run", "--dry-run", "--suite", str(suite), "--out", str(tmp_path / "r"), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "100000 pairings: 100000 to run, 0 not applicable (recorded without training), 0 to skip"
