"""The published leaderboard/ folder never drifts from the run records committed with it."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

from tokbench.cli import build_parser
from tokbench.leaderboard import notes
from tokbench.leaderboard.stats import MIN_SEEDS
from tokbench.leaderboard.views import column_header
from tokbench.leaderboard.plots import PLOTS_DIR
from tokbench.leaderboard.publish import RECORDS_DIR, plot_plans, published_texts
from tokbench.leaderboard.records import load_sections

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "leaderboard"


def _regenerate_command() -> list[str]:
    """The `tokbench leaderboard ...` line of the published README, as arguments."""
    lines = [line for line in (PUBLISHED / "README.md").read_text(encoding="utf-8").splitlines()
             if line.startswith("tokbench leaderboard ")]
    assert len(lines) == 1, "leaderboard/README.md must name the one command that regenerates it"
    return shlex.split(lines[0])[1:]


def test_published_folder_regenerates_from_its_records(monkeypatch):
    assert (PUBLISHED / RECORDS_DIR).is_dir(), "leaderboard/ must ship the run records it is computed from"
    command = _regenerate_command()
    args = build_parser().parse_args(command)
    assert args.format == "all" and args.out == Path("leaderboard"), command
    monkeypatch.chdir(ROOT)  # the command's paths are relative to the repository root
    sections = load_sections(args.records)
    # The texts `tokbench leaderboard --format all` writes; plots are planned, not drawn (their pixels may differ
    # across matplotlib versions), so the set of plot files is compared instead.
    redo = f"regenerate it with `tokbench {shlex.join(command)}`"
    for name, text in published_texts(sections, args.out).items():
        assert text == (PUBLISHED / name).read_text(encoding="utf-8"), f"leaderboard/{name} has drifted; {redo}"
    expected = sorted(f for plots in plot_plans(sections).values() for plot in plots for f in plot.files)
    assert sorted(p.name for p in (PUBLISHED / PLOTS_DIR).iterdir()) == expected, f"the plots have drifted; {redo}"


def test_published_findings_make_no_forbidden_claim(monkeypatch):
    """Claims come from tests: none under 3 seeds, none about oracles, none against the optimum on a training split."""
    monkeypatch.chdir(ROOT)
    for section in load_sections(build_parser().parse_args(_regenerate_command()).records):
        board = section.board
        lines = notes.findings(board)
        assert lines, section.name
        for line in lines:
            assert not any(word in line for word in ("reaches", "exceeds", "at chance")), line
            assert not re.search(r"\d ± \d", line), line  # intervals are (low–high), inside the range
            assert "(oracle)" not in line and "bayes-optimal (" not in line, line
        for column in board.training_columns:
            assert not any(line.startswith(column_header(column)) and "Bayes" in line for line in lines)
        for cell in board.cells.values():
            for comparison in (notes.versus_bayes(cell), notes.versus_untrained(cell)):
                if comparison is not None and len(cell.ok) < MIN_SEEDS:
                    assert comparison.verdict is None, cell.row.label
            if cell.accuracy is not None and cell.accuracy.interval is not None:  # none: an eval set of unknown size
                assert 0.0 <= cell.accuracy.low <= cell.accuracy.mean <= cell.accuracy.high <= 1.0


def test_published_readme_stays_short():
    """The README leads with what a reader needs; findings, plots, per-task tables and descriptions are in details.md."""
    readme = (PUBLISHED / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) < 50_000  # four sections, two of their rankings; what leads is checked below
    names = [value.partition("=")[0] for flag, value in zip(_regenerate_command(), _regenerate_command()[1:])
             if flag == "--records"]
    assert names and [readme.index(f"## {name}") for name in names] == sorted(readme.index(f"## {name}")
                                                                              for name in names)
    if "tokbench" in names:  # the benchmark's scores lead whenever they are published
        assert names[0] == "tokbench"


def test_published_readme_opens_on_a_ranking_and_names_every_builtin_task():
    """At most 2000 characters before the first table, which the budget line heads; every registered built-in task
    (from the registry, not a typed list) named on the page, so each has a published table."""
    from tokbench.plugins import origin, registry

    readme = (PUBLISHED / "README.md").read_text(encoding="utf-8")
    first_table = readme.index("\n| ") + 1
    assert first_table <= 2000, f"{first_table} characters before the first table"
    assert "Training budget" in readme[:first_table]
    builtin = sorted(name for name, spec in registry().tasks.items() if origin(spec) == "builtin")
    missing = [name for name in builtin if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", readme)]
    assert not missing, f"leaderboard/README.md names no published table of {missing}"
