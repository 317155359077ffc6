"""Renderers: strings from plugins are escaped in every format, and the output is deterministic."""
from __future__ import annotations

import csv
import io
import json
import random
import re

import pytest
from rich.console import Console

from leaderboard_synth import WALK, sections, seeds
from tokbench.leaderboard.document import document
from tokbench.leaderboard.publish import FILES, render
from tokbench.leaderboard.render import to_terminal
from tokbench.leaderboard.report import build_reports

NASTY = "<script>alert(1)</script> a|b & c [red]x[/red] $x$ 50% _y_"
# Names cannot carry markup (records allow letters, digits, ".", "_" and "-"); versions and everything else can.
EVIL_TASK = "evil-task"
EVIL_MODEL = "model_b"
EVIL_VERSION = "1|&<b>"


@pytest.fixture(scope="module")
def evil_sections():
    meta = {"task_description": NASTY, "model_description": NASTY, "task_citation": NASTY, "recipe": NASTY}
    recs = seeds(2, [0.5, 0.4], task=EVIL_TASK, model=EVIL_MODEL, task_params={**WALK, "mode": NASTY},
                 model_params={"note": NASTY}, meta=meta, model_version=EVIL_VERSION)
    recs += seeds(2, [0.5, 0.4], task=EVIL_TASK, model=EVIL_MODEL, task_params={**WALK, "mode": "plain"},
                  model_params={"note": NASTY}, meta=meta)
    recs += [seeds(1, [0.0], task=EVIL_TASK, model=EVIL_MODEL, task_params={**WALK, "mode": "plain"},
                   model_params={"note": "other"}, error=f"ValueError: {NASTY}", meta=meta)[0]]
    return sections(recs)


def test_markdown_escapes_html_pipes_and_markup(evil_sections):
    text = render(evil_sections, "md")
    assert "<script>" not in text and "<b>" not in text
    assert "&lt;script&gt;" in text and "&amp;" in text and r"a\|b" in text and r"\$x\$" in text
    for table in re.findall(r"(?:^\|.*\|$\n?)+", text, flags=re.M):
        lines = table.strip().splitlines()
        widths = {len(re.findall(r"(?<!\\)\|", line)) for line in lines}
        assert len(widths) == 1, table  # no pipe from a record splits a cell


def test_html_escapes_everything_and_has_one_script(evil_sections):
    text = render(evil_sections, "html")
    assert text.count("<script>") == 1  # the page's own sorting script, nothing from a record
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "<b>" not in text
    assert "http://" not in text and "https://" not in text  # standalone: no network dependencies


def test_latex_escapes_specials(evil_sections):
    text = render(evil_sections, "latex")
    assert r"\&" in text and r"\$x\$" in text and r"50\%" in text and r"\_y\_" in text
    for tabular in re.findall(r"\\toprule\n(.*?)\\bottomrule", text, flags=re.S):
        rows = [line for line in tabular.splitlines() if line.endswith("\\\\")]
        assert len({len(re.findall(r"(?<!\\)&", row)) for row in rows}) == 1, tabular


def test_terminal_prints_record_text_literally(evil_sections):
    console = Console(file=io.StringIO(), width=300, color_system=None)
    to_terminal(document(build_reports(evil_sections), brief=True), console)
    out = console.file.getvalue()
    assert "[red]x[/red]" in out and EVIL_MODEL in out and EVIL_VERSION in out


def test_csv_and_json_round_trip_the_strings(evil_sections):
    rows = list(csv.DictReader(io.StringIO(render(evil_sections, "csv"))))
    assert {r["model"] for r in rows} == {EVIL_MODEL} and {r["task"] for r in rows} == {EVIL_TASK}
    assert {json.loads(r["task_params"])["mode"] for r in rows} == {NASTY, "plain"}
    data = json.loads(render(evil_sections, "json"))
    (section,) = data["sections"]
    assert section["tasks"][0]["description"] == NASTY
    failed = [c for c in section["cells"] if c["failed_seeds"]]
    assert failed[0]["errors"] == [f"ValueError: {NASTY}"] and failed[0]["metrics"] == {}


def test_output_does_not_depend_on_record_order():
    recs = (seeds(3, [0.49, 0.5, 0.51]) + seeds(3, [0.3, 0.31, 0.29], model="other")
            + seeds(3, [0.7, 0.8, 0.75], task_params={**WALK, "p": 0.8}, bayes=0.8))
    shuffled = recs[:]
    random.Random(0).shuffle(shuffled)
    for fmt in FILES:
        assert render(sections(recs), fmt) == render(sections(shuffled), fmt), fmt
