"""Aggregation of run records: grouping, intervals, failures, labels, best marks and the rule-based findings."""
from __future__ import annotations

import pytest
from leaderboard_synth import GD, WALK, ladder, record, seeds
from tokbench.errors import UsageError
from tokbench.leaderboard import notes, stats
from tokbench.leaderboard.aggregate import build, count_range
from tokbench.leaderboard.scores import build_scores
from tokbench.leaderboard.views import detail_table, main_table, measure_text, number_text, score_table, training_table

GD_TARGET = {"optimizer": "gd", "lr": 1.0, "batch_size": 0, "lr_grid": [], "target": 0.995}

DET = {"K": 6, "laps": 2, "train_size": 100, "val_size": 100, "test_size": 100}
GD_NONE = {"optimizer": "adam", "lr": 0.0, "steps": 0, "batch_size": 0, "lr_grid": []}


def test_cell_statistics_and_failed_runs_are_counted_not_averaged():
    recs = seeds(3, [0.4, 0.5, 0.6]) + [record(seed=3, error="NonFiniteLossError: loss became nan at step 3")]
    board = build(recs)
    (cell,) = board.cells.values()
    assert cell.seeds == [0, 1, 2] and len(cell.failed) == 1
    assert cell.accuracy.mean == pytest.approx(0.5) and cell.accuracy.n == 3
    assert cell.metrics["normalized_accuracy"].mean == pytest.approx(1.0)
    assert cell.wall_seconds.mean == pytest.approx(2.5)  # 1.5 + seed over seeds 0..2
    assert board.columns[0].bayes.mean == 0.5
    low, high = cell.accuracy.interval
    assert measure_text(main_table(board).rows[0][1]) == f"0.500 ({low:.3f}–{high:.3f}) [1 failed]"
    all_failed = build([record(seed=0, error="RuntimeError: boom")])
    assert measure_text(main_table(all_failed).rows[0][1]) == "failed (1)"


def test_versions_and_parameter_sets_never_share_a_cell():
    recs = (seeds(2, [0.5, 0.5]) + seeds(2, [0.7, 0.8], task_params={**WALK, "p": 0.8}, bayes=0.8)
            + seeds(2, [0.5, 0.5], task_version="2")
            + seeds(2, [0.9, 0.9], task_params={**WALK, "p": 0.8}, bayes=0.8, model_params={"dtype": "float32",
                                                                                             "positions": "onehot"})
            + seeds(2, [0.6, 0.6], train={"optimizer": "adam", "lr": 0.01, "steps": 50, "batch_size": 0,
                                          "lr_grid": []}))
    board = build(recs)
    assert [c.label for c in board.columns] == ["random-walk", "random-walk p=0.8", "random-walk version=2"]
    assert [r.label for r in board.rows] == ["attn-paper-a", "attn-paper-a dtype=float32",
                                            "attn-paper-a train.lr=0.01 train.optimizer=adam"]
    assert len(board.cells) == 5 and all(len(c.ok) == 2 for c in board.cells.values())
    assert len({c.slug for c in board.columns}) == 3


def _chance(recs: list[dict], chance: float) -> list[dict]:
    """``recs`` with the chance accuracy of their test sequences recorded on every seed (as schema v3 records do)."""
    for rec in recs:
        rec["metrics"]["chance_accuracy"] = chance
    return recs


def test_best_per_column_and_bayes_row():
    recs = _chance(seeds(3, [0.5, 0.51, 0.49]) + seeds(3, [0.3, 0.3, 0.31], model="baseline")
                   + seeds(3, [0.5, 0.5, 0.5], model="tie") + seeds(3, [0.5, 0.5, 0.5], model="bayes-optimal"), 0.17)
    table = main_table(build(recs))
    assert [row[0] for row in table.rows] == ["attn-paper-a", "baseline", "tie", "bayes-optimal (oracle)"]
    assert [row[1].best for row in table.rows] == [True, False, True, False]  # tie: the same mean
    assert table.footer[0] == "Bayes optimum (analytic)" and table.footer[1].stat.mean == 0.5
    assert table.notes == ["random-walk: K=6, context_length=8, p=0.5, test_size=100, train_size=100, val_size=100"]


def test_training_set_task_gets_its_own_table_and_diagnostics_stay_absent():
    scc = {"task": "scc-implicit-bias", "task_params": {"n": 4}, "eval_split": "train", "bayes": 0.25}
    recs = (seeds(2, [0.9, 1.0], diagnostics={"svm_correlation": 0.99}, **scc)
            + seeds(2, [0.9, 1.0], model="other", **scc)
            + seeds(2, [0.5, 0.5]))
    board = build(recs)
    assert main_table(board).headers == ["model", "random-walk"]
    training = training_table(board)
    assert training.headers == ["model", "scc-implicit-bias: training accuracy", "scc-implicit-bias: svm_correlation"]
    assert training.footer is None and [row[2] for row in training.rows][1] == ""  # absent, never 0
    detail = detail_table(board, board.training_columns[0])
    assert "accuracy (train)" in detail.headers and "test_accuracy" not in detail.headers
    assert "normalized_accuracy" not in detail.headers and "bayes_accuracy" not in detail.headers


def test_no_records_is_a_usage_error():
    with pytest.raises(UsageError, match="no run records"):
        build([])


def test_findings_match_below_chance_and_variants_from_tests():
    float32 = {"dtype": "float32", "positions": "onehot"}
    big = {**DET, "train_size": 100000, "test_size": 100000}
    det = {"task": "deterministic-walk", "task_params": big, "bayes": 1.0, "untrained": 0.167}
    recs = (seeds(5, [0.499, 0.502, 0.497, 0.5, 0.503], task_params={**WALK, "test_size": 1000})
            + seeds(5, [0.167, 0.168, 0.166, 0.167, 0.167], **det)
            + seeds(5, [1.0, 1.0, 1.0, 1.0, 1.0], model_params=float32, **det)
            + seeds(5, [0.55, 0.6, 0.65, 0.6, 0.6], model="midway", **det)
            + seeds(2, [0.9, 1.0], model="few", **det))
    board = build(recs)
    det_col, walk = board.columns
    cells = {c.row.label: c for c in board.column_cells(det_col)}
    assert notes.versus_untrained(cells["attn-paper-a"]).verdict == "matches"
    assert notes.versus_bayes(cells["attn-paper-a"]).verdict == "below"
    assert notes.versus_bayes(cells["attn-paper-a dtype=float32"]).verdict == "matches"
    assert notes.versus_bayes(cells["few"]).verdict is None
    assert notes.versus_bayes(board.column_cells(walk)[0]).verdict == "matches"
    text = notes.findings(board)
    assert ("deterministic-walk: attn-paper-a dtype=float32 at 1.000 (1.000–1.000) matches the Bayes optimum 1.000 "
            "(equivalent within ±0.02, TOST at 5%).") in text
    assert ("deterministic-walk: every model tested except attn-paper-a dtype=float32 at 1.000 (1.000–1.000) is "
            "below the Bayes optimum 1.000 (95% interval of the difference below 0).") in text
    assert any(line.startswith("deterministic-walk: attn-paper-a at 0.167")
               and "stays at its untrained accuracy" in line
               for line in text), text
    assert any("attn-paper-a dtype=float32 at 1.000" in line and "scores higher than attn-paper-a at 0.167" in line
               for line in text), text
    assert "deterministic-walk: no claim about few (fewer than 3 seeds)." in text
    assert "random-walk: attn-paper-a at 0.500 (0.486–0.514) matches the Bayes optimum 0.500 (equivalent within " \
           "±0.02, TOST at 5%)." in text


def test_oracles_and_untrained_baselines_get_no_claims():
    recs = (seeds(3, [0.5, 0.5, 0.5], model="bayes-optimal", train={**GD_NONE})
            + seeds(3, [0.17, 0.16, 0.18], model="uniform", train={**GD_NONE}))
    board = build(recs)
    cells = {c.row.model: c for c in board.cells.values()}
    assert notes.versus_bayes(cells["bayes-optimal"]) is None and notes.versus_untrained(cells["uniform"]) is None
    assert not any("bayes-optimal" in line for line in notes.findings(board))
    assert not cells["bayes-optimal"].best and not cells["uniform"].best  # reference rows are never bold


def test_protocol_states_seeds_coverage_lr_selection_and_failures():
    grid = {"optimizer": "adam", "lr": 0.01, "steps": 50, "batch_size": 0, "lr_grid": [0.01, 0.1]}
    recs = seeds(2, [0.5, 0.5], train=grid) + [record(seed=2, train=grid, error="RuntimeError: boom")]
    lines = notes.protocol(build(recs))
    assert "Seeds: 0,1 in every cell." in lines
    assert any("picks its learning rate per run from {0.01, 0.1} by validation accuracy" in line for line in lines)
    assert any(line.startswith("1 of 3 runs failed") for line in lines)
    coverage = next(line for line in notes.method() if line.startswith("Coverage of the nominal 95% interval"))
    for entry in stats.coverage_table():
        assert f"{entry.rate:.1%} (n={entry.seeds})" in coverage


def test_null_metrics_are_left_out_not_averaged():
    recs = seeds(2, [0.5, 0.5], diagnostics={"svm_correlation": 0.9})
    recs[1]["metrics"]["svm_correlation"] = None  # a non-finite diagnostic is written as null
    recs[1]["curve"]["accuracy"][0] = None
    (cell,) = build(recs).cells.values()
    assert cell.metrics["svm_correlation"].n == 1 and cell.untrained is None
    assert notes.versus_untrained(cell) is None


def test_loss_metrics_are_columns_and_excess_loss_carries_its_standard_error():
    losses = {"loss": 0.8, "bayes_loss": 0.69, "excess_loss": 0.11, "excess_loss_se": 0.01}
    board = build(seeds(3, [0.5, 0.5, 0.5], diagnostics=losses))
    (cell,) = board.cells.values()
    detail = detail_table(board, board.columns[0])
    assert {"loss", "bayes_loss", "excess_loss", "excess_loss_se"} <= set(detail.headers)
    excess = cell.metrics["excess_loss"]
    assert excess.mean == pytest.approx(0.11)
    assert excess.width == pytest.approx(2 * 1.959964 * 0.01 / 3 ** 0.5, rel=1e-4)  # the standard error, as a floor
    assert cell.metrics["loss"].width == 0.0  # no known evaluation error for a plain loss: seeds alone


def test_a_section_from_several_devices_says_how_many_records_each_made():
    recs = seeds(3, [0.5, 0.6, 0.7])
    assert "on cpu." in notes.provenance(build(recs))  # one device: named, no counts
    recs[2]["provenance"]["device"] = "cuda (NVIDIA H200)"
    for line in (notes.provenance(build(recs)), notes.provenance_summary(build(recs))):
        assert "on cpu (2 records), cuda (NVIDIA H200) (1 record)." in line


def test_the_detail_table_says_how_many_seeds_solved_their_task_where_they_trained_to_a_target():
    untargeted = build(seeds(2, [0.5, 0.6]))
    assert "solved (stopped at the target)" not in detail_table(untargeted, untargeted.columns[0]).headers
    train = {**GD_TARGET, "steps": 10000}
    recs = seeds(3, [0.99, 0.98, 0.7], train=train)
    for rec, why in zip(recs, ("target", "target", "cap")):
        rec["train"]["stopped_because"] = why
    board = build(recs)
    (cell,) = board.cells.values()
    assert cell.solved == (2, 3)
    detail = detail_table(board, board.columns[0])
    column = detail.headers.index("solved (stopped at the target)")
    assert detail.rows[0][column] == "2/3"


def test_sizes_from_the_records_show_per_row_in_the_detail_tables_and_sort_by_number():
    recs = ladder("random-walk", "gru", [0.6, 0.7]) + ladder("random-walk", "attn-rope", [0.5, 0.6])
    for rec in recs:  # a recurrent model with a fixed state; attention's grows with the context
        vocab = rec["params"]["task"]["K"]
        rec["size"] = ({"parameters": 100 * vocab, "state": 64} if rec["model"] == "gru"
                       else {"parameters": 1500, "state": None})
    board = build(recs)
    (first_rung,) = [column for column in board.columns if column.params["K"] == 4]
    detail = detail_table(board, first_rung)
    assert detail.headers[:3] == ["model", "parameters", "state"]
    cells = {row[0]: row[1:3] for row in detail.rows}
    assert [number_text(n) for n in cells["gru"]] == ["400", "64"]
    assert [number_text(n) for n in cells["attn-rope"]] == ["1.5k", ""]
    assert cells["attn-rope"][0].value == 1500  # what the page sorts by, not the text
    assert any(note.startswith("parameters: the model's trainable parameters") for note in detail.notes)
    # the score table has no room for them before Overall on an 800 px page
    assert "parameters" not in score_table(build_scores(board)).headers


@pytest.mark.parametrize(("counts", "text"), [
    ([960], "960"), ([960, 1090], "960-1.09k"), ([999_999], "1M"), ([999_500, 1_000_000], "1M"),
    ([12_345, 2_500_000_000], "12.3k-2.5G"), ([], "")])
def test_counts_read_to_three_digits_with_the_suffix_of_the_rounded_value(counts, text):
    assert count_range(counts) == text


def test_records_without_sizes_add_no_size_columns():
    board = build(ladder("random-walk", "gru", [0.6, 0.7]))
    assert "parameters" not in score_table(build_scores(board)).headers
    assert "parameters" not in detail_table(board, board.columns[0]).headers


# ---- the review's findings: bold needs a floor, the right error floors, no claim without one ---------------------

FRUIT = {"items": 5, "train_size": 1000, "val_size": 1000, "test_size": 1000}


def _fruit(accuracies: list[float], model: str = "attn-paper-a", **kwargs) -> list[dict]:
    return seeds(3, accuracies, task="qa-fruit-preference", task_params=FRUIT, bayes=1.0, model=model, **kwargs)


def test_bold_without_a_baseline_is_tested_against_the_seeds_chance_accuracy_and_without_either_nothing_is_bold():
    """qa-fruit-preference was published with both rows bold at 0.515 and no floor tested: no longer."""
    near = _fruit([0.51, 0.515, 0.52]) + _fruit([0.51, 0.515, 0.52], model="other")
    table = main_table(build(near))  # no baseline, no chance accuracy: no floor
    assert not any(row[1].best for row in table.rows)
    assert ("No floor, so nothing bold, in qa-fruit-preference: no baseline has a score there and the records carry "
            "no chance accuracy.") in table.notes
    # 0.515 on 1000 sequences is not shown above a chance accuracy of 0.5: still nothing bold, and no note
    table = main_table(build(_chance(near, 0.5)))
    assert not any(row[1].best for row in table.rows) and not any("no floor" in note for note in table.notes)
    far = _chance(_fruit([0.9, 0.91, 0.9]) + _fruit([0.51, 0.515, 0.52], model="other"), 0.5)
    assert [row[1].best for row in main_table(build(far)).rows] == [True, False]


def test_bold_is_tested_against_every_baseline_of_the_column_a_tasks_own_floor_too():
    """One rule for both tables: a task's own baseline (family ``baseline``) is a floor in the accuracy table too."""
    own = {"model_family": "baseline"}
    recs = (seeds(3, [0.9, 0.91, 0.9], task_params=DET, bayes=1.0)
            + seeds(3, [0.9, 0.9, 0.9], task_params=DET, bayes=1.0, model="context-guess", meta=own, train=GD_NONE))
    assert not any(cell.best for cell in build(recs).cells.values())  # not shown above context-guess
    rule = notes.bold_rule()
    assert rule in notes.method() and rule in notes.score_method()
    from tokbench.leaderboard.document import Paragraph, document
    from tokbench.leaderboard.report import build_reports
    from leaderboard_synth import sections
    blocks = document(build_reports(sections(recs)))
    assert any(isinstance(b, Paragraph) and b.text.startswith("Mean accuracy over seeds") and rule in b.text
               for b in blocks)
    from pathlib import Path
    assert rule in (Path(__file__).resolve().parents[1] / "docs" / "scores.md").read_text(encoding="utf-8")


def test_stays_at_untrained_uses_the_error_of_the_one_batch_the_step_0_accuracy_was_measured_on():
    big = {**DET, "train_size": 100000, "test_size": 100000}
    flat = [0.167, 0.168, 0.166, 0.167, 0.167]
    full = build(seeds(5, flat, task_params=big, bayes=1.0, untrained=0.167))
    (cell,) = full.cells.values()
    assert cell.untrained_examples() == 100000 and notes.versus_untrained(cell).verdict == "matches"
    batch = {**GD, "batch_size": 16}  # step 0 is the accuracy on 16 sequences: it cannot be told within +-0.02
    small = build(seeds(5, flat, task_params=big, bayes=1.0, untrained=0.167, train=batch))
    (cell,) = small.cells.values()
    assert cell.untrained_examples() == 16
    assert notes.versus_untrained(cell).verdict == "undecided"
    assert cell.untrained.width > 0.1  # and its interval says so
    assert not any("stays at its untrained accuracy" in line for line in notes.findings(small))
    fresh = build(seeds(3, flat[:3], task_params={**big, "train_size": 8}, train={**batch, "data": "fresh"}))
    assert next(iter(fresh.cells.values())).untrained_examples() == 16  # fresh draws: the batch, not the split


def test_an_evaluation_set_of_unknown_size_gives_no_interval_and_no_claim():
    """scc-implicit-bias declares no train_size: it showed 1.000 (1.000-1.000) and its comparisons had verdicts."""
    scc = {"task": "scc-implicit-bias", "task_params": {"n": 4}, "eval_split": "train", "bayes": 0.25}
    recs = seeds(3, [1.0, 1.0, 1.0], untrained=0.2, **scc) + seeds(3, [1.0, 1.0, 1.0], model="other", **scc)
    board = build(recs)
    cell = board.column_cells(board.columns[0])[0]
    assert cell.accuracy.interval is None and cell.accuracy.n == 3
    assert measure_text(training_table(board).rows[0][1]) == "1.000 (n=3)"
    assert notes.versus_untrained(cell).verdict is None and notes.versus_untrained(cell).low is None
    assert not any(c.best for c in board.cells.values())
    assert stats.differs([1.0] * 3, None, [0.5] * 3, 0.0) is None
    assert stats.compare([1.0] * 3, [0.5] * 3, None).verdict is None
    assert stats.weighted_sum([stats.Part(1.0, [1.0] * 3, None)]).stat().interval is None
    assert any("no interval, and no claim is made" in line for line in notes.method())


def test_findings_say_when_only_baselines_were_tested_and_what_n_left_a_test_undecided():
    walk = {**WALK, "test_size": 1000}
    recs = (seeds(3, [0.3, 0.31, 0.29], model="uniform", train=GD_NONE, task_params=walk)
            + seeds(3, [0.4, 0.41, 0.39], model="last-token", train=GD_NONE, task_params=walk))
    lines = notes.findings(build(recs))
    assert ("random-walk: every model tested (baselines only: no learned model was run) is below the Bayes optimum "
            "0.500 (95% interval of the difference below 0).") in lines
    close = seeds(3, [0.49, 0.51, 0.47], task_params=walk)
    (line,) = [line for line in notes.findings(build(close)) if "neither shown" in line]
    assert line.endswith("(undecided at n = 3).") and "more seeds would decide" not in line


def test_a_task_the_last_token_baseline_solves_states_the_bound_the_test_gives():
    walk = {**WALK, "test_size": 1000}
    recs = seeds(5, [0.5, 0.5, 0.5, 0.5, 0.5], model="last-token", train=GD_NONE, task_params=walk)
    (line,) = notes.unranked(build(recs))
    versus = notes.versus_bayes(build(recs).column_cells(build(recs).columns[0])[0])
    assert versus.verdict == "matches"
    assert (f"so no model can score more than {-versus.low:.3f} above it in expectation (the upper end of the 95% "
            "interval of the optimum minus the baseline).") in line
    assert "above a count of next tokens" not in line


def test_the_method_states_the_multiplicity_and_the_coverage_adaptive_seeds_lack():
    for text in ("\n".join(notes.method()), notes.score_method()):
        assert "uncorrected for the number of claims on the page" in text
        assert "--target-ci" in text and "may cover less" in text
