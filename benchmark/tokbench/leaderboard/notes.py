"""The protocol and the findings of a leaderboard, written by rules from its numbers.

No number here is typed: each sentence is built from the aggregated records, and
every claim is a test from :mod:`tokbench.leaderboard.stats` (never an overlap of
intervals):

- *matches the Bayes optimum*: the per-seed difference between the model's
  accuracy and the optimum is equivalent to 0 within +-``MARGIN`` (TOST);
- *below the Bayes optimum*: the ``CONFIDENCE`` interval of that difference is below 0;
- *stays at its untrained accuracy* (chance, named): the per-seed difference
  from the model's own accuracy before training (its training accuracy at step 0,
  measured on one training batch: its evaluation error is that batch's) is
  equivalent to 0 within +-``MARGIN``;
- *differs from*: a variant and its base configuration differ by a Welch test;
- *scores higher than* (score table): the ``CONFIDENCE`` Welch interval of the
  difference between the two highest learned scores of a column excludes 0,
  else they are *not distinguishable*; where the difference is also shown within
  +-``MARGIN`` it is *higher by low to high, within the margin*.

No claim is made about a cell with fewer than ``MIN_SEEDS`` seeds, about an
oracle, about a cell whose evaluation set's size is unknown, or about a task
scored on its training split against the optimum. Each claim is a test at 5% on
its own: no correction is made across the claims of a page.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from tokbench import verification
from tokbench.leaderboard import stats
from tokbench.leaderboard.aggregate import DIGITS, LAST_TOKEN, Cell, Leaderboard, add_floors, bold_rule, format_value
from tokbench.leaderboard.scores import Scores, learned
from tokbench.leaderboard.stats import ABOVE, BELOW, CONFIDENCE, MARGIN, MATCHES, MIN_SEEDS, UNDECIDED, Comparison

LEVEL, ALPHA = f"{CONFIDENCE:.0%}", f"{1 - CONFIDENCE:.0%}"  # "95%" and the 5% of each one-sided test
from tokbench.leaderboard.views import Measure, column_header, measure_text, row_header, seeds_text


def versus_bayes(cell: Cell) -> Comparison | None:
    """The cell's accuracy against the Bayes optimum on the same seeds; None where there is no optimum to test."""
    optimum = cell.column.bayes_by_seed
    if cell.column.on_training_split or cell.row.oracle or not cell.ok or any(s not in optimum for s in cell.seeds):
        return None
    return stats.compare(cell.values("accuracy"), [optimum[s] for s in cell.seeds], cell.eval_floor("accuracy"))


def versus_untrained(cell: Cell) -> Comparison | None:
    """The cell's accuracy against its own untrained accuracy (a trained model's chance level), paired by seed."""
    starts = cell.untrained_values()
    if not cell.row.trained or cell.row.oracle or not starts or len(cell.values("accuracy")) != len(starts):
        return None
    floor = add_floors(cell.eval_floor("accuracy"), cell.untrained_floor())
    return stats.compare(cell.values("accuracy"), starts, floor)


def _names(labels: list[str]) -> str:
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


def _with_accuracy(cell: Cell) -> str:
    return f"{cell.row.label} at {measure_text(Measure(cell.accuracy))}"


NAMED_WITH_ACCURACY = 3  # longer lists name the models only: the table has their numbers


def _list(cells: list[Cell]) -> str:
    return _names([_with_accuracy(c) if len(cells) <= NAMED_WITH_ACCURACY else c.row.label for c in cells])


def _who(chosen: list[Cell], cells: list[Cell]) -> tuple[str, bool]:
    """Name ``chosen`` among ``cells`` as briefly as is exact; the flag says whether the verb is plural."""
    if len(cells) > 1 and len(chosen) == len(cells):
        return ("every model tested" if any(not c.row.baseline for c in cells)
                else "every model tested (baselines only: no learned model was run)"), False
    rest = [c for c in cells if c not in chosen]
    if rest and len(rest) < len(chosen) and len(rest) <= NAMED_WITH_ACCURACY:
        return f"every model tested except {_list(rest)}", False
    return _list(chosen), len(chosen) > 1


def _sentence(subject: tuple[str, bool], singular: str, plural: str, rest: str) -> str:
    who, many = subject
    return f"{who} {plural if many else singular} {rest}"


def findings(board: Leaderboard) -> list[str]:
    """Short statements of what the tests show, per task and rule."""
    lines: list[str] = []
    for column in board.columns:
        cells = [c for c in board.column_cells(column) if c.accuracy is not None and not c.row.oracle]
        if not cells:
            continue
        name = column_header(column)
        tested = [c for c in cells if len(c.ok) >= MIN_SEEDS]
        few = [c for c in cells if len(c.ok) < MIN_SEEDS]
        if column.bayes is not None and not column.on_training_split:
            lines += _bayes_findings(name, column.bayes.mean, tested)
        stuck = [c for c in tested if (v := versus_untrained(c)) is not None and v.verdict == MATCHES]
        trained = [c for c in tested if versus_untrained(c) is not None]
        if stuck:
            lines.append(f"{name}: " + _sentence(_who(stuck, trained), "stays", "stay",
                                                 "at its untrained accuracy (the training accuracy at step 0, "
                                                 f"{_untrained_text(stuck)}), equivalent within ±{MARGIN:g}."))
        lines.extend(_variant_contrasts(name, tested))
        if few:
            lines.append(f"{name}: no claim about {_names([c.row.label for c in few])} (fewer than {MIN_SEEDS} "
                         "seeds).")
    return lines


def unranked(board: Leaderboard) -> list[str]:
    """Why a task of the section can rank no model, from its numbers: it is scored on its training split, or the
    ``last-token`` baseline matches its Bayes optimum (equivalence test as in :func:`findings`): no model's
    expected accuracy exceeds the optimum, so none is more than the upper end of the ``CONFIDENCE`` interval of
    the optimum minus the baseline above it. One line per such column."""
    lines = []
    for column in board.columns:
        last = next((c for c in board.column_cells(column) if c.row.model == LAST_TOKEN), None)
        if column.on_training_split:
            lines.append(f"{column_header(column)}: scored on its training split (it measures what training finds), so "
                         "it has no optimum to rank models against.")
        elif last is not None and (versus := versus_bayes(last)) is not None and versus.verdict == MATCHES:
            room = max(0.0, -versus.low)  # the upper end of the interval of optimum - last-token
            lines.append(f"{column_header(column)}: the last-token baseline matches the Bayes optimum "
                         f"{column.bayes.mean:.{DIGITS}f} (equivalent within ±{MARGIN:g}), so no model can score "
                         f"more than {room:.{DIGITS}f} above it in expectation (the upper end of the {LEVEL} interval "
                         "of the optimum minus the baseline).")
    return lines


def _untrained_text(cells: list[Cell]) -> str:
    values = sorted({f"{c.untrained.mean:.{DIGITS}f}" for c in cells if c.untrained is not None})
    return _names(values).replace(" and ", " or ") if len(values) > 1 else values[0]


def _bayes_findings(name: str, optimum: float, cells: list[Cell]) -> list[str]:
    verdicts = {c.row.key: versus_bayes(c) for c in cells}
    groups: dict[str | None, list[Cell]] = defaultdict(list)
    for cell in cells:
        comparison = verdicts[cell.row.key]
        groups[comparison.verdict if comparison else None].append(cell)
    bayes = f"the Bayes optimum {optimum:.{DIGITS}f}"
    lines = []
    if groups[MATCHES]:
        lines.append(f"{name}: " + _sentence(_who(groups[MATCHES], cells), "matches", "match",
                                             f"{bayes} (equivalent within ±{MARGIN:g}, TOST at {ALPHA})."))
    if groups[BELOW]:
        lines.append(f"{name}: " + _sentence(_who(groups[BELOW], cells), "is", "are",
                                             f"below {bayes} ({LEVEL} interval of the difference below 0)."))
    if groups[UNDECIDED]:
        counts = sorted({verdicts[c.row.key].n for c in groups[UNDECIDED]})
        n = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
        lines.append(f"{name}: " + _sentence(_who(groups[UNDECIDED], cells), "is", "are",
                                             f"neither shown to match {bayes} within ±{MARGIN:g} nor shown below "
                                             f"it (undecided at n = {n})."))
    if groups[ABOVE]:
        lines.append(f"{name}: " + _sentence(_who(groups[ABOVE], cells), "scores", "score",
                                             f"above {bayes} on held-out data, which only chance or a wrong "
                                             "optimum allows: check the task."))
    return lines


def _variant_contrasts(name: str, cells: list[Cell]) -> list[str]:
    """Where a parameter variant of a model differs from the model's base configuration (Welch test)."""
    by_model: dict[str, list[Cell]] = defaultdict(list)
    for cell in cells:
        by_model[cell.row.model].append(cell)
    lines = []
    for model, group in by_model.items():
        base = next((c for c in group if c.row.label == model), None)
        if base is None:
            continue
        for variant in group:
            if variant is base:
                continue
            a, b = variant.values("accuracy"), base.values("accuracy")
            if stats.differs(a, variant.eval_floor("accuracy"), b, base.eval_floor("accuracy")):
                direction = "higher" if stats.mean(a) > stats.mean(b) else "lower"
                lines.append(f"{name}: {_with_accuracy(variant)} scores {direction} than {_with_accuracy(base)} "
                             f"({LEVEL} Welch interval of the difference excludes 0).")
    return lines


def score_claims(scores: Scores) -> list[str]:
    """Per score column: the highest-scoring learned model, and whether a Welch test tells it from the runner-up.

    The models are ordered by the means shown (cut to the score's range), and those whose shown means are equal
    are named as a tie; the test compares the first two, on their uncut estimates. Where the interval of the
    difference excludes 0 and the equivalence test also holds (both can, and both then make bold), the claim
    says the leader is higher by that interval, within the margin.
    """
    lines = []
    for column in scores.columns:
        ranked = sorted(learned(scores, column), key=lambda item: (-item[1].stat.mean, -item[1].estimate.value))
        if len(ranked) < 2:
            continue
        (leader, first), (runner, second) = ranked[:2]
        shown = f"{first.stat.mean:.{DIGITS}f}"
        tied = [(row, score) for row, score in ranked if f"{score.stat.mean:.{DIGITS}f}" == shown]
        title = scores.title(column)
        if len(tied) > NAMED_WITH_ACCURACY:  # names only: the table has their intervals
            head = f"{title}: {_names([r.label for r, _ in tied])} tie for the highest mean shown, {shown}"
        elif len(tied) > 1:
            head = f"{title}: {_names([_with_stat(r, s) for r, s in tied])} tie for the highest mean shown"
        else:
            head = (f"{scores.title(column)}: {leader.label} scores highest at {measure_text(Measure(first.stat))}, "
                    f"then {runner.label} at {measure_text(Measure(second.stat))}")
        test = stats.compare_scores(first.estimate, second.estimate)
        if test.verdict is None:
            why = (f"fewer than {MIN_SEEDS} seeds" if min(first.estimate.seeds, second.estimate.seeds) < MIN_SEEDS
                   else "a test set of unknown size")
            lines.append(f"{head}; no claim (a cell behind either score has {why}).")
            continue
        interval = f"{LEVEL} Welch interval of the difference {test.low:.{DIGITS}f} to {test.high:.{DIGITS}f}"
        if test.low > 0 and test.verdict == MATCHES:
            lines.append(f"{head}; {leader.label} is higher than {runner.label} by {test.low:.{DIGITS}f} to "
                         f"{test.high:.{DIGITS}f} ({LEVEL} Welch interval of the difference), within the ±{MARGIN:g} "
                         f"margin (equivalent by TOST at {ALPHA}).")
        elif test.low > 0:
            lines.append(f"{head}; {leader.label} scores higher than {runner.label} ({interval} excludes 0).")
        elif test.high < 0:  # the higher shown mean, the lower estimate: a cut to the range reordered them
            lines.append(f"{head}; {runner.label} scores higher than {leader.label} before the cut to the range "
                         f"({interval} excludes 0).")
        else:
            lines.append(f"{head}; {leader.label} is not distinguishable from {runner.label} ({interval} "
                         "contains 0).")
    return lines


def _with_stat(row: Any, score: Any) -> str:
    return f"{row.label} at {measure_text(Measure(score.stat))}"


def stability_claims(budgets: Any) -> list[str]:
    """How stable each score column's ranking is between the last two budgets (Kendall's tau-b). No p-value: both
    budgets score largely the same runs (a run that stopped earlier keeps its final accuracy at every later
    budget), so a test of "no association" between them would test nothing worth stating."""
    if budgets is None or not budgets.stability:
        return []
    first = budgets.stability[0].between
    parts = [f"{s.column} tau {s.tau:.2f} (n={s.n})" if s.tau is not None
             else f"{s.column} undefined (n={s.n})" for s in budgets.stability]
    return [f"Ranking stability from {_budget(first[0])} to {_budget(first[1])} (Kendall's tau-b of the learned "
            f"models' scores, a description with no test: both budgets score largely the same runs; 1 = the same "
            f"order): " + "; ".join(parts) + "."]


def _budget(label: str) -> str:
    return "the final step" if label == "final" else f"{int(label):,} steps"


def score_method() -> str:
    """The method paragraph of a section with ladders (shown after its tables)."""
    return (f"Scores: each run is scored (accuracy - chance) / (oracle - chance), with chance the best "
            f"input-independent guess and oracle the task's Bayes predictor on the same test sequences, so 0 is "
            f"chance and the oracle is exactly 1 (records before schema v3 lack those fields and keep accuracy / "
            f"Bayes optimum, which the caption then names). A family score is the mean over the ladder's rungs (its "
            f"fixed settings, easiest first) of the mean score over seeds; Overall is the mean of a model's family "
            f"scores over the counted families, each weighted equally, which each ranking chooses among its own "
            f"learned models: a family counts when some learned model's "
            f"score is above the last-token baseline's by more than {MARGIN:g} (the {LEVEL} Welch interval of the "
            f"difference above +{MARGIN:g}) and it ranks: no more than half of the learned models with a score there "
            f"are shown within ±{MARGIN:g} of the optimum, nor more than half within ±{MARGIN:g} of a baseline (each "
            f"baseline tested at {ALPHA} over their number, so each model's claim about any of them holds at {ALPHA}); "
            f"pitfall families are shown apart and never count. The parenthesis is "
            f"the {LEVEL} interval of the score as an estimate from these seeds, cut at 1, which no expected score "
            f"can exceed; n is the fewest seeds of any cell behind it. The rungs are fixed by the protocol, so their "
            f"spread is no sampling error; each cell adds its variance over seeds (never below its evaluation "
            f"set's) and the interval is Student's t with Welch-Satterthwaite degrees of freedom "
            f"({_score_coverage_text()}; {ADAPTIVE_COVERAGE}). {bold_rule()} A claim under the table compares the "
            f"two highest learned scores of a column by a Welch test; none is made with fewer than {MIN_SEEDS} seeds "
            f"in a cell behind either. {MULTIPLICITY} Full method: docs/scores.md.")


# What the coverage simulations do not cover, and how many claims a page makes at once: said wherever coverage or
# claims are.
ADAPTIVE_COVERAGE = ("seeds fixed in advance; a cell seeded by tokbench run --target-ci (seeds added until its "
                     "interval is narrow) may cover less")
MULTIPLICITY = f"Each claim is a test at {ALPHA}, uncorrected for the number of claims on the page."


@lru_cache(maxsize=1)
def _score_coverage_text() -> str:
    """The coverage simulation of the score interval, as a clause (computed, then cached for this process)."""
    rates = ", ".join(f"{c.rate:.1%} ({'-'.join(map(str, dict.fromkeys(c.seeds)))} seeds per cell)"
                      for c in stats.score_coverage_table())
    return (f"coverage of the nominal {LEVEL} interval on {stats.SCORE_TRIALS} simulated ladders per setting with "
            f"unequal seeds and spreads: {rates}")


@lru_cache(maxsize=1)
def _coverage_text() -> str:
    """The coverage simulation of the interval, as a sentence (computed, then cached for this process)."""
    by_sd: dict[float, list[stats.Coverage]] = defaultdict(list)
    for entry in stats.coverage_table():
        by_sd[entry.seed_sd].append(entry)
    parts = []
    for sd, entries in by_sd.items():
        rates = ", ".join(f"{e.rate:.1%} (n={e.seeds})" for e in entries)
        parts.append(f"seed-to-seed sd {sd:g}: {rates}" if sd else f"no seed-to-seed variation: {rates}")
    return (f"Coverage of the nominal {stats.CONFIDENCE:.0%} interval, simulated on "
            f"{stats.COVERAGE_TRIALS} synthetic cells per setting (true accuracy {stats.COVERAGE_MEAN:g} with normal "
            f"seed-to-seed variation, each seed scored on {stats.COVERAGE_EXAMPLES} fresh test sequences): "
            + "; ".join(parts) + ". Where the evaluation sets' error dominates, the interval is conservative. "
            + f"Simulated with {ADAPTIVE_COVERAGE}.")


def method() -> list[str]:
    """How every number and claim is made, the same for every section: metric, interval, coverage, tests."""
    return [
        "Each cell is the mean of metrics.accuracy over seeds on the task's evaluation split (the test split "
        f"unless the column names another); the parenthesis is the {stats.INTERVAL}. A cell with one seed shows "
        "n=1 and no interval; n/a marks a pairing that does not apply (e.g. a task scored at every position "
        "and a model that predicts only the last one). A cell whose task declares no size for its evaluation split "
        "shows n=k: no interval, and no claim is made from it.",
        _coverage_text(),
        f"Claims are tests on per-seed differences, never overlaps of intervals: a model matches the Bayes optimum "
        f"when the difference is equivalent to 0 within ±{MARGIN:g} (two one-sided tests at {ALPHA}); it is below it "
        f"when the {LEVEL} interval of the difference lies below 0; it stays at its untrained accuracy (its training "
        f"accuracy at step 0, measured on one training batch, whose size sets its evaluation error) when that "
        f"difference is equivalent to 0 within ±{MARGIN:g}; a variant differs from its base configuration when the "
        f"{LEVEL} Welch interval excludes 0. No claim is made with fewer than {MIN_SEEDS} seeds. {MULTIPLICITY}",
        bold_rule(),
        "The Bayes optimum row is the analytic optimum each task reports for its data (mean over seeds). Oracle "
        "rows, marked (oracle), are models that read the task's answer (e.g. the task's own Bayes predictor): "
        "they check the task and are never bold nor in a claim.",
        "Every task draws separate train, validation and test splits from each seed (their sizes are task "
        "parameters); models are trained on the train split only.",
    ]


def protocol(board: Leaderboard) -> list[str]:
    """What is particular to one leaderboard: seeds, training-split tasks, lr selection, provenance, failures."""
    lines = []
    seed_sets = {tuple(c.seeds) for c in board.cells.values() if c.ok}
    if len(seed_sets) == 1:
        lines.append(f"Seeds: {seeds_text(list(next(iter(seed_sets))))} in every cell.")
    else:
        lines.append("Seeds differ between cells; the detail tables list them.")
    for column in board.training_columns:
        lines.append(f"{column.label} is scored on its {column.eval_split} split: it measures what training "
                     "finds, not generalisation, so it has its own table and no Bayes optimum.")
    expected = sorted({column.task for column in board.columns if column.protocol.get("validate_by") == "expected"})
    if expected:
        lines.append(f"{', '.join(expected)} {'stops' if len(expected) == 1 else 'stop'} training on the expected "
                     "validation accuracy under the task's label law (train.validate_by = expected), not on its drawn "
                     "labels: one drawn label per sequence leaves their accuracy too noisy for the stopping rule "
                     "(docs/suites.md). Its test scores use the drawn test labels like every other.")
    for row in board.rows:
        grid = row.train.get("lr_grid")
        if grid:
            cells = [c for c in board.cells.values() if c.row is row]
            chosen = format_set(sorted({lr for c in cells for lr in c.chosen_lrs}))
            decays = row.train.get("wd_grid")
            if decays:  # swept with the rate: every pair of the two grids is a candidate
                decay = format_set(sorted({wd for c in cells for wd in c.chosen_weight_decays}))
                lines.append(f"{row.label} picks its learning rate from {format_set(grid)} and its weight decay from "
                             f"{format_set(decays)} per run, every pair a candidate, by validation accuracy; the test "
                             f"split is not seen during the choice (chosen: rates {chosen}, weight decays {decay}).")
            else:
                lines.append(f"{row.label} picks its learning rate per run from {format_set(grid)} by validation "
                             f"accuracy; the test split is not seen during the choice (chosen: {chosen}).")
    failed = board.failed()
    if failed:
        lines.append(f"{len(failed)} of {board.record_count()} runs failed; they are counted in their cells and "
                     "listed under failed runs, never averaged.")
    return lines


def format_set(values: list) -> str:
    """A set of values as a set, ``{1, 3}`` (never ``1/3``, which reads as a fraction)."""
    return "{" + ", ".join(format_value(v) for v in values) + "}"


def _provenance_values(board: Leaderboard) -> dict[str, Counter[str]]:
    values: dict[str, Counter[str]] = defaultdict(Counter)
    for cell in board.cells.values():
        for rec in cell.ok + cell.failed:
            for key in ("tokbench_version", "git_commit", "torch", "lightning", "python", "device"):
                values[key][str(rec["provenance"].get(key) or "unknown")] += 1
    return values


def _environment(board: Leaderboard, values: Mapping[str, Counter[str]]) -> str:
    def joined(key: str) -> str:
        return ", ".join(sorted(values[key]))

    devices = values["device"]
    # a section trained on several devices says how many records each made (verify compares across them)
    on = joined("device") if len(devices) < 2 else ", ".join(f"{d} ({n} record{'s' * (n != 1)})" for d, n in sorted(devices.items()))
    return (f"{board.record_count()} run records, tokbench {joined('tokbench_version')}, torch {joined('torch')}, "
            f"Lightning {joined('lightning')}, Python {joined('python')}, on {on}.")


def _checked(stamps: Sequence[Mapping[str, Any]]) -> str:
    if stamps:
        return "Checked since: " + " ".join(verification.stamp_sentence(s) for s in stamps) + \
            " A later commit may differ: `tokbench verify RECORDS --sample N` checks the current code."
    return ("Whether the current code would change them is not in the records: `tokbench verify RECORDS "
            "--sample N` (RECORDS: this section's record folder) retrains a sample at the current code "
            "and reports every metric that does not reproduce.")


def provenance(board: Leaderboard, stamps: Sequence[Mapping[str, Any]] = ()) -> str:
    """Where the section's records come from: the commits they were produced at (with how many records each),
    the versions, and whether a later code still reproduces them: what ``tokbench verify --stamp`` found (its
    ``stamps``, one per records folder), or how to find out."""
    values = _provenance_values(board)
    commits = values["git_commit"]
    at = (f"commit {next(iter(commits))}" if len(commits) == 1 else
          f"{len(commits)} commits (" + ", ".join(f"{c} {n}" for c, n in sorted(commits.items())) + " records)")
    return f"Produced at {at}: {_environment(board, values)} {_checked(stamps)}"


def provenance_summary(board: Leaderboard, stamps: Sequence[Mapping[str, Any]] = ()) -> str:
    """:func:`provenance` in brief, for the page under the tables: the number of commits and why a section can
    have several (the list is with the details), the dates, the versions and the last check."""
    values = _provenance_values(board)
    commits = values["git_commit"]
    started = sorted(str(rec["provenance"].get("started_at") or "")[:10] for cell in board.cells.values()
                     for rec in cell.ok + cell.failed if rec["provenance"].get("started_at"))
    when = (f" between {started[0]} and {started[-1]}" if started and started[0] != started[-1]
            else f" on {started[0]}" if started else "")
    at = (f"at commit {next(iter(commits))[:12]}" if len(commits) == 1 else
          f"at {len(commits)} commits: a run that is resumed, sharded or partly rerun keeps each record's own "
          "commit, so one section can span several (the records per commit are listed with the details)")
    return f"Trained{when} {at}. {_environment(board, values)} {_checked(stamps)}"


def _comparison_json(comparison: Comparison | None) -> dict[str, Any] | None:
    if comparison is None:
        return None
    return {"difference": comparison.difference, "low": comparison.low, "high": comparison.high,
            "n": comparison.n, "verdict": comparison.verdict}


def verdicts(cell: Cell) -> dict[str, Any]:
    """The machine-readable form of the tests, for the JSON output (``verdict`` null: no claim)."""
    return {"versus_bayes": _comparison_json(versus_bayes(cell)),
            "versus_untrained": _comparison_json(versus_untrained(cell)),
            "oracle": cell.row.oracle, "label": row_header(cell.row)}
