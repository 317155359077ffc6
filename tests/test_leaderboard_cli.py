"""``tokbench leaderboard``: formats, the published folder, and one-line usage errors."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from leaderboard_synth import record, seeds, write
from tokbench.cli import main
from tokbench.leaderboard.publish import FILES

DET = {"K": 6, "laps": 2, "train_size": 100, "val_size": 100, "test_size": 100}


def _records() -> list[dict]:
    return (seeds(3, [0.49, 0.5, 0.51], diagnostics={"parent_attention": 0.97}, profile=[0.01, 0.02, 0.02, 0.95])
            + seeds(3, [0.165, 0.17, 0.168], task="deterministic-walk", task_params=DET, bayes=1.0, untrained=0.167,
                    profile=[0.25, 0.25, 0.25, 0.25])
            + seeds(3, [1.0, 1.0, 0.99], task="deterministic-walk", task_params=DET, bayes=1.0, untrained=0.167,
                    model_params={"dtype": "float32", "positions": "onehot"})
            + [record(seed=0, model="broken", error="NonFiniteLossError: loss became nan at step 3")])


def _texts(folder: Path) -> dict[str, str]:
    return {name: (folder / name).read_text(encoding="utf-8") for name in FILES.values()}


def test_publish_writes_a_self_contained_deterministic_folder(tmp_path):
    source = write(tmp_path / "runs", _records())
    out = tmp_path / "board"
    assert main(["leaderboard", "--records", str(source), "--format", "all", "--out", str(out)]) == 0

    readme = (out / "README.md").read_text()
    for link in re.findall(r"!\[[^]]*\]\(([^)]+)\)", readme):
        assert (out / link).is_file(), link
    plots = sorted(p.name for p in (out / "plots").iterdir())
    assert plots == ["attention-deterministic-walk.png", "attention-random-walk.png", "curves-deterministic-walk.png",
                     "curves-random-walk.png", "heatmap.png", "heatmap.svg"]
    svg = (out / "plots" / "heatmap.svg").read_text()
    assert "<dc:date>" not in svg and "Matplotlib v" not in svg  # nothing that changes from run to run
    assert f"tokbench leaderboard --records {out.as_posix()}/records --format all --out {out.as_posix()} --prune" in readme
    assert "## Failed runs" in readme and "NonFiniteLossError" in readme
    assert len(list((out / "records").glob("*.json"))) == len(_records())

    # The published folder regenerates from its own records, byte for byte.
    before = _texts(out)
    assert main(["leaderboard", "--records", str(out / "records"), "--format", "all", "--out", str(out)]) == 0
    assert _texts(out) == before and len(list((out / "records").glob("*.json"))) == len(_records())


def test_publish_removes_stale_records_only_with_prune(tmp_path):
    source = write(tmp_path / "runs", _records()[:3])
    earlier = write(tmp_path / "earlier", [*_records()[:3], record(seed=9, model="old")])
    out = tmp_path / "board"
    assert main(["leaderboard", "--records", str(earlier), "--format", "all", "--out", str(out)]) == 0
    stale = out / "records"
    assert main(["leaderboard", "--records", str(source), "--format", "all", "--out", str(out)]) == 0
    assert len(list(stale.glob("*.json"))) == 4
    assert main(["leaderboard", "--records", str(source), "--format", "all", "--out", str(out), "--prune"]) == 0
    assert len(list(stale.glob("*.json"))) == 3 and not list(stale.glob("*__old__*"))


def test_named_folders_become_sections_with_their_own_records_and_plots(tmp_path, capsys):
    paper = write(tmp_path / "paper", _records()[3:9])
    default = write(tmp_path / "default", _records()[:3])
    out = tmp_path / "board"
    named = ["--records", f"paper={paper}", "--records", f"default={default}"]
    assert main(["leaderboard", *named, "--format", "json"]) == 0
    assert [s["name"] for s in json.loads(capsys.readouterr().out)["sections"]] == ["paper", "default"]
    assert main(["leaderboard", *named, "--format", "all", "--out", str(out)]) == 0
    assert len(list((out / "records" / "paper").glob("*.json"))) == 6
    assert len(list((out / "records" / "default").glob("*.json"))) == 3
    assert {p.name for p in (out / "plots").glob("*heatmap.png")} == {"paper-heatmap.png", "default-heatmap.png"}
    readme = (out / "README.md").read_text()
    sections = ["paper", "default", "Tasks and models", "Regenerate"]  # the method follows the tables, folded
    assert re.findall(r"^## (\w[\w ]*)$", readme, flags=re.M) == sections
    assert readme.index("## default") < readme.index("**Method: ")
    # the README stays short: findings, plots, detail tables and descriptions are in details.md
    details = (out / "details.md").read_text()
    assert "#### Findings" not in readme and details.count("### Findings") == 2 and "## Models" in details
    # the suite of the section's name, on the tasks its records hold
    tasks, models = (" ".join(sorted({r[kind] for r in _records()[3:9]})) for kind in ("task", "model"))
    assert f"tokbench run --suite paper --task {tasks} --model {models} --out {out.as_posix()}/records/paper" in readme
    header = "Computed by tokbench leaderboard from 9 run records (0 failed): paper 6, default 3;"
    assert readme.startswith(f"# tokbench leaderboard\n\n{header}")  # one count per section, adding up to the header's


def test_single_formats_print_or_write(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # piped tables respect COLUMNS: wide enough that no name is folded
    write(tmp_path / "runs", _records())
    source = write(tmp_path / "a", _records()[:3])
    extra = write(tmp_path / "b", _records()[3:6])
    assert main(["leaderboard", "--records", str(source), "--records", str(extra), "--format", "json"]) == 0
    (section,) = json.loads(capsys.readouterr().out)["sections"]
    assert [t["label"] for t in section["tasks"]] == ["deterministic-walk", "random-walk"]
    assert main(["leaderboard", "--records", str(source), "--format", "latex", "--out", str(tmp_path / "t")]) == 0
    assert (tmp_path / "t" / "leaderboard.tex").read_text().count(r"\toprule") == 2
    assert main(["leaderboard", "--records", str(source), "--records", str(extra)]) == 0
    terminal = capsys.readouterr().out
    assert "Bayes optimum (analytic)" in terminal and "attn-paper-a dtype=float32" not in terminal
    assert main(["leaderboard", "--records", str(tmp_path / "runs")]) == 0
    assert "attn-paper-a dtype=float32" in capsys.readouterr().out
    assert re.search(r"0\.500 \(0\.\d{3}–0\.\d{3}\)", terminal)


@pytest.mark.parametrize("args, message", [
    (["--records", "{missing}"], "no such folder"),
    (["--records", "{empty}"], "no run records"),
    (["--records", "{corrupt}"], "corrupt JSON"),
    (["--records", "{empty}", "--format", "all"], "give --out DIR"),
    (["--records", "{empty}", "--out", "x"], "--format terminal prints"),
    (["--records", "a={empty}", "--records", "{empty}"], "name every folder"),
])
def test_usage_errors_are_one_line_exit_2(tmp_path, capsys, args, message):
    (tmp_path / "empty").mkdir()
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "random-walk__m__0123456789abcdef.json").write_text("{not json")
    folders = {"missing": tmp_path / "missing", "empty": tmp_path / "empty", "corrupt": tmp_path / "corrupt"}
    assert main(["leaderboard", *(a.format(**folders) for a in args)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
