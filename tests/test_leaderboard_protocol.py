"""The leaderboard side of the v3 protocol: the chance-to-oracle scale, the counted families, scores by training
budget, length generalisation, the pinned reference rows and the claims rules (synthetic records)."""
from __future__ import annotations

import csv
import io
import json

import pytest
from scipy import stats as scipy_stats

from leaderboard_synth import GD, ladder, sections, seeds, v3
from tokbench.leaderboard import notes
from tokbench.leaderboard.aggregate import build
from tokbench.leaderboard.publish import render
from tokbench.leaderboard.report import build_report
from tokbench.leaderboard.scale import BAYES_SCALE, CHANCE_SCALE
from tokbench.leaderboard.scores import OVERALL, build_scores
from tokbench.leaderboard.views import measure_text, score_table

NONE = {"optimizer": "adam", "lr": 0.0, "steps": 0, "batch_size": 0, "lr_grid": []}
TRAIN = {**GD, "steps": 3000}


def _model(task: str, model: str, means: list[float], family: str | None = None, **kwargs) -> list[dict]:
    train = NONE if family in ("baseline", "oracle") else TRAIN
    return ladder(task, model, means, family=family, train=train, **kwargs)


def _row(scores, model: str):
    return next(r for r in scores.rows if r.model == model)


def test_chance_scale_is_paired_per_record_and_the_oracle_is_exactly_one():
    learned = v3(_model("mqar", "transformer", [0.575, 0.575, 0.575], spread=0.0), chance=0.25, oracle=0.9)
    oracle = v3(_model("mqar", "bayes-optimal", [0.9, 0.9, 0.9], family="oracle", spread=0.0), chance=0.25,
                oracle=0.9)
    scores = build_scores(build(learned + oracle))
    row, top = _row(scores, "transformer"), _row(scores, "bayes-optimal")
    assert scores.score("mqar", row).stat.mean == pytest.approx((0.575 - 0.25) / (0.9 - 0.25))
    assert scores.score("mqar", top).stat.mean == 1.0 and scores.score(OVERALL, top).stat.mean == 1.0
    assert scores.score("mqar", top).stat.high == 1.0  # the interval is cut at the bound no expected score exceeds
    assert scores.score("mqar", row).scale == CHANCE_SCALE and scores.scales == [CHANCE_SCALE]
    # Paired: each seed is scored by its own chance and oracle, not by the column's means.
    pair = v3(_model("mqar", "transformer", [0.6], n=2, spread=0.0), chance=0.3, oracle=0.8)
    pair[1]["metrics"].update(chance_accuracy=0.1, oracle_accuracy=0.7)
    scores = build_scores(build(pair))
    expected = ((0.6 - 0.3) / 0.5 + (0.6 - 0.1) / 0.6) / 2
    assert scores.score("mqar", _row(scores, "transformer")).stat.mean == pytest.approx(expected)



def test_a_family_validated_by_expected_accuracy_keeps_its_models_in_the_common_rows_and_says_so():
    plain = v3(_model("mqar", "transformer", [0.6, 0.6, 0.6]), chance=0.25, oracle=0.9)
    expected = v3(_model("sparse-selection", "transformer", [0.5, 0.5, 0.5]), chance=0.25, oracle=0.9)
    for record in expected:
        record["params"]["train"] = {**record["params"]["train"], "validate_by": "expected"}
    board = build(plain + expected)
    (row,) = board.rows  # one transformer row: how a family is validated is the column's, not the model's
    assert "validate_by" not in row.train and row.label == "transformer"
    assert {c.task: c.protocol for c in board.columns}["sparse-selection"] == {"validate_by": "expected"}
    assert all("validate_by" not in c.label for c in board.columns)
    scores = build_scores(board)
    row = _row(scores, "transformer")
    families = [scores.score(task, row).stat.mean for task in ("mqar", "sparse-selection")]
    assert families == pytest.approx([(0.6 - 0.25) / 0.65, (0.5 - 0.25) / 0.65])  # each family on its own scale
    assert scores.score(OVERALL, row).stat.mean == pytest.approx(sum(families) / 2)  # and both in one Overall
    assert any(line.startswith("sparse-selection stops training on the expected validation accuracy")
               for line in notes.protocol(board))

def test_a_family_stopped_and_validated_its_own_way_shares_its_columns_with_the_baselines_and_its_rows():
    # the tokbench suite sets majority's stop rule per task (no target, a plateau as long as the cap) and
    # validates it by expected accuracy; the baselines and the oracle train nothing, so carry neither key
    plain = v3(_model("mqar", "transformer", [0.6, 0.6, 0.6]), chance=0.25, oracle=0.9)
    counted = v3(_model("majority", "transformer", [0.5, 0.5, 0.5]), chance=0.25, oracle=0.9)
    for record in counted:
        record["params"]["train"] = {**record["params"]["train"], "validate_by": "expected", "patience": 10000}
    floors = [v3(_model(task, "last-token", [0.3, 0.3, 0.3], family="baseline"), chance=0.25, oracle=0.9)
              for task in ("mqar", "majority")]
    board = build(plain + counted + floors[0] + floors[1])
    assert [r.label for r in board.rows] == ["last-token", "transformer"]  # one row each, whatever the family
    majority = [c for c in board.columns if c.task == "majority"]
    assert len(majority) == 3 and all(c.protocol == {"validate_by": "expected", "patience": 10000} for c in majority)
    assert all({cell.row.model for cell in board.column_cells(c)} == {"last-token", "transformer"}
               for c in board.columns)  # each rung's baseline is scored beside the models, in one column
    assert all("train." not in c.label for c in board.columns)
    # a plan cut to the middle rung: the rungs only the baselines ran take the protocol the task's models agree on
    board = build([r for r in plain + counted if r["ladder"]["rung"] == 1] + floors[0] + floors[1])
    assert all("train." not in c.label for c in board.columns) and len(board.columns) == 6
    assert [c.protocol for c in board.columns if c.task == "majority"] == [{"validate_by": "expected",
                                                                            "patience": 10000}] * 3
    # suites merged into one section that validate a configuration two ways: its baseline keeps a column apart
    other = v3(_model("majority", "gru", [0.5, 0.5, 0.5]), chance=0.25, oracle=0.9)
    for record in other:
        record["params"]["train"] = {**record["params"]["train"], "validate_by": "labels"}
    board = build(counted + other + floors[1])
    assert len([c for c in board.columns if c.task == "majority"]) == 9
    assert all(len(board.column_cells(c)) == 1 for c in board.columns)


def test_a_model_that_beats_the_oracle_on_its_test_sequences_by_luck_scores_at_most_one():
    # majority with ties: on one finite test set a model can out-guess the oracle's tie-breaking (seen: attn-learned
    # at 1.012, 0.997 and 1.040 on the V = 2 rung); the expected score cannot exceed 1, so neither may the mean
    lucky = v3(_model("majority", "attn-learned", [0.905], spread=0.0), chance=0.5, oracle=0.9)
    for rec, accuracy in zip(lucky, (0.905, 0.899, 0.916)):
        rec["metrics"]["accuracy"] = rec["metrics"]["test_accuracy"] = accuracy
        rec["metrics"]["normalized_accuracy"] = accuracy / rec["metrics"]["bayes_accuracy"]
    scores = build_scores(build(lucky))
    row = _row(scores, "attn-learned")
    for column in ("majority", OVERALL):
        stat = scores.score(column, row).stat
        assert stat.mean == 1.0 and stat.high == 1.0 and stat.low < 1.0


def test_records_before_v3_keep_the_bayes_scale_and_say_so():
    report = build_report(sections(ladder("mqar", "transformer", [0.72, 0.72, 0.72], bayes=0.8, spread=0.0))[0])
    score = report.scores.score("mqar", report.scores.rows[0])
    assert score.scale == BAYES_SCALE and score.stat.mean == pytest.approx(0.9)
    md = render([report.section], "md")
    assert f"Scale: {BAYES_SCALE}" in md


def test_overall_counts_only_families_where_a_learned_model_is_far_from_last_token():
    walk = (_model("random-walk", "transformer", [0.8, 0.8, 0.8], bayes=0.8, family="transformer")
            + _model("random-walk", "last-token", [0.8, 0.8, 0.8], bayes=0.8, family="baseline"))
    mqar = (_model("mqar", "transformer", [0.9, 0.8, 0.7], family="transformer")
            + _model("mqar", "last-token", [0.2, 0.2, 0.2], family="baseline"))
    scores = build_scores(build(walk + mqar))
    assert scores.counted == ["mqar"] and "random-walk" in scores.dropped
    row = _row(scores, "transformer")
    assert scores.score(OVERALL, row).stat.mean == pytest.approx(scores.score("mqar", row).stat.mean)
    table = score_table(scores)
    assert table.headers[:2] == ["model", "Overall"] and "random-walk (not in Overall)" in table.headers
    assert any(note.startswith("random-walk: not in Overall (no learned model is shown above the last-token")
               for note in table.notes)


def _family(task: str, means: dict[str, list[float]], floor: list[float] | None = None, n: int = 3) -> list[dict]:
    """A family on the chance scale (chance 0, oracle 1): each learned model's rung means, and a baseline's."""
    recs = [rec for model, rungs in means.items() for rec in _model(task, model, rungs, n=n, spread=0.002)]
    if floor is not None:
        recs += _model(task, "uniform", floor, family="baseline", n=n, spread=0.002)
    return v3(recs, chance=0.0, oracle=1.0)


def test_a_family_where_most_learned_models_tie_the_optimum_leaves_overall():
    solved = _family("lag-walk", {"gru": [1.0, 1.0, 1.0], "lstm": [1.0, 0.995, 0.99], "mlp": [0.6, 0.5, 0.4]})
    hard = _family("mqar", {"gru": [0.9, 0.7, 0.5], "lstm": [0.8, 0.6, 0.4], "mlp": [0.5, 0.4, 0.3]})
    scores = build_scores(build(solved + hard))
    assert scores.counted == ["mqar"]
    assert scores.dropped["lag-walk"] == "it ranks little: 2 of 3 learned models are shown within 0.02 of the optimum"
    assert scores.score(OVERALL, _row(scores, "gru")).stat.mean == pytest.approx(0.7)
    assert any(note.startswith("lag-walk: not in Overall (it ranks little: 2 of 3") for note in score_table(scores).notes)


def test_a_family_where_most_learned_models_tie_a_baseline_leaves_overall():
    floored = _family("mqar", {"gru": [0.2, 0.2, 0.2], "lstm": [0.2, 0.2, 0.2], "transformer": [1.0, 1.0, 1.0]},
                      floor=[0.2, 0.2, 0.2])
    scores = build_scores(build(floored + _family("lag-walk", {"gru": [0.9, 0.7, 0.5], "transformer": [0.9, 0.8, 0.7]})))
    assert scores.dropped["mqar"] == "it ranks little: 2 of 3 learned models are shown within 0.02 of a baseline"


def test_each_ranking_counts_the_families_its_own_learned_models_separate():
    # lag-walk: two of three architectures tie the optimum (it ranks little among them), the two single layers are
    # far apart; mqar separates the architectures. One board, two rankings, two sets of counted families.
    single = "attention (1 layer)"
    recs = v3([rec for model, rungs, family in (
        ("gru", [1.0] * 3, None), ("lstm", [1.0] * 3, None), ("mlp", [0.6, 0.5, 0.4], None),
        ("attn-nope", [0.9, 0.8, 0.7], single), ("attn-rope", [0.3, 0.2, 0.1], single))
        for rec in _model("lag-walk", model, rungs, family=family, spread=0.002)]
        + [rec for model, rungs in (("gru", [0.9, 0.7, 0.5]), ("lstm", [0.8, 0.6, 0.4]), ("mlp", [0.5, 0.4, 0.3]))
           for rec in _model("mqar", model, rungs, spread=0.002)], chance=0.0, oracle=1.0,
              budget={100: 0.3})
    report = build_report(sections(recs, "tokbench")[0])
    architectures, layers = report.rankings
    assert architectures.scores.counted == ["mqar"] and "lag-walk" in architectures.scores.dropped
    assert layers.scores.counted == ["lag-walk"] and not layers.scores.dropped
    gru = _row(architectures.scores, "gru")
    assert architectures.scores.score(OVERALL, gru).stat.mean == pytest.approx(0.7)
    assert architectures.budgets.tables["100"].counted == ["mqar"]  # its budget table counts what it counts
    data = json.loads(render(sections(recs, "tokbench"), "json"))["sections"][0]["scores"]
    assert [(r["counted"], list(r["dropped"])) for r in data["rankings"]] == [(["mqar"], ["lag-walk"]),
                                                                              (["lag-walk"], [])]
    rows = {row["model"]: row for row in data["rankings"][0]["rows"]}
    assert set(rows["gru"]["by_budget"]) == {"100", "final"} and "Overall" in rows["gru"]["by_budget"]["100"]
    lines = [r for r in csv.DictReader(io.StringIO(render(sections(recs, "tokbench"), "csv"))) if r["kind"] == "score"]
    nope = {(r["ranking"], r["score_at"]) for r in lines if r["model"] == "attn-nope" and r["task_label"] == "Overall"}
    assert nope == {("Single attention layers", "final"), ("Single attention layers", "steps=100")}


@pytest.mark.parametrize("floors, dropped", [(["uniform"], True),
                                             (["uniform", "last-token", "context-guess"], False)])
def test_a_tie_with_any_of_several_baselines_is_tested_at_five_percent_over_their_number(floors, dropped):
    # two models 0.008 above floors at 0.2: shown within 0.02 of one floor at 5%, but not of any of three at 5%/3
    # each (Bonferroni), which a claim about "some baseline" needs to keep its 5% level
    means = {"gru": [0.208] * 3, "lstm": [0.208] * 3, "transformer": [1.0] * 3}
    recs = [rec for model, rungs in means.items() for rec in _model("mqar", model, rungs, spread=0.002)]
    recs += [rec for floor in floors for rec in _model("mqar", floor, [0.2] * 3, family="baseline", spread=0.002)]
    scores = build_scores(build(v3(recs, chance=0.0, oracle=1.0)))
    assert ("mqar" in scores.dropped) is dropped and ("mqar" in scores.counted) is not dropped


@pytest.mark.parametrize("means, n", [
    # half solve it, half sit at the floor: the family tells the two halves apart
    ({"gru": [1.0, 1.0, 1.0], "lstm": [1.0, 1.0, 1.0], "mlp": [0.2, 0.2, 0.2], "transformer": [0.2, 0.2, 0.2]}, 3),
    # every model solves the easy rungs, the hardest separates them
    ({"gru": [1.0, 1.0, 0.4], "lstm": [1.0, 1.0, 0.7], "mlp": [1.0, 1.0, 0.5]}, 3),
    # 2 seeds, under the claims' minimum of 3: nothing is shown equivalent, so nothing leaves on that ground
    ({"gru": [1.0, 1.0, 1.0], "lstm": [1.0, 1.0, 1.0], "mlp": [1.0, 1.0, 1.0]}, 2),
], ids=["halves", "harder-rung", "two-seeds"])
def test_a_family_that_separates_its_models_or_is_not_shown_tied_stays_in_overall(means, n):
    scores = build_scores(build(_family("mqar", means, floor=[0.2, 0.2, 0.2], n=n)))
    assert scores.counted == ["mqar"] and not scores.dropped


def test_bold_only_where_distinguishable_from_both_baselines_and_never_on_a_reference_row():
    recs = (_model("mqar", "gru", [0.25, 0.25, 0.25], spread=0.005)
            + _model("mqar", "lstm", [0.25, 0.25, 0.25], spread=0.005)
            + _model("mqar", "uniform", [0.25, 0.25, 0.25], family="baseline", spread=0.005)
            + _model("mqar", "last-token", [0.25, 0.25, 0.25], family="baseline", spread=0.005))
    scores = build_scores(build(recs))
    assert not any(s.best for s in scores.cells.values())  # chance-level rows equal to the baselines: no bold
    board = build(recs)
    assert not any(cell.best for cell in board.cells.values())  # nor in the per-rung accuracy tables
    better = recs + _model("mqar", "transformer", [0.9, 0.9, 0.9])
    scores = build_scores(build(better))
    assert [r.model for r in scores.rows if scores.score("mqar", r).best] == ["transformer"]


def test_oracle_and_baselines_are_pinned_apart_from_the_ranking():
    recs = (_model("mqar", "transformer", [0.9, 0.8, 0.7]) + _model("mqar", "gru", [0.5, 0.4, 0.3])
            + _model("mqar", "bayes-optimal", [1.0, 1.0, 1.0], family="oracle")
            + _model("mqar", "uniform", [0.1, 0.1, 0.1], family="baseline"))
    table = score_table(build_scores(build(recs)))
    assert [r[0] for r in table.rows] == ["transformer", "gru"]
    assert [r[0] for r in table.pinned] == ["uniform (baseline)", "bayes-optimal (oracle)"]
    html = render(sections(recs, "tokbench"), "html")
    ranked, pinned = html.split('<tbody class="pinned">', 1)
    assert "bayes-optimal (oracle)" in pinned and "bayes-optimal (oracle)" not in ranked.split("<h3>Scores</h3>")[1]


def test_scores_by_budget_carry_the_final_accuracy_forward_and_state_rank_stability():
    fast = v3(_model("mqar", "transformer", [0.9, 0.9, 0.9], spread=0.0), chance=0.0, oracle=1.0,
              budget={100: 0.3, 300: 0.6}, stopped="target")
    for rec in fast:  # stopped at step 200: no point at 300, its final accuracy is carried there
        rec["train"]["steps"] = 200
        rec["budget_curve"] = [{"step": 100, "accuracy": 0.3}, {"step": 200, "accuracy": 0.9, "final": True}]
    slow = v3(_model("mqar", "gru", [0.5, 0.5, 0.5], spread=0.0), chance=0.0, oracle=1.0,
              budget={100: 0.4, 300: 0.45})
    mid = v3(_model("mqar", "lstm", [0.7, 0.7, 0.7], spread=0.0), chance=0.0, oracle=1.0, budget={100: 0.5, 300: 0.6})
    report = build_report(sections(fast + slow + mid)[0])
    budgets = report.budgets
    assert budgets.labels == ["100", "300", "final"]
    at = {label: {r.model: t.score("mqar", r).stat.mean for r in t.rows} for label, t in budgets.tables.items()}
    assert at["100"] == pytest.approx({"transformer": 0.3, "gru": 0.4, "lstm": 0.5})
    assert at["300"] == pytest.approx({"transformer": 0.9, "gru": 0.45, "lstm": 0.6})  # 0.9: carried forward
    stability = next(s for s in budgets.stability if s.column == "mqar")
    expected = scipy_stats.kendalltau([0.9, 0.45, 0.6], [0.9, 0.5, 0.7]).statistic
    assert stability.between == ("300", "final") and stability.tau == pytest.approx(expected) and stability.n == 3
    (line,) = [line for line in report.claims if line.startswith("Ranking stability from 300 steps to the final")]
    assert "mqar tau 1.00 (n=3)" in line and "p=" not in line  # a description: no test of "no association"
    data = json.loads(render([report.section], "json"))["sections"][0]["scores"]
    assert all(set(entry) == {"column", "between", "kendall_tau", "n"} for entry in data["stability"])
    assert "at most 3,000 optimiser steps per run" in report.budget and "target 9 of 27 runs" in report.budget
    assert "runs stop at the target or at the cap (cap 18, target 9 of 27 runs" in report.budget  # no plateau rule
    md = render([report.section], "md")
    assert md.index("Training budget") < md.index("| model | Overall")  # the budget is named before the table
    scored = [r for r in csv.DictReader(io.StringIO(render([report.section], "csv"))) if r["kind"] == "score"]
    gru = {r["score_at"]: float(r["score_mean"]) for r in scored if r["model"] == "gru" and r["task_label"] == "mqar"}
    assert gru == pytest.approx({"final": 0.5, "steps=100": 0.4, "steps=300": 0.45})


def test_a_cell_still_learning_at_the_cap_is_named_in_the_budget_with_its_scores_as_possible_lower_bounds():
    slow = v3(_model("mqar", "lstm", [0.69, 0.5, 0.5], spread=0.0), chance=0.0, oracle=1.0,
              budget={1000: 0.44, 2000: 0.56})  # first rung, at the cap of 3000 steps: +0.13 over the budget before
    flat = v3(_model("mqar", "gru", [0.5, 0.5, 0.5], spread=0.0), chance=0.0, oracle=1.0, budget={1000: 0.45, 2000: 0.49})
    solved = v3(_model("mqar", "transformer", [0.99, 0.99, 0.99], spread=0.0), chance=0.0, oracle=1.0,
                budget={1000: 0.6}, stopped="target")
    for rec in solved:
        rec["train"]["steps"] = 1500
        rec["budget_curve"][-1]["step"] = 1500
    report = build_report(sections(slow + flat + solved)[0])
    # counted in the budget line; "may": the rule compares two means, with no test behind it
    assert "1 cell was still learning at the cap (may be lower bounds)" in report.budget
    assert "Still learning at the cap (1 cell;" in report.rising  # and named under the tables
    assert "These scores may be lower bounds" in report.rising and "are lower bounds" not in report.rising
    assert "lstm on mqar K=4 context_length=8 (0.560 at 2,000 steps, 0.690 at 3,000" in report.rising
    assert "gru" not in report.rising.split("Still learning")[1] and "transformer" not in report.rising
    md = render([report.section], "md")
    assert md.index("1 cell was still") < md.index("| model | Overall") < md.index("Still learning at the cap (1")
    quiet = build_report(sections(flat + solved)[0])
    assert "still learning" not in quiet.budget and quiet.rising == ""


def test_a_cell_whose_seeds_split_between_the_target_and_the_cap_is_named_though_its_mean_is_flat():
    """A seed in a flat start longer than the cap sits beside seeds that solved the task: the mean over the last
    budget does not move, so only the stops show it (lag-walk's single layers at 20000 steps: 11 such cells)."""
    split = v3(_model("mqar", "lstm", [0.5], spread=0.0), chance=0.0, oracle=1.0, budget={1000: 0.5, 2000: 0.5})
    split[0]["train"]["stopped_because"] = "target"  # flat over the last budget: the rule on the mean is quiet
    all_capped = v3(_model("mqar", "gru", [0.5], spread=0.0), chance=0.0, oracle=1.0, budget={1000: 0.5, 2000: 0.5})
    report = build_report(sections(split + all_capped)[0])
    assert "1 cell was still learning at the cap (may be lower bounds)" in report.budget
    assert "lstm on mqar (0.500 at 2,000 steps, 0.500 at 3,000; 1 of 3 seeds reached the target)" in report.rising
    assert "gru" not in report.rising.split("Still learning")[1]  # no seed solved it: nothing says more would


def test_length_generalisation_scores_with_na_and_its_reason_never_a_number():
    ok = [{"overrides": {"context_length": 16}, "status": "ok",
           "metrics": {"accuracy": 0.55, "chance_accuracy": 0.1, "oracle_accuracy": 1.0, "bayes_accuracy": 1.0,
                       "value_attention": 0.4, "loss": 0.9}}]
    why = "learned absolute positions exist only up to the training length"
    na = [{"overrides": {"context_length": 16}, "status": "not_applicable", "reason": why}]
    walk = {"K": [4], "context_length": [8]}
    recs = (v3(_model("mqar", "attn-nope", [0.9], axes=walk), chance=0.1, evaluations=ok)
            + v3(_model("mqar", "attn-learned", [0.9], axes=walk), chance=0.1, evaluations=na))
    for rec in recs:  # how the task measured its attention diagnostic: what marks value_attention as one
        rec["diagnostics"] = {"value_attention": {"kind": "mass", "layer": "last", "head": 0}}
    report = build_report(sections(recs, "tokbench")[0])
    assert report.lengths.settings == ["context_length x2"]
    table = report.lengths.tables["context_length x2"]
    nope, learned = _row(table, "attn-nope"), _row(table, "attn-learned")
    assert table.score("mqar", nope).stat.mean == pytest.approx((0.55 - 0.1) / 0.9)
    assert table.score("mqar", learned).stat is None and table.score("mqar", learned).reason == why
    main = score_table(report.scores, lengths=report.lengths)
    assert main.headers[:3] == ["model", "Overall", "Overall at x2"]  # the ranking's columns first
    assert "Overall at x2: evaluated at 2 times the training context_length." in main.notes
    texts = {row[0]: measure_text(row[2]) for row in main.rows}
    assert texts["attn-learned"] == "n/a" and f"n/a for attn-learned on Overall at context_length x2: {why}" \
        not in main.notes and any(why in note for note in main.notes)
    data = json.loads(render([report.section], "json"))["sections"][0]["scores"]
    rows = {r["model"]: r for r in data["rows"]}
    assert rows["attn-nope"]["length"]["context_length x2"]["Overall"]["score"]["mean"] == pytest.approx(0.5)
    assert rows["attn-learned"]["length"]["context_length x2"]["mqar"] == {
        "score": None, "best": False, "not_applicable": True, "reason": why}
    md = render([report.section], "md")
    assert "value\\_attention at context\\_length x2" in md  # the attention metric beside the accuracy
    assert "loss at context\\_length x2" not in md  # a loss is not an attention diagnostic
    scored = [r for r in csv.DictReader(io.StringIO(render([report.section], "csv"))) if r["kind"] == "score"]
    longer = {r["model"]: r for r in scored if r["score_at"] == "eval:context_length x2" and r["task"] == "mqar"}
    assert float(longer["attn-nope"]["score_mean"]) == pytest.approx(0.5)
    assert longer["attn-learned"]["score_mean"] == ""  # n/a: a line without a number



def test_a_family_no_model_can_take_at_a_longer_length_leaves_the_overall_there_to_the_others():
    ok = [{"overrides": {"context_length": 16}, "status": "ok",
           "metrics": {"accuracy": 0.55, "chance_accuracy": 0.1, "oracle_accuracy": 1.0, "bayes_accuracy": 1.0}}]
    why = "a longer context needs position tokens no model has embedded"
    na = [{"overrides": {"context_length": 16}, "status": "not_applicable", "reason": why}]
    walk = {"K": [4], "context_length": [8]}
    recs = (v3(_model("mqar", "attn-nope", [0.9], axes=walk), chance=0.1, evaluations=ok)
            + v3(_model("sparse-selection", "attn-nope", [0.9], axes={"q": [2]}), chance=0.1, evaluations=na))
    report = build_report(sections(recs, "tokbench")[0])
    assert report.scores.counted == ["mqar", "sparse-selection"]
    table = report.lengths.tables["context_length x2"]
    assert table.counted == ["mqar"] and table.dropped == {"sparse-selection": "no model has a score there"}
    assert table.score(OVERALL, _row(table, "attn-nope")).stat.mean == pytest.approx((0.55 - 0.1) / 0.9)
    main = score_table(report.scores, lengths=report.lengths)
    assert "Overall at context_length x2 is over mqar; not sparse-selection (no model has a score there)." in main.notes

def test_a_ranking_whose_learned_models_have_no_evaluation_has_no_length_column():
    """The tokbench suite's length table is the single layers': the baselines both rankings share on lag-walk carry
    its evaluations, the architectures do not, and their ranking shows no "Overall at" column."""
    single = "attention (1 layer)"
    ok = [{"overrides": {"context_length": 16}, "status": "ok",
           "metrics": {"accuracy": 0.55, "chance_accuracy": 0.1, "oracle_accuracy": 1.0, "bayes_accuracy": 1.0}}]
    walk = {"K": [4, 8, 16], "context_length": [8, 8, 8]}
    evaluated = v3([rec for model, rungs, family in (("attn-nope", [0.9, 0.8, 0.7], single),
                                                      ("attn-rope", [0.3, 0.2, 0.1], single),
                                                      ("uniform", [0.1] * 3, "baseline"))
                    for rec in _model("lag-walk", model, rungs, family=family, spread=0.002, axes=walk)],
                   chance=0.0, oracle=1.0, evaluations=ok)
    architectures = v3([rec for model, rungs in (("gru", [0.9, 0.7, 0.5]), ("lstm", [0.8, 0.6, 0.4]))
                        for task, axes in (("lag-walk", walk), ("mqar", None))
                        for rec in _model(task, model, rungs, spread=0.002, axes=axes)], chance=0.0, oracle=1.0)
    report = build_report(sections(evaluated + architectures, "tokbench")[0])
    ranked, layers = report.rankings
    assert ranked.lengths is None and layers.lengths.settings == ["context_length x2"]
    assert "Overall at x2" not in score_table(ranked.scores, lengths=ranked.lengths).headers
    assert score_table(layers.scores, lengths=layers.lengths).headers[:3] == ["model", "Overall", "Overall at x2"]


def test_a_ranking_cut_to_one_rung_is_scored_on_that_rung_whatever_the_shared_baselines_ran():
    """`tokbench run --rung 1` trains the architectures on the middle rung only; the single layers and the baselines
    both rankings share ran every rung of lag-walk. The architectures' family scores are their middle rung's."""
    single = "attention (1 layer)"
    everywhere = v3([rec for model, rungs, family in (("attn-nope", [0.9, 0.8, 0.7], single),
                                                       ("attn-rope", [0.3, 0.2, 0.1], single),
                                                       ("uniform", [0.1] * 3, "baseline"))
                     for task in ("lag-walk", "mqar") if family or task == "lag-walk"
                     for rec in _model(task, model, rungs, family=family, spread=0.002)], chance=0.0, oracle=1.0)
    middle = v3([rec for model, rungs in (("gru", [0.9, 0.7, 0.5]), ("lstm", [0.8, 0.4, 0.4]))
                 for task in ("lag-walk", "mqar")
                 for rec in _model(task, model, rungs, spread=0.002) if rec["ladder"]["rung"] == 1],
                chance=0.0, oracle=1.0)
    ranked, layers = build_report(sections(everywhere + middle, "tokbench")[0]).rankings
    assert [[rung.index for rung in lad.rungs] for lad in ranked.scores.ladders] == [[1], [1]]
    assert [[rung.index for rung in lad.rungs] for lad in layers.scores.ladders] == [[0, 1, 2], [0, 1, 2]]
    gru, lstm = _row(ranked.scores, "gru"), _row(ranked.scores, "lstm")
    assert ranked.scores.score("lag-walk", gru).stat.mean == pytest.approx(0.7)
    assert ranked.scores.score(OVERALL, lstm).stat.mean == pytest.approx(0.4)
    # the floor is scored on the rungs the ranking's models ran: its middle rung here, its three for the layers
    assert ranked.scores.score("lag-walk", _row(ranked.scores, "uniform")).stat.n == 3
    assert layers.scores.score("lag-walk", _row(layers.scores, "attn-nope")).stat.mean == pytest.approx(0.8)
    data = json.loads(render(sections(everywhere + middle, "tokbench"), "json"))["sections"][0]["scores"]
    assert [r["rungs"] for r in data["rankings"]] == [{"lag-walk": [1], "mqar": [1]},
                                                      {"lag-walk": [0, 1, 2], "mqar": [0, 1, 2]}]


def test_a_multiple_a_task_could_not_resolve_shares_the_column_of_the_resolved_ones():
    # sparse-selection has no context_length: its records keep "x2", unresolved and not applicable
    resolved = [{"overrides": {"context_length": 16}, "status": "ok",
                 "metrics": {"accuracy": 0.55, "chance_accuracy": 0.1, "oracle_accuracy": 1.0, "bayes_accuracy": 1.0}}]
    why = "a longer context needs position tokens the model never embedded"
    unresolved = [{"overrides": {"context_length": "x2"}, "status": "not_applicable", "reason": why}]
    recs = (v3(_model("mqar", "attn-nope", [0.9], axes={"K": [4], "context_length": [8]}), chance=0.1,
               evaluations=resolved)
            + v3(_model("sparse-selection", "attn-nope", [0.9], axes={"q": [1]}), chance=0.1, evaluations=unresolved))
    report = build_report(sections(recs, "tokbench")[0])
    assert report.lengths.settings == ["context_length x2"]
    table = report.lengths.tables["context_length x2"]
    assert table.score("sparse-selection", _row(table, "attn-nope")).reason == why


def test_claims_rules_no_loss_finding_and_sets_in_braces():
    losses = {"loss": 0.8, "bayes_loss": 0.0, "excess_loss": 2.2, "excess_loss_se": 0.01}
    recs = seeds(3, [0.5, 0.5, 0.5], diagnostics=losses, model="bayes-optimal")
    assert not any("loss" in line for line in notes.findings(build(recs)))
    grid = {**GD, "lr_grid": [1.0, 3.0]}
    lines = notes.protocol(build(seeds(3, [0.5, 0.5, 0.5], train=grid)))
    assert any("picks its learning rate per run from {1, 3}" in line for line in lines)
    # swept with weight decay (the AdamW recipes): both grids and both choices are stated
    recs = seeds(3, [0.5, 0.5, 0.5], train={**grid, "wd_grid": [0.0, 0.1], "weight_decay": 0.0})
    recs[1]["train"].update(lr=3.0, weight_decay=0.1)
    (line,) = [line for line in notes.protocol(build(recs)) if "picks" in line]
    assert line.endswith("picks its learning rate from {1, 3} and its weight decay from {0, 0.1} per run, every pair a "
                         "candidate, by validation accuracy; the test split is not seen during the choice (chosen: "
                         "rates {1, 3}, weight decays {0, 0.1}).")


def test_every_section_states_its_commits_and_the_method_follows_the_table():
    recs = _model("mqar", "transformer", [0.9, 0.8, 0.7])
    for i, rec in enumerate(recs):
        rec["provenance"]["git_commit"] = "a" * 40 if i % 2 else "b" * 40
    html = render(sections(recs, "tokbench"), "html")
    assert "Produced at 2 commits (" + "a" * 40 + " " in html
    assert html.index("<table") < html.index("<details><summary>How the scores are computed")
    assert html.index("<table") < html.index("<details><summary>Method")


def test_plots_read_at_a_glance_budget_and_length_curves():
    from tokbench.leaderboard.plots import LEGEND_SIZE, budget_curves, ladders, length_curves, plan

    ok = [{"overrides": {"context_length": 16}, "status": "ok",
           "metrics": {"accuracy": 0.5, "chance_accuracy": 0.1, "oracle_accuracy": 1.0, "bayes_accuracy": 1.0}}]
    walk = {"K": [4, 8], "context_length": [8, 16]}
    recs = (v3(_model("mqar", "transformer", [1.0, 1.0], axes=walk, family="transformer"), chance=0.1,
               budget={100: 0.5}, evaluations=ok)
            + v3(_model("mqar", "gru", [1.0, 1.0], axes=walk, family="rnn"), chance=0.1, budget={100: 0.4},
                 evaluations=ok))
    for rec in recs:  # each rung evaluated at twice its own training length
        rec["evaluations"] = [{**ok[0], "overrides": {"context_length": 2 * rec["params"]["task"]["context_length"]}}]
    report = build_report(sections(recs, "tokbench")[0])
    fig = ladders(report.board, report.scores)
    (ax,) = [a for a in fig.axes if a.get_visible()]
    (legend,) = fig.legends  # one legend under the panels, at body-text size, covering no line
    assert all(t.get_fontsize() == LEGEND_SIZE for t in legend.get_texts())
    markers = {line.get_marker() for line in ax.get_lines() if line.get_marker() in ("o", "s", "D", "^")}
    assert len(markers) == 2  # the two families overlap at 1.0: different markers tell them apart
    # a threshold on the means, not a test of optimality: it says what it checked
    assert [t.get_text() for t in ax.texts] == ["every mean ≥ 0.99"]
    budget_ax = [a for a in budget_curves(report).axes if a.get_visible()][0]
    assert [t.get_text() for t in budget_ax.get_xticklabels()] == ["100", "final"]
    assert {line.get_label() for line in budget_ax.get_lines()} >= {"transformer", "rnn"}
    length_ax = [a for a in length_curves(report).axes if a.get_visible()][0]
    assert [t.get_text() for t in length_ax.get_xticklabels()] == ["trained", "context_length x2"]
    assert {line.get_label() for line in length_ax.get_lines()} == {"transformer", "gru"}
    html = render([report.section], "html", {"tokbench": [p.image for p in plan(report, "tokbench-")]})
    assert '<img src="plots/tokbench-ladders.svg"' in html


def test_published_readme_keeps_the_score_table_and_links_the_budget_and_length_tables():
    from tokbench.leaderboard.document import details_document
    from tokbench.leaderboard.render import to_markdown

    ok = [{"overrides": {"context_length": 16}, "status": "ok",
           "metrics": {"accuracy": 0.5, "chance_accuracy": 0.1, "oracle_accuracy": 1.0, "bayes_accuracy": 1.0}}]
    recs = v3(_model("mqar", "transformer", [0.9], axes={"K": [4], "context_length": [8]}), chance=0.1,
              budget={100: 0.5}, evaluations=ok)
    report = build_report(sections(recs, "tokbench")[0])
    readme = render([report.section], "md", details="details.md")
    assert "| model | Overall | Overall at x2 | mqar |" in readme
    assert "Scores by training budget" not in readme.split("### Findings, plots and details")[0]
    details = to_markdown(details_document([report]))
    assert "### Scores by training budget" in details and "### Length generalisation" in details


def _capped(records: list[dict], cap: int) -> list[dict]:
    for rec in records:
        rec["params"]["train"].update(steps=cap, budgets=[100, cap])
        rec["train"]["max_steps"] = cap
        rec.setdefault("meta", {})["recipe"] = f"adam, at most {cap} steps"
    return records


def test_a_model_trained_to_different_caps_on_different_families_is_one_row_and_the_budget_names_the_range():
    """The tokbench suite's architectures train to 20000 steps on some families and 10000 on others: one row each,
    and the budget sentence gives the range of caps."""
    short = _capped(v3(_model("mqar", "gru", [0.5] * 3, spread=0.0), chance=0.0, oracle=1.0, budget={100: 0.4}), 3000)
    long = _capped(v3(_model("majority", "gru", [0.6] * 3, spread=0.0), chance=0.0, oracle=1.0, budget={100: 0.4}),
                   6000)
    board = build(short + long)
    (row,) = board.rows
    assert row.label == "gru" and "steps" not in row.train  # no one cap to state
    assert row.recipe == "adam, at most 6000 steps (majority); adam, at most 3000 steps (mqar)"  # each with its tasks
    budget = build_report(sections(short + long)[0]).budget
    assert "at most 3,000 to 6,000 optimiser steps per run (the cap differs by recipe or task);" in budget
    (alone,) = build(short).rows
    assert alone.train["steps"] == 3000 and alone.recipe == "adam, at most 3000 steps"  # one budget: stated


def test_one_column_never_mixes_two_budgets_of_a_model_in_one_cell():
    short = _capped(v3(_model("mqar", "gru", [0.5] * 3, spread=0.0), chance=0.0, oracle=1.0, budget={100: 0.4}), 3000)
    long = _capped(v3(_model("mqar", "gru", [0.7] * 3, spread=0.0), chance=0.0, oracle=1.0, budget={100: 0.4}), 6000)
    board = build(short + long)
    assert sorted(r.train["steps"] for r in board.rows) == [3000, 6000]
    assert len(board.cells) == 2 * len(board.columns) and all(len(cell.ok) == 3 for cell in board.cells.values())
    assert len({r.label for r in board.rows}) == 2
