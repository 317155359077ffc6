"""A failed record explains itself: the exception's type, message and the plugin frames of its traceback, and
`tokbench leaderboard` names them in its failures table."""
from __future__ import annotations

import json

from tokbench.outcome import exception_failure


def test_a_raising_pairing_records_its_exception_message_and_plugin_frames(cli, plugin_site, tmp_path):
    env = plugin_site(hostile="hostile_model")
    out = tmp_path / "runs"
    done = cli("run", "--task", "random-walk", "--model", "hostile", "--set", "model.act=raise", "--seeds", "1",
               "--set", "train_size=16", "--set", "val_size=16", "--set", "test_size=16", "--out", str(out), "-q",
               env=env)
    assert done.returncode == 1, done.stderr[-2000:]
    [record] = [json.loads(p.read_text()) for p in out.glob("*.json")]
    failure = record["failure"]
    assert record["status"] == "failed" and failure["phase"] == "train"
    assert failure["exception"] == "RuntimeError" and failure["message"] == "raised on purpose while training"
    assert failure["frames"] and all(frame.startswith("hostile_model.py:") for frame in failure["frames"])
    assert "raise RuntimeError" in failure["frames"][-1]  # innermost last, with its code line

    board = cli("leaderboard", "--records", str(out), "--format", "md", env=env)
    assert board.returncode == 0, board.stderr
    line = next(line for line in board.stdout.replace("\\", "").splitlines() if "raised on purpose" in line)
    assert "RuntimeError" in line and "train, hostile_model.py:" in line and "in forward" in line


def test_only_plugin_frames_are_kept():
    def plugin_code():
        raise ValueError("bad value\nsecond line")

    try:
        plugin_code()
    except ValueError as exc:
        failure = exception_failure(exc)
    assert failure.exception == "ValueError" and failure.message == "bad value\nsecond line"
    assert [frame.split(" in ")[1].split(":")[0] for frame in failure.frames] == [
        "test_only_plugin_frames_are_kept", "plugin_code"]  # this test file is not tokbench: its frames count
    assert failure.to_json()["frames"] == list(failure.frames)
