"""Issue #32, item 4: bounds before work. Sizes a pairing allocates at once (a fresh batch, an evaluation setting's
split, the attention targets of a task scored at every position) are checked at planning against stated limits, with
one line and exit 2 before any worker starts; the dry run states the limits and the plan's largest sizes."""
from __future__ import annotations

import pytest

from tokbench.cli import main
from tokbench.grid import MAX_BATCH_TOKENS, MAX_SPLIT_TOKENS, MAX_TARGET_ENTRIES

SIZES = ["--set", "context_length=64", "--set", "train_size=1000", "--set", "val_size=100", "--set", "test_size=1000"]


@pytest.fixture
def no_workers(monkeypatch):
    started = []
    monkeypatch.setattr("tokbench.commands.run.start_server", lambda: started.append(True))
    return started


@pytest.mark.parametrize("argv, message", [
    # before: accepted; the worker passed 5.4 GB in 24 s and kept growing
    (["--set", "train.data=fresh", "--set", "train.batch_size=10000000"],
     "train.batch_size=10000000 at context_length 64 is 640,000,000 tokens in one batch"),
    # before: refused only after training, as a failed record (phase train) asking for 400 GB
    (["--evaluate", "context_length=1000000000"], "test_size=1000 at evaluation context_length=1000000000 is "
                                                  "1,000,000,000,000 tokens in one split"),
    # under the token limit, but its (n, T, T) attention targets are 40 TB
    (["--evaluate", "context_length=100000"], "attention-target entries in one split"),
    # before: passed the dry run and failed in every worker
    (["--task", "random-walk", "--set", "train.validate_by=expected"], "random-walk gives no Bayes probabilities"),
])
@pytest.mark.parametrize("dry", [True, False])
def test_sizes_no_machine_holds_are_one_line_before_any_worker(tmp_path, capsys, no_workers, argv, message, dry):
    args = ["run", "--task", "mqar", "--model", "attn-nope", *SIZES, *argv, "--out", str(tmp_path / "runs")]
    if "random-walk" in argv:
        args.remove("mqar")
        args.remove("--task")
    assert main([*args, *(["--dry-run"] if dry else [])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not no_workers and not (tmp_path / "runs").exists()


def test_the_dry_run_states_the_limits_and_the_largest_sizes_of_the_plan(tmp_path, capsys):
    assert main(["run", "--task", "mqar", "--model", "attn-nope", "--seeds", "1", *SIZES, "--set", "train.data=fresh",
                 "--set", "train.batch_size=32", "--evaluate", "context_length=x4",
                 "--dry-run", "--out", str(tmp_path / "runs")]) == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("limits")]
    # the evaluation at four times the length holds the most
    assert f"tokens in one split at most {MAX_SPLIT_TOKENS:,} (largest here {1000 * 256:,})" in line
    assert f"tokens in one batch at most {MAX_BATCH_TOKENS:,} (largest here {32 * 64:,})" in line
    assert f"attention-target entries in one split at most {MAX_TARGET_ENTRIES:,} (largest here {1000 * 256**2:,})" \
        in line


def test_a_model_the_suite_lacks_is_named_not_dropped(tmp_path, capsys, no_workers):
    """Before, `--suite paper --model transformer attn-rope` ran attn-rope alone, without a word."""
    assert main(["run", "--suite", "paper", "--model", "transformer", "attn-rope", "--dry-run",
                 "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no transformer" in err and "attn-rope" not in err


def test_an_unreachable_ray_address_leaves_the_out_folder_untouched(tmp_path, capsys):
    """Before, the address was refused only after OUT/.locks had been created."""
    pytest.importorskip("ray")
    import socket

    with socket.socket() as probe:  # a port where nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = tmp_path / "runs"
    assert main(["run", "--task", "random-walk", "--model", "last-token", "--seeds", "1", "--executor", "ray",
                 "--ray-address", f"127.0.0.1:{port}", "--out", str(out)]) == 3
    assert "no Ray cluster reachable there" in capsys.readouterr().err and not out.exists()
