"""One report per leaderboard section, computed once from its records; every renderer only renders it.

A :class:`Report` holds what the pages show: the cells (the section's board), the scores,
the scores at each training budget, the length-generalisation scores, the claims and
findings, the protocol and provenance lines, the training budget in words and the compute spent.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tokbench import verification
from tokbench.leaderboard import notes
from tokbench.leaderboard.aggregate import Leaderboard, Section
from tokbench.leaderboard.budgets import Budgets, budget_text, build_budgets
from tokbench.leaderboard.compute import Compute, build_compute
from tokbench.leaderboard.lengths import Lengths, build_lengths
from tokbench.leaderboard.scores import Scores, build_scores


@dataclass
class Report:
    section: Section
    scores: Scores | None
    budgets: Budgets | None
    lengths: Lengths | None
    claims: list[str]
    findings: list[str]
    protocol: list[str]
    provenance: str
    budget: str
    compute: Compute | None

    @property
    def board(self) -> Leaderboard:
        return self.section.board

    @property
    def name(self) -> str:
        return self.section.name


def build_report(section: Section) -> Report:
    """Everything the pages show about ``section``, each part computed once."""
    board = section.board
    scores = build_scores(board)
    budgets = build_budgets(board, scores) if scores is not None else None
    lengths = build_lengths(board, scores) if scores is not None else None
    claims = notes.score_claims(scores) + notes.stability_claims(budgets) if scores is not None else []
    return Report(section, scores, budgets, lengths, claims, notes.findings(board), notes.protocol(board),
                  notes.provenance(board, stamps(section)), budget_text(board), build_compute(board))


def stamps(section: Section) -> list[dict]:
    """What ``tokbench verify --stamp`` found in the section's record folders, one stamp per folder that has one."""
    return [found for folder in section.sources if (found := verification.read_stamp(folder)) is not None]


def build_reports(sections: Sequence[Section]) -> list[Report]:
    return [build_report(section) for section in sections]
