"""The leaderboard as a document of format-neutral blocks, shared by the Markdown, HTML and terminal renderers."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Union

from tokbench.leaderboard import notes
from tokbench.leaderboard.aggregate import Leaderboard, Section
from tokbench.leaderboard.views import Table, column_header, detail_table, failures_table, main_table

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


@dataclass(frozen=True)
class Code:
    lines: list[str]


Block = Union[Heading, Paragraph, Bullets, Table, Image, Code]


def _citation(citation: str) -> str:
    return f" Cite: {citation}." if citation else ""


def document(sections: Sequence[Section], images: Mapping[str, Sequence[Image]] | None = None,
             commands: Sequence[str] = (), brief: bool = False) -> list[Block]:
    """Per section: tables, findings, protocol, descriptions, plots and failures; then the regenerate commands.

    ``images`` maps a section name to its plots. ``brief`` keeps the main table, the
    findings and the failures (for the terminal).
    """
    records = sum(s.board.record_count() for s in sections)
    failed = sum(len(s.board.failed()) for s in sections)
    blocks: list[Block] = [
        Heading(TITLE, 1),
        Paragraph(f"Computed by tokbench leaderboard from {records} run records ({failed} failed); "
                  "never edited by hand."),
    ]
    for section in sections:
        level = 2
        if section.name:
            blocks.append(Heading(section.name, 2))
            level = 3
        blocks += _board(section.board, (images or {}).get(section.name, ()), brief, level)
    if commands:
        blocks += [Heading("Regenerate", 2), Code(list(commands))]
    return blocks


def _board(board: Leaderboard, images: Sequence[Image], brief: bool, level: int) -> list[Block]:
    failures = [Heading("Failed runs", level), failures_table(board)] if board.failed() else []
    blocks: list[Block] = [
        Heading("Accuracy", level),
        Paragraph("Mean accuracy over seeds ± the half-width of the 95% Student's t interval; bold marks the best "
                  "mean in each column. Task parameters:"),
        main_table(board),
        Heading("Findings", level),
        Bullets(notes.findings(board)),
    ]
    if brief:
        return blocks + failures
    blocks += [
        Heading("Protocol", level),
        Bullets(notes.protocol(board)),
        Heading("Tasks", level),
        Bullets([f"{column_header(c)} (version {c.version}): {c.description}{_citation(c.citation)}"
                 for c in board.columns]),
        Heading("Models", level),
        Bullets([f"{r.label} (version {r.version}): {r.description}{_citation(r.citation)}" for r in board.rows]),
        Heading("Details per task", level),
    ]
    for column in board.columns:
        blocks += [Heading(column_header(column), level + 1), detail_table(board, column)]
    if images:
        blocks += [Heading("Plots", level), *images]
    return blocks + failures
