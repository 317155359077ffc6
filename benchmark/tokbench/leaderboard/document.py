"""The leaderboard as a document of format-neutral blocks, shared by the Markdown, HTML and terminal renderers."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Union

from tokbench.leaderboard import notes
from tokbench.leaderboard.aggregate import bold_rule, format_params
from tokbench.leaderboard.report import Report
from tokbench.leaderboard.scores import OVERALL
from tokbench.leaderboard.stats import INTERVAL
from tokbench.leaderboard.views import PAGE_CHARS, RankingTables, Table, column_header, fit, row_header

TITLE = "tokbench leaderboard"


@dataclass(frozen=True)
class Heading:
    text: str
    level: int


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Bullets:
    items: list[str]


@dataclass(frozen=True)
class Image:
    caption: str
    path: str  # relative to the document
    leads: bool = False  # shown with the score table at the top of its section, not under Plots
    svg: str = ""  # the same plot as SVG, which the HTML page shows instead (sharp at any zoom)


@dataclass(frozen=True)
class Code:
    lines: list[str]


@dataclass(frozen=True)
class Folded:
    """Blocks a reader opens on demand (``<details>`` on the HTML page; a plain heading elsewhere)."""

    summary: str
    blocks: list[Block]


@dataclass(frozen=True)
class Beside:
    """Groups of blocks a wide page shows side by side (a row that wraps where they do not fit; one after another
    elsewhere)."""

    groups: list[list[Block]]


Block = Union[Heading, Paragraph, Bullets, Table, Image, Code, Folded, Beside]


def _citation(citation: str) -> str:
    return f" Cite: {citation}." if citation else ""


def document(reports: Sequence[Report], images: Mapping[str, Sequence[Image]] | None = None,
             commands: Sequence[str] = (), brief: bool = False, details: str | None = None,
             width: int = PAGE_CHARS) -> list[Block]:
    """Per section: its rankings (score tables first), claims, plots, its other tables, then its provenance,
    protocol and failures; then the method, every task and model description once, and the regenerate commands.

    ``images`` maps a section name to its plots. ``brief`` keeps the main tables, the
    findings and the failures (for the terminal). ``details`` names a separate document
    (:func:`details_document`) that holds the findings, plots, per-task tables and
    descriptions instead, so that the published README stays short. Tables wider than ``width``
    characters (an 800 px page by default; a terminal passes its own) are cut (:func:`views.fit`).
    """
    blocks: list[Block] = [Heading(TITLE, 1), Paragraph(_header(reports))]
    for report in reports:
        level = 2
        if report.name:
            blocks.append(Heading(report.name, 2))
            level = 3
        blocks += _board(report, (images or {}).get(report.name, ()), brief, level, details, width)
    if not brief:
        blocks.append(Folded("Method: intervals, coverage and the rules behind every claim", [Bullets(notes.method())]))
        blocks += ([Heading("Tasks and models", 2), Paragraph(f"What each task and model is, with its citation: see "
                                                               f"{details}.")]
                   if details else _descriptions_of(reports))
    if commands:
        blocks += [Heading("Regenerate", 2), Code(list(commands))]
    return blocks


def _header(reports: Sequence[Report]) -> str:
    """The record count, split by section so that it adds up, and what follows the tables."""
    records = sum(r.board.record_count() for r in reports)
    failed = sum(len(r.board.failed()) for r in reports)
    split = (": " + ", ".join(f"{r.name} {r.board.record_count()}" for r in reports)) if len(reports) > 1 else ""
    return (f"Computed by tokbench leaderboard from {records} run records ({failed} failed){split}; never edited by "
            "hand. Provenance and method follow the tables.")


def _descriptions_of(reports: Sequence[Report]) -> list[Block]:
    """Every task and every model of the sections, each described once."""
    boards = [r.board for r in reports]
    return [
        Heading("Tasks", 2),
        Bullets(_descriptions([(c.task, c.version, c.description, c.citation) for b in boards for c in b.columns])),
        Heading("Models", 2),
        Paragraph("A description states the model's defaults; a row's label names the parameters it changes, "
                  "and its configuration (parameters and recipe) says what it ran."),
        Bullets(_descriptions([(r.model, r.version, r.description, r.citation) for b in boards for r in b.rows])),
    ]


def details_document(reports: Sequence[Report], images: Mapping[str, Sequence[Image]] | None = None
                     ) -> list[Block]:
    """What the published README leaves out to stay short, per section: its full provenance (every commit), the
    tables of a scored section (by budget, by length, every rung), the findings, the plots (``images``), each
    row's parameters and recipe and every metric of every model, one table per task; then every task and model
    description."""
    blocks: list[Block] = [Heading(f"{TITLE}: details", 1)]
    for report in reports:
        level = 2
        if report.name:
            blocks.append(Heading(report.name, 2))
            level = 3
        blocks += [Heading("Provenance", level), Paragraph(report.provenance)]
        if report.compute is not None:
            blocks += [Heading("Compute", level), Paragraph(report.compute.text()), *report.compute.tables()]
        if report.rankings:
            blocks += _secondary(report, level, PAGE_CHARS) + _tables(report, level, PAGE_CHARS)
        blocks += [Heading("Findings", level), Bullets(report.findings)]
        if plots := [i for i in (images or {}).get(report.name, ()) if not i.leads]:
            blocks += [Heading("Plots", level), *plots]
        blocks += _details(report, level)
    return blocks + _descriptions_of(reports)


def _tables(report: Report, level: int, width: int) -> list[Block]:
    """The accuracy table and the table of tasks scored on their training split."""
    blocks: list[Block] = []
    if (accuracy := report.tables.accuracy) is not None:
        blocks += [Heading("Accuracy", level),
                   Paragraph(f"Mean accuracy over seeds and, in parentheses, its {INTERVAL}. {bold_rule()} "
                             "Task parameters:"),
                   *fit(accuracy, width)]
    if (training := report.tables.training) is not None:
        blocks += [Heading("Scored on the training split", level),
                   Paragraph("These tasks measure what training finds on the sample it trains on (fitting the "
                             "sample can exceed the distribution's optimum), so they have their own metrics and "
                             "no Bayes optimum. Task parameters:"),
                   *fit(training, width)]
    return blocks


def _details(report: Report, level: int) -> list[Block]:
    blocks: list[Block] = [
        Heading("Configurations", level),
        Bullets([f"{row_header(r)}: {format_params(r.params) or 'no parameters'}; recipe: {r.recipe}"
                 for r in report.board.rows]),
    ]
    for column, table in zip(report.board.columns, report.tables.details):
        blocks += [Heading(column_header(column), level), table]
    return blocks


def _scored(report: Report, images: Sequence[Image], level: int, brief: bool, linked: bool, width: int
            ) -> list[Block]:
    """A section with ladders leads with its rankings: each its score table (the budget in its caption, as many
    tables as a narrow page needs) and claims; then the cells still learning at the cap, the leading plots, the
    scores by budget and by evaluation length (in the details file when ``linked``); its method follows, folded.
    With several rankings, the first screen shows every ranking: their Overall tables side by side (a caption
    they share stated once above them), then each one's family tables and claims, under "TITLE by family"."""
    several = len(report.tables.rankings) > 1
    if not several:
        (ranking,) = report.tables.rankings
        blocks: list[Block] = [Heading(ranking.title, level), *_about(ranking), *fit(ranking.scores, width),
                               *_claims(ranking)]
    else:
        rankings = [(ranking, tables, _overall_tables(tables)) for ranking in report.tables.rankings
                    for tables in [fit(ranking.scores, width, _is_overall)]]
        captions = {tables[0].caption for _, tables, _ in rankings}
        shared = captions.pop() if len(captions) == 1 else ""
        blocks = [*([Paragraph(shared)] if shared else []),
                  Beside([[Heading(ranking.title, level), *_about(ranking),
                           *(replace(t, caption="") if shared else t for t in tables[:lead])]
                          for ranking, tables, lead in rankings])]
        for ranking, tables, lead in rankings:
            if rest := [*tables[lead:], *_claims(ranking)]:
                blocks += [Heading(f"{ranking.title} by family", level), *rest]
    blocks += [*([Paragraph(report.rising)] if report.rising else []), *(i for i in images if i.leads)]
    if not linked:
        blocks += _secondary(report, level, width)
    if not brief:
        blocks.append(Folded("How the scores are computed", [Paragraph(notes.score_method())]))
    return blocks


def _is_overall(header: str) -> bool:
    return header.startswith(OVERALL)


def _overall_tables(tables: Sequence[Table]) -> int:
    """How many of a ranking's cut score tables (cut apart at its last Overall column) show its Overall."""
    return sum(all(_is_overall(header) for header in table.headers[1:]) for table in tables) or 1


def _about(ranking: RankingTables) -> list[Block]:
    return [Paragraph(ranking.about)] if ranking.about else []


def _claims(ranking: RankingTables) -> list[Block]:
    return [Bullets(ranking.claims)] if ranking.claims else []


def _secondary(report: Report, level: int, width: int) -> list[Block]:
    """Per ranking, the scores by training budget and the length-generalisation tables."""
    blocks: list[Block] = []
    several = len(report.tables.rankings) > 1
    for ranking in report.tables.rankings:
        of = f": {ranking.title.lower()}" if several else ""
        if ranking.budget is not None:
            blocks += [Heading(f"Scores by training budget{of}", level), *fit(ranking.budget, width)]
        if ranking.lengths:
            blocks += [Heading(f"Length generalisation{of}", level),
                       Paragraph("Each model trained at the ladder's context length, evaluated unchanged on test "
                                 "sequences drawn at longer ones, scored on the same scale with that setting's own "
                                 "chance and oracle."),
                       *(part for table in ranking.lengths for part in fit(table, width))]
    return blocks


def _board(report: Report, images: Sequence[Image], brief: bool, level: int, details: str | None, width: int
           ) -> list[Block]:
    """A section: its rankings or accuracy tables first, then its provenance (in brief where a ``details`` file
    holds it in full), protocol and compute. With a ``details`` file (the published README), the findings, the
    plots and the per-task tables go there, and so do a scored section's per-rung tables: the README keeps what
    leads."""
    failures = [Heading("Failed runs", level), report.tables.failures] if report.tables.failures else []
    scored = bool(report.rankings)
    linked = details is not None and not brief
    blocks: list[Block] = _scored(report, images, level, brief, linked, width) if scored else []
    if not (linked and scored):
        blocks += _tables(report, level, width)
    if report.unranked:
        blocks += [Heading("Why these tasks rank nothing", level), Bullets(report.unranked)]
    if not linked:
        blocks += [Heading("Findings", level), Bullets(report.findings)]
    if brief:
        return blocks + failures
    blocks += [Heading("Provenance", level),
               Paragraph(report.summary if linked else report.provenance),
               Folded("Protocol", [Bullets(report.protocol)])]
    if report.compute is not None:  # the split per model is in the details file when there is one
        tables = report.compute.tables()
        blocks += [Folded("Compute", [Paragraph(report.compute.text()), *(tables[:1] if linked else tables)])]
    if linked:
        rungs = ("the scores by training budget and at longer evaluation lengths, the accuracy of every model at "
                 "every rung, " if scored else "")
        blocks += [Heading("Findings, plots and details", level),
                   Paragraph(f"In {details}: the full provenance, the compute per model, {rungs}the findings (the "
                             "claims the statistics support, cell by cell), the plots, the parameters and recipe of "
                             "every row, and every metric of every model with seeds, steps and time.")]
    else:
        blocks += [Heading("Details per task", level), *_details(report, level + 1)]
        if plots := [i for i in images if not i.leads]:
            blocks += [Heading("Plots", level), *plots]
    return blocks + failures


def _descriptions(items: list[tuple[str, str, str, str]]) -> list[str]:
    """One line per (name, version): a description is printed once, however many configurations share it."""
    unique = sorted(dict.fromkeys(items))
    return [f"{name} (version {version}): {description}{_citation(citation)}"
            for name, version, description, citation in unique]
