"""One report per leaderboard section, computed once from its records; every renderer only renders it.

A :class:`Report` holds what the pages show: the cells (the section's board), the section's scores
(every row's family scores, and Overall where the section is one ranking), the rankings (the architectures,
and the theory papers' single attention layers, each counting its own families in its Overall, with its
scores by budget and by evaluation length and its claims), the findings, the protocol and provenance lines,
the training budget in words and the compute spent; and its tables, built once from all of it (:mod:`views`
only arranges).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from tokbench import verification
from tokbench.leaderboard import notes
from tokbench.leaderboard.aggregate import SINGLE_LAYER_FAMILY, Leaderboard, Row, Section
from tokbench.leaderboard.budgets import Budgets, budget_text, build_budgets, rising_text, still_rising
from tokbench.leaderboard.compute import Compute, build_compute
from tokbench.leaderboard.lengths import Lengths, build_lengths
from tokbench.leaderboard.scores import Scores, build_scores

if TYPE_CHECKING:
    from tokbench.leaderboard.views import Tables

SCORES = "Scores"
ARCHITECTURES = "Architectures"
SINGLE_LAYERS = "Single attention layers"


@dataclass
class Ranking:
    """One score table's rows (its learned models, then the baselines and the oracle) with their scores, by budget
    and by evaluation length, and the claims the tests support; ``about`` says which models it ranks."""

    title: str
    about: str
    scores: Scores
    budgets: Budgets | None
    lengths: Lengths | None
    claims: list[str] = field(default_factory=list)


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
    summary: str = ""  # the provenance in brief, for the page under the tables
    rankings: list[Ranking] = field(default_factory=list)
    rising: str = ""  # the cells still learning at the cap, named with their accuracies ("" when none)
    unranked: list[str] = field(default_factory=list)  # a section without ladders: why its tasks rank nothing

    @property
    def board(self) -> Leaderboard:
        return self.section.board

    @property
    def name(self) -> str:
        return self.section.name

    @cached_property
    def tables(self) -> Tables:
        """Every table of the report, built once however many formats render it."""
        from tokbench.leaderboard.views import build_tables

        return build_tables(self)


def build_report(section: Section) -> Report:
    """Everything the pages show about ``section``, each part computed once. A section of several rankings has
    no section-wide Overall (each ranking counts its own families): its section scores are the family scores."""
    board = section.board
    scores = build_scores(board, counted=())  # the family scores; Overall where the section is one ranking
    groups = ranking_groups(scores) if scores is not None else []
    several = len(groups) > 1
    if scores is not None and not several:
        scores = build_scores(board)
    budgets = build_budgets(board, scores) if scores is not None else None
    lengths = build_lengths(board, scores) if scores is not None else None
    claims = _claims(scores, budgets) if scores is not None and not several else []  # each ranking has its own
    checked = stamps(section)
    report = Report(section, scores, budgets, lengths, claims, notes.findings(board), notes.protocol(board),
                    notes.provenance(board, checked), budget_text(board), build_compute(board),
                    notes.provenance_summary(board, checked))
    if scores is not None:
        report.rankings = build_rankings(report, groups)
        if len(report.rankings) > 1:  # the section's rows in the rankings' order (each by its own Overall)
            scores.rows = [*(row for ranking in report.rankings for row in ranking.scores.ranked), *scores.pinned]
        report.rising = rising_text(still_rising(board))
    else:
        report.unranked = notes.unranked(board)
    return report


def _claims(scores: Scores, budgets: Budgets | None) -> list[str]:
    return notes.score_claims(scores) + notes.stability_claims(budgets)


def ranking_groups(scores: Scores) -> list[tuple[str, list[Row]]]:
    """The learned rows as the rankings group them: the architectures, and the single attention layers (rows whose
    model declares the family ``attention (1 layer)``); groups without rows are left out."""
    learned = scores.ranked
    groups = [(ARCHITECTURES, [r for r in learned if r.family != SINGLE_LAYER_FAMILY]),
              (SINGLE_LAYERS, [r for r in learned if r.family == SINGLE_LAYER_FAMILY])]
    return [(title, rows) for title, rows in groups if rows]


def build_rankings(report: Report, groups: Sequence[tuple[str, list[Row]]]) -> list[Ranking]:
    """The section's rows as rankings, one per group of :func:`ranking_groups`, each with the reference rows, on the
    families its models were run on. Each counts its families in Overall by the section's rule applied to its own
    learned models (:func:`~tokbench.leaderboard.scores.build_scores`), so a family that tells the architectures
    little apart leaves their Overall whatever the single layers do there. With one group only, the section's
    scores are its one ranking."""
    scores = report.scores
    assert scores is not None
    if len(groups) < 2:
        return [Ranking(SCORES, "", scores, report.budgets, report.lengths, report.claims)]
    rankings = []
    for title, rows in groups:
        ranked = build_scores(report.board, among=[*rows, *scores.pinned])
        if ranked is None:
            continue
        budgets = build_budgets(report.board, ranked)
        rankings.append(Ranking(title, _about(title, ranked), ranked, budgets, build_lengths(report.board, ranked),
                                _claims(ranked, budgets)))
    return rankings


def _about(title: str, scores: Scores) -> str:
    families = sorted({scores.family[row.key] for row in scores.ranked})
    if title == SINGLE_LAYERS:
        return (f"The theory papers' single attention layers (model family {SINGLE_LAYER_FAMILY}: positional "
                "encodings, initialisations, the papers' own layers), ranked apart from the architectures on the "
                "families they ran.")
    return f"Model families {', '.join(families)}; the theory papers' single attention layers are ranked apart."


def stamps(section: Section) -> list[dict]:
    """What ``tokbench verify --stamp`` found in the section's record folders, one stamp per folder that has one."""
    return [found for folder in section.sources if (found := verification.read_stamp(folder)) is not None]


def build_reports(sections: Sequence[Section]) -> list[Report]:
    return [build_report(section) for section in sections]
