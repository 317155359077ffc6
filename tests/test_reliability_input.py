"""Issue #11 attacks on input and storage: publishing never deletes records, full disks, formula injection."""
from __future__ import annotations

import csv
import io
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

from leaderboard_synth import record, seeds, write
from tokbench.cli import main


def _section(model: str, n: int = 2) -> list[dict]:
    return seeds(n, [0.5, 0.6], model=model)


def test_publishing_one_section_keeps_the_other_sections_records(tmp_path):
    paper, default = write(tmp_path / "paper", _section("attn-paper-a")), write(tmp_path / "default", _section("m"))
    out = tmp_path / "board"
    both = ["--records", f"paper={paper}", "--records", f"default={default}", "--format", "all", "--out", str(out)]
    assert main(["leaderboard", *both]) == 0
    assert main(["leaderboard", "--records", f"paper={paper}", "--format", "all", "--out", str(out)]) == 0
    assert len(list((out / "records" / "default").glob("*.json"))) == 2
    # Even --prune removes only what the published section's own folder holds beyond this publish.
    stale = write(out / "records" / "paper", [record(seed=9, model="old")])
    assert main(["leaderboard", "--records", f"paper={paper}", "--format", "all", "--out", str(out), "--prune"]) == 0
    assert len(list((out / "records" / "default").glob("*.json"))) == 2
    assert len(list(stale.glob("*.json"))) == 2 and not list(stale.glob("*__old__*"))


def test_an_unnamed_publish_never_deletes_records_without_prune(tmp_path):
    source = write(tmp_path / "runs", _section("attn-paper-a"))
    out = tmp_path / "board"
    kept = write(out / "records", [record(seed=9, model="old")])
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
