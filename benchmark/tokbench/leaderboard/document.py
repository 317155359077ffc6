"""The leaderboard as a document of format-neutral blocks, shared by the Markdown, HTML and terminal renderers."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union

from tokbench.leaderboard import notes
from tokbench.leaderboard.aggregate import Leaderboard
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


def document(board: Leaderboard, images: Sequence[Image] = (), commands: Sequence[str] = (),
             brief: bool = False) -> list[Block]:
    """Tables, findings, protocol, descriptions, plots, failures and the commands that regenerate it all.

    ``brief`` keeps the main table, the findings and the failures (for the terminal).
    """
    failed = board.failed()
    blocks: list[Block] = [
        Heading(TITLE, 1),
        Paragraph(f"Computed by tokbench leaderboard from {board.record_count()} run records "
                  f"({len(failed)} failed); never edited by hand."),
        Heading("Accuracy", 2),
        Paragraph("Mean accuracy over seeds ± the half-width of the 95% Student's t interval; bold marks the best "
                  "mean in each column. Task parameters:"),
        main_table(board),
        Heading("Findings", 2),
        Bullets(notes.findings(board)),
    ]
    if brief:
        return blocks + ([Heading("Failed runs", 2), failures_table(board)] if failed else [])
    blocks += [
        Heading("Protocol", 2),
        Bullets(notes.protocol(board)),
        Heading("Tasks", 2),
        Bullets([f"{column_header(c)} (version {c.version}): {c.description}{_citation(c.citation)}"
                 for c in board.columns]),
        Heading("Models", 2),
        Bullets([f"{r.label} (version {r.version}): {r.description}{_citation(r.citation)}" for r in board.rows]),
        Heading("Details per task", 2),
    ]
    for column in board.columns:
        blocks += [Heading(column_header(column), 3), detail_table(board, column)]
    if images:
        blocks += [Heading("Plots", 2), *images]
    if failed:
        blocks += [Heading("Failed runs", 2), failures_table(board)]
    if commands:
        blocks += [Heading("Regenerate", 2), Code(list(commands))]
    return blocks
