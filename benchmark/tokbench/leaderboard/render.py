"""Renderers: terminal (rich), Markdown and LaTeX (tabulate), CSV, JSON and a standalone HTML page.

Every string that comes from a record (names, descriptions, parameter values,
errors) is escaped for the target format here, in one place per format.
Outputs are deterministic: fixed ordering, fixed float formatting, no dates.
"""
from __future__ import annotations

import csv
import html
import io
import json
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tabulate import LATEX_ESCAPE_RULES, tabulate

from tokbench.leaderboard import notes
from tokbench.leaderboard.aggregate import CORE_METRICS, Cell, canonical
from tokbench.leaderboard.budgets import Budgets
from tokbench.leaderboard.document import TITLE, Beside, Block, Bullets, Code, Folded, Heading, Image, Paragraph
from tokbench.leaderboard.lengths import Lengths
from tokbench.leaderboard.report import Ranking, Report
from tokbench.leaderboard.scale import FINAL
from tokbench.leaderboard.scores import OVERALL, Score, Scores
from tokbench.leaderboard.stats import INTERVAL, Stat
from tokbench.leaderboard.views import Measure, Number, Table, Value, measure_text, number_text

SIGNIFICANT = 6  # digits of the floats in CSV and JSON

# Bidirectional controls (LRM, RLM, LRE..RLO, LRI..PDI) in a plugin's text would reorder what the page shows after
# them: they are written out visibly instead.
_BIDI = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(text: str, quote: bool = True) -> str:
    """``html.escape``, with bidirectional controls made visible as ``[U+XXXX]``."""
    return html.escape(_BIDI.sub(lambda m: f"[U+{ord(m.group()):04X}]", text), quote=quote)


def _round(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.{SIGNIFICANT}g}")


# ---- Markdown (GitHub) -------------------------------------------------------------------------------------------

_MD_ESCAPE = re.compile(r"([\\`*_\[\]|~$#])")


def escape_md(text: str) -> str:
    """Inert Markdown text: HTML entities for ``& < >``, backslashes before Markdown punctuation, one line."""
    text = _escape(" ".join(text.split()), quote=False)
    return _MD_ESCAPE.sub(r"\\\1", text)


def _md_value(value: Value) -> str:
    if isinstance(value, Measure):
        text = escape_md(measure_text(value))
        return f"**{text}**" if value.best else text
    if isinstance(value, Number):
        return number_text(value)
    return escape_md(value)


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _md_table(table: Table) -> str:
    """A GitHub table without alignment padding (padding to the widest cell tripled the file's size): its caption
    before it, its notes after it."""
    rows = [_md_row([_md_value(v) for v in row]) for row in table.all_rows()]
    notes_md = "".join(f"\n- {escape_md(note)}" for note in table.notes)
    lines = [_md_row([escape_md(h) for h in table.headers]), _md_row(["---"] * len(table.headers)), *rows]
    caption = f"{escape_md(table.caption)}\n\n" if table.caption else ""
    return caption + "\n".join(lines) + (f"\n{notes_md}" if notes_md else "")


def to_markdown(blocks: Sequence[Block]) -> str:
    return "\n\n".join(_md_blocks(blocks)) + "\n"


def _md_blocks(blocks: Sequence[Block]) -> list[str]:
    parts = []
    for block in blocks:
        if isinstance(block, Folded):
            parts.append(f"**{escape_md(block.summary)}**")
            parts += _md_blocks(block.blocks)
        elif isinstance(block, Beside):
            parts += _md_blocks([b for group in block.groups for b in group])
        elif isinstance(block, Heading):
            parts.append("#" * block.level + " " + escape_md(block.text))
        elif isinstance(block, Paragraph):
            parts.append(escape_md(block.text))
        elif isinstance(block, Bullets):
            parts.append("\n".join(f"- {escape_md(item)}" for item in block.items))
        elif isinstance(block, Table):
            parts.append(_md_table(block))
        elif isinstance(block, Image):
            parts.append(f"![{escape_md(block.caption)}]({block.path})")
        elif isinstance(block, Code):
            parts.append("```sh\n" + "\n".join(block.lines) + "\n```")
    return parts


# ---- HTML ----------------------------------------------------------------------------------------------------

# Each table scrolls inside its own box (sticky header row and first column), so the page never scrolls sideways
# and no cell wraps; long unbroken text (lists of commit hashes) breaks anywhere rather than widen the page.
_STYLE = """body{font-family:system-ui,sans-serif;max-width:90rem;margin:2rem auto;padding:0 1rem;color:#222}
p,li,figcaption,summary,caption{overflow-wrap:anywhere}caption{caption-side:top;text-align:left;padding:.25rem 0}
details{margin:1rem 0}summary{cursor:pointer;font-weight:bold}
.scroll{overflow:auto;max-width:100%;max-height:80vh;margin:1rem 0;border:1px solid #ccc}
.beside{display:flex;flex-wrap:wrap;gap:0 2rem;align-items:flex-start}
.beside>div{flex:0 0 auto;width:min-content;max-width:100%}
table{border-collapse:separate;border-spacing:0}
th,td{border-right:1px solid #ddd;border-bottom:1px solid #ddd;padding:.25rem .5rem;text-align:left;
white-space:nowrap;background:#fff}
thead th{position:sticky;top:0;z-index:2;background:#f3f3f3;cursor:pointer;user-select:none}
th:first-child,td:first-child{position:sticky;left:0;z-index:1}thead th:first-child{z-index:3}
th[aria-sort=descending]::after{content:" \\25BC"}th[aria-sort=ascending]::after{content:" \\25B2"}
tr.pinned td,tbody.pinned td{font-style:italic;background:#fafafa}tbody.pinned tr:first-child td{border-top:2px solid
#999}.best{font-weight:bold}
img{max-width:100%}pre{background:#f6f6f6;padding:.5rem;overflow:auto}"""

# Click a header to sort its column: descending first, then ascending; blanks always last; the Bayes row stays last,
# and baselines and oracles stay in their own tbody after the ranked rows (only the first tbody is sorted).
# Sort by the header's own column (cellIndex), not its position among every header of the page.
_SCRIPT = """document.querySelectorAll("table.sortable th").forEach(th => th.addEventListener("click", () => {
  const i = th.cellIndex, table = th.closest("table"), body = table.tBodies[0];
  const pinned = body.querySelector("tr.pinned");
  const down = th.getAttribute("aria-sort") !== "descending";
  table.querySelectorAll("th").forEach(h => h.removeAttribute("aria-sort"));
  th.setAttribute("aria-sort", down ? "descending" : "ascending");
  const key = r => { const c = r.cells[i];
    return c.dataset.sort !== undefined ? (c.dataset.sort === "" ? null : parseFloat(c.dataset.sort))
                                        : (c.textContent.trim() || null); };
  const rows = Array.from(body.rows).filter(r => r !== pinned);
  rows.sort((a, b) => { const x = key(a), y = key(b);
    if (x === null || y === null) return (x === null) - (y === null);
    const d = typeof x === "number" ? x - y : String(x).localeCompare(String(y)); return down ? -d : d; });
  rows.forEach(r => body.insertBefore(r, pinned));
}));"""


def _html_cell(value: Value) -> str:
    if isinstance(value, Measure):
        css = ' class="best"' if value.best else ""
        sort = _sort_key(value.stat and value.stat.mean)
        why = f' title="{_escape(value.reason)}"' if value.reason else ""
        return f'<td data-sort="{sort}"{css}{why}>{_escape(measure_text(value))}</td>'
    if isinstance(value, Number):
        return f'<td data-sort="{_sort_key(value.value)}">{number_text(value)}</td>'
    return f"<td>{_escape(value)}</td>"


def _sort_key(value: float | None) -> str:
    return "" if value is None else f"{value:.{SIGNIFICANT}g}"


def _html_table(table: Table) -> str:
    head = "".join(f"<th>{_escape(h)}</th>" for h in table.headers)
    body = ["<tr>" + "".join(_html_cell(v) for v in row) + "</tr>" for row in table.rows]
    if table.footer:
        body.append('<tr class="pinned">' + "".join(_html_cell(v) for v in table.footer) + "</tr>")
    pinned = ["<tr>" + "".join(_html_cell(v) for v in row) + "</tr>" for row in table.pinned]
    notes_html = "".join(f"<li>{_escape(n)}</li>" for n in table.notes)
    caption = f"<p>{_escape(table.caption)}</p>\n" if table.caption else ""
    return (caption + '<div class="scroll"><table class="sortable">'
            f"<thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(body) + "\n</tbody>"
            + ('\n<tbody class="pinned">\n' + "\n".join(pinned) + "\n</tbody>" if pinned else "")
            + "</table></div>" + (f"\n<ul>{notes_html}</ul>" if notes_html else ""))


def to_html(blocks: Sequence[Block]) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{TITLE}</title>\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<style>{_STYLE}</style></head>\n<body>\n" + "\n".join(_html_blocks(blocks))
            + f"\n<script>{_SCRIPT}</script>\n</body></html>\n")


def _html_blocks(blocks: Sequence[Block]) -> list[str]:
    parts = []
    for block in blocks:
        if isinstance(block, Folded):
            parts.append(f"<details><summary>{_escape(block.summary)}</summary>\n"
                         + "\n".join(_html_blocks(block.blocks)) + "\n</details>")
        elif isinstance(block, Beside):
            parts.append('<div class="beside">' + "".join("<div>\n" + "\n".join(_html_blocks(group)) + "\n</div>"
                                                          for group in block.groups) + "</div>")
        elif isinstance(block, Heading):
            parts.append(f"<h{block.level}>{_escape(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            parts.append(f"<p>{_escape(block.text)}</p>")
        elif isinstance(block, Bullets):
            parts.append("<ul>" + "".join(f"<li>{_escape(i)}</li>" for i in block.items) + "</ul>")
        elif isinstance(block, Table):
            parts.append(_html_table(block))
        elif isinstance(block, Image):
            parts.append(f'<figure><img src="{_escape(block.svg or block.path)}" alt="{_escape(block.caption)}">'
                         f"<figcaption>{_escape(block.caption)}</figcaption></figure>")
        elif isinstance(block, Code):
            parts.append("<pre>" + _escape("\n".join(block.lines)) + "</pre>")
    return parts


# ---- LaTeX (booktabs) ----------------------------------------------------------------------------------------

def escape_latex(text: str) -> str:
    return "".join(LATEX_ESCAPE_RULES.get(ch, ch) for ch in " ".join(text.split()))


def _latex_value(value: Value) -> str:
    if isinstance(value, Measure):
        text = measure_text(value, dash="--")
        return rf"\textbf{{{text}}}" if value.best else text
    if isinstance(value, Number):
        return number_text(value)
    return escape_latex(value)


def _latex_table(table: Table) -> str:
    body = tabulate([[_latex_value(v) for v in row] for row in table.all_rows()],
                    [escape_latex(h) for h in table.headers], tablefmt="latex_raw", disable_numparse=True)
    rules = iter((r"\toprule", r"\midrule", r"\bottomrule"))
    body = re.sub(r"^\\hline$", lambda _: next(rules), body, flags=re.M)  # tabulate's three rules -> booktabs
    notes_tex = "".join(f"\n\\par\\footnotesize {escape_latex(n)}" for n in table.notes)
    return (f"\\begin{{table}}[ht]\n\\centering\n\\caption{{{escape_latex(table.title)}}}\n{body}{notes_tex}\n"
            "\\end{table}")


def to_latex(reports: Sequence[Report]) -> str:
    """The main and detail tables of each section as booktabs tables (needs \\usepackage{booktabs})."""
    tables = []
    for report in reports:
        prefix = f"{report.name}: " if report.name else ""
        built = report.tables
        tables_of_board = (*(replace(ranking.scores, title=ranking.title) for ranking in built.rankings),
                           built.accuracy, built.training, *built.details)
        for table in (t for t in tables_of_board if t is not None):
            tables.append(_latex_table(replace(table, title=prefix + table.title)))
    return f"% {TITLE}: generated from run records by tokbench leaderboard\n" + "\n\n".join(tables) + "\n"


# ---- terminal (rich) -----------------------------------------------------------------------------------------

def to_terminal(blocks: Sequence[Block], console: Any) -> None:
    """Print ``blocks`` on a rich console; plots are files and are left out."""
    from rich.table import Table as RichTable
    from rich.text import Text

    def cell(value: Value) -> Text:
        if isinstance(value, Measure):
            return Text(measure_text(value), style="bold green" if value.best else "")
        return Text(number_text(value) if isinstance(value, Number) else value)

    for block in blocks:
        if isinstance(block, Folded):
            console.print(Text(block.summary, style="bold"))
            to_terminal(block.blocks, console)
        elif isinstance(block, Beside):
            to_terminal([b for group in block.groups for b in group], console)
        elif isinstance(block, Heading):
            console.print()
            console.print(Text(block.text, style="bold underline" if block.level < 3 else "bold"))
        elif isinstance(block, Paragraph):
            console.print(Text(block.text))
        elif isinstance(block, Bullets):
            for item in block.items:
                console.print(Text("- " + item))
        elif isinstance(block, Table):
            if block.caption:
                console.print(Text(block.caption))
            table = RichTable(title=None)
            for header in block.headers:
                table.add_column(Text(header), overflow="fold")
            for row in block.rows:
                table.add_row(*(cell(v) for v in row))
            for extra in (block.pinned, [block.footer] if block.footer else []):
                if extra:
                    table.add_section()
                for row in extra:
                    table.add_row(*(cell(v) for v in row))
            console.print(table)
            for note in block.notes:
                console.print(Text("  " + note, style="dim"))
        elif isinstance(block, Code):
            for line in block.lines:
                console.print(Text(line))


# ---- CSV and JSON --------------------------------------------------------------------------------------------

def _stat_json(stat: Stat | None) -> dict[str, Any] | None:
    return None if stat is None else {"mean": _round(stat.mean), "low": _round(stat.low), "high": _round(stat.high),
                                      "n": stat.n}


def _cell_json(cell: Cell) -> dict[str, Any]:
    return {
        "task": cell.column.slug, "model": cell.row.slug, "seeds": cell.seeds,
        "failed_seeds": [r["seed"] for r in cell.failed], "errors": [r["error"] for r in cell.failed],
        "not_applicable": [r["error"] for r in cell.not_applicable],
        "best": cell.best,
        "metrics": {name: _stat_json(stat) for name, stat in cell.metrics.items()},
        "untrained_accuracy": _stat_json(cell.untrained), "steps": _stat_json(cell.steps),
        "final_loss": _stat_json(cell.final_loss), "wall_seconds": _stat_json(cell.wall_seconds),
        "chosen_lrs": cell.chosen_lrs, "adaptive": cell.adaptive, **notes.verdicts(cell),
    }


def _score_json(score: Score) -> dict[str, Any]:
    return {"score": _stat_json(score.stat), "best": score.best, "not_applicable": score.not_applicable,
            **({"reason": score.reason} if score.reason else {}), **({"scale": score.scale} if score.stat else {})}


def _scores_json(report: Report) -> dict[str, Any]:
    """The score tables for machines: the ladders with their rungs, then each ranking's table (its counted and
    dropped families, rank stability, claims, and each row's score per column, by budget and by evaluation
    length). A section of one ranking also keeps that table at the top level, as before rankings existed; one of
    several has no section-wide table: its Overall, bold and claims belong to a ranking."""
    scores = report.scores
    assert scores is not None
    data: dict[str, Any] = {
        "budget": report.budget, "budgets": report.budgets.labels if report.budgets else [],
        "length_settings": report.lengths.settings if report.lengths else [],
        "ladders": [{"task": lad.task, "pitfall": lad.pitfall, "axes": lad.axes,
                     "rungs": [{"rung": r.index, "axes": r.axes, "tasks": [c.slug for c in r.columns]}
                               for r in lad.rungs]} for lad in scores.ladders],
    }
    if len(report.rankings) == 1:
        data.update(_table_json(report.rankings[0]))
    data["rankings"] = [{"title": ranking.title, "about": ranking.about, **_table_json(ranking)}
                        for ranking in report.rankings]
    return data


def _table_json(ranking: Ranking) -> dict[str, Any]:
    scores, budgets, lengths = ranking.scores, ranking.budgets, ranking.lengths
    return {"counted": scores.counted, "dropped": scores.dropped, "columns": scores.columns,
            "rungs": {lad.task: [rung.index for rung in lad.rungs] for lad in scores.ladders},  # what it is scored on
            "stability": [{"column": s.column, "between": list(s.between), "kendall_tau": _round(s.tau),
                           "n": s.n} for s in (budgets.stability if budgets else [])],
            "rows": _rows_json(scores, budgets, lengths), "claims": ranking.claims}


def _rows_json(scores: Scores, budgets: Budgets | None, lengths: Lengths | None) -> list[dict[str, Any]]:
    """Each row of a score table: its identity, its score per column, by budget and by evaluation setting."""
    by_budget = budgets.tables if budgets else {}
    by_length = lengths.tables if lengths else {}
    return [{"model": row.slug, "label": row.label, "family": scores.family[row.key], "oracle": row.oracle,
             "baseline": row.baseline,
             "scores": {column: _score_json(scores.score(column, row)) for column in scores.columns},
             "by_budget": {label: {column: _score_json(table.score(column, row)) for column in table.columns}
                           for label, table in by_budget.items()},
             "length": {name: {column: _score_json(table.score(column, row)) for column in table.columns}
                        for name, table in by_length.items()}}
            for row in scores.rows]


def _board_json(report: Report) -> dict[str, Any]:
    board = report.board
    return {
        **({"scores": _scores_json(report)} if report.scores else {}),
        **({"compute": report.compute.to_json()} if report.compute else {}),
        "tasks": [{"id": c.slug, "label": c.label, "task": c.task, "version": c.version, "params": c.params,
                   "eval_split": c.eval_split, "protocol": c.protocol, "bayes_accuracy": _stat_json(c.bayes),
                   "description": c.description,
                   "citation": c.citation} for c in board.columns],
        "models": [{"id": r.slug, "label": r.label, "model": r.model, "version": r.version, "params": r.params,
                    "train": r.train, "recipe": r.recipe, "description": r.description, "citation": r.citation}
                   for r in board.rows],
        "cells": [_cell_json(cell) for column in board.columns for cell in board.column_cells(column)],
        "findings": report.findings,
        "protocol": report.protocol,
        "provenance": report.provenance,
    }


def to_json(reports: Sequence[Report]) -> str:
    """Everything the tables show, for machines; cells refer to tasks and models by their ids."""
    data = {
        "generated_by": "tokbench leaderboard", "interval": INTERVAL,
        "records": sum(r.board.record_count() for r in reports),
        "sections": [{"name": r.name, **_board_json(r)} for r in reports],
    }
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def to_csv(reports: Sequence[Report]) -> str:
    """One line per (section, task, model) cell: identity, seeds, failures, then each metric's mean and CI.

    Where a section has ladders, seven columns follow: ``kind`` (``cell``, or ``score`` for
    a line of a score table: task_label names its column), the score's ``ranking`` (the title of
    the ranking whose table it is in: its Overall counts that ranking's families; the reference rows
    are in every ranking), the cell's ``ladder_rung``, the score's ``score_at`` (``final``, the main
    table; ``steps=B``, at training budget B; ``eval:SETTING``, at a longer evaluation setting such
    as ``context_length=x2``) and the score's mean and interval.
    """
    cells = [(r.name, cell) for r in reports for column in r.board.columns for cell in r.board.column_cells(column)]
    scores = {r.name: r.scores for r in reports if r.scores}
    score_tables = {r.name: _score_tables(r) for r in reports if r.scores}
    found = {m for _, cell in cells for m in cell.metrics}
    metrics = list(CORE_METRICS) + sorted(found - set(CORE_METRICS))
    extra = {"untrained_accuracy": lambda c: c.untrained, "steps": lambda c: c.steps,
             "final_loss": lambda c: c.final_loss, "wall_seconds": lambda c: c.wall_seconds}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["section", "task_label", "task", "task_version", "eval_split", "task_params", "model_label",
                     "model", "model_version", "model_params", "train_params", "seeds", "failed", "best",
                     *(f"{m}_{part}" for m in (*metrics, *extra) for part in ("mean", "low", "high")),
                     *(["kind", "ranking", "ladder_rung", "score_at", "score_mean", "score_low", "score_high"]
                       if scores else [])])
    rungs = {(column.key, name): rung.index for name, board_scores in scores.items()
             for ladder in board_scores.ladders for rung in ladder.rungs for column in rung.columns}
    for name, cell in cells:
        column, row = cell.column, cell.row
        stats = [cell.metrics.get(m) for m in metrics] + [get(cell) for get in extra.values()]
        text = [name, column.label, column.task, column.version, column.eval_split, canonical(column.params),
                row.label, row.model, row.version, canonical(row.params), canonical(row.train)]
        writer.writerow([*map(_csv_text, text), " ".join(str(s) for s in cell.seeds), len(cell.failed), cell.best,
                         *(_csv_number(v) for s in stats for v in ((s.mean, s.low, s.high) if s else (None,) * 3)),
                         *(["cell", "", rungs.get((column.key, name), "")] + [""] * 4 if scores else [])])
    blank = [""] * (3 * (len(metrics) + len(extra)))
    for name, tables in score_tables.items():
        for ranking, at, board_scores in tables:
            for row in board_scores.rows:
                for column in board_scores.columns:
                    score = board_scores.score(column, row)
                    if score.stat is None and not score.not_applicable:
                        continue
                    task = "" if column == OVERALL else column
                    text = [name, board_scores.title(column), task, "", "", "", row.label, row.model, row.version,
                            canonical(row.params), canonical(row.train)]
                    values = ((score.stat.mean, score.stat.low, score.stat.high) if score.stat else (None,) * 3)
                    writer.writerow([*map(_csv_text, text), "", "", score.best, *blank, "score", ranking, "", at,
                                     *(_csv_number(v) for v in values)])
    return out.getvalue()


def _score_tables(report: Report) -> list[tuple[str, str, Scores]]:
    """Per ranking, its score tables with its title and their ``score_at`` label: the main one, then by budget,
    then by setting."""
    return [(ranking.title, at, table) for ranking in report.rankings
            for at, table in (("final", ranking.scores),
                              *((f"steps={label}", table) for label, table in
                                (ranking.budgets.tables if ranking.budgets else {}).items() if label != FINAL),
                              *((f"eval:{setting}", table) for setting, table in
                                (ranking.lengths.tables if ranking.lengths else {}).items()))]


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_text(value: str) -> str:
    """A text cell a spreadsheet shows as text: one starting like a formula gets a leading apostrophe (OWASP)."""
    return "'" + value if value.startswith(_FORMULA_START) else value


def _csv_number(value: float | None) -> str:
    return "" if value is None else repr(_round(value))
