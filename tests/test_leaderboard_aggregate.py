"""Aggregation of run records: grouping, intervals, failures, labels, best marks and the rule-based findings."""
from __future__ import annotations

import pytest
from scipy import stats

from leaderboard_synth import WALK, record, seeds
from tokbench.errors import UsageError
from tokbench.leaderboard import notes
from tokbench.leaderboard.aggregate import build, summarise
from tokbench.leaderboard.views import Measure, detail_table, main_table, measure_text

DET = {"K": 6, "laps": 2, "train_size": 100, "val_size": 100, "test_size": 100}


def test_interval_is_students_t_across_seeds():
    values = [0.49, 0.5, 0.47, 0.52]
    stat = summarise(values)
    low, high = stats.t.interval(0.95, len(values) - 1, loc=stats.tmean(values), scale=stats.sem(values))
    assert stat.mean == pytest.approx(sum(values) / 4, abs=1e-15)
    assert (stat.low, stat.high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    assert summarise([0.7, 0.7, 0.7]).half_width == 0.0  # exact arithmetic: no rounding noise
    single = summarise([0.3])
    assert single.half_width is None and measure_text(Measure(single)) == "0.300 (n=1)"


def test_cell_statistics_and_failed_runs_are_counted_not_averaged():
    recs = seeds(3, [0.4, 0.5, 0.6]) + [record(seed=3, error="NonFiniteLossError: loss became nan at step 3")]
    board = build(recs)
    (cell,) = board.cells.values()
    assert cell.seeds == [0, 1, 2] and len(cell.failed) == 1
    assert cell.accuracy.mean == pytest.approx(0.5) and cell.accuracy.n == 3
    assert cell.metrics["normalized_accuracy"].mean == pytest.approx(1.0)
    assert cell.wall_seconds.mean == pytest.approx(2.5)  # 1.5 + seed over seeds 0..2
    assert board.columns[0].bayes.mean == 0.5
    assert measure_text(main_table(board).rows[0][1]) == f"0.500 ± {cell.accuracy.half_width:.3f} [1 failed]"
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


def test_best_per_column_and_bayes_row():
    recs = seeds(2, [0.5, 0.5]) + seeds(2, [0.3, 0.3], model="baseline") + seeds(2, [0.5, 0.5], model="tie")
    table = main_table(build(recs))
    assert [row[0] for row in table.rows] == ["attn-paper-a", "baseline", "tie"]
    assert [row[1].best for row in table.rows] == [True, False, True]
    assert table.footer[0] == "bayes-optimal" and table.footer[1].stat.mean == 0.5
    assert table.notes == ["random-walk: K=6, context_length=8, p=0.5, test_size=100, train_size=100, val_size=100"]


def test_training_set_task_names_its_split_and_diagnostics_stay_absent():
    recs = (seeds(2, [0.9, 1.0], task="scc-implicit-bias", task_params={"n": 4}, eval_split="train", bayes=1.0,
                  diagnostics={"svm_correlation": 0.99})
            + seeds(2, [0.9, 1.0], task="scc-implicit-bias", task_params={"n": 4}, eval_split="train", bayes=1.0,
                    model="other"))
    board = build(recs)
    assert main_table(board).headers == ["model", "scc-implicit-bias (train split)"]
    detail = detail_table(board, board.columns[0])
    column = detail.headers.index("svm_correlation")
    assert [row[column] for row in detail.rows][1] == ""  # absent, never 0
    assert "accuracy (train)" in detail.headers and "test_accuracy" not in detail.headers


def test_no_records_is_a_usage_error():
    with pytest.raises(UsageError, match="no run records"):
        build([])


def test_findings_reach_chance_and_variant_escape():
    float32 = {"dtype": "float32", "positions": "onehot"}
    recs = (seeds(3, [0.49, 0.5, 0.51])
            + seeds(3, [0.165, 0.17, 0.168], task="deterministic-walk", task_params=DET, bayes=1.0, untrained=0.167)
            + seeds(3, [1.0, 1.0, 0.99], task="deterministic-walk", task_params=DET, bayes=1.0, untrained=0.167,
                    model_params=float32)
            + seeds(3, [0.55, 0.6, 0.65], task="deterministic-walk", task_params=DET, bayes=1.0, untrained=0.167,
                    model="midway"))
    board = build(recs)
    det, walk = board.columns
    cells = {c.row.label: c for c in board.column_cells(det)}
    assert notes.at_chance(cells["attn-paper-a"]) and not notes.reaches_bayes(cells["attn-paper-a"])
    assert notes.reaches_bayes(cells["attn-paper-a dtype=float32"])
    assert not notes.at_chance(cells["midway"]) and not notes.reaches_bayes(cells["midway"])
    assert notes.reaches_bayes(board.column_cells(walk)[0])
    text = notes.findings(board)
    assert "deterministic-walk: attn-paper-a (0.168 ± 0.006) stays at chance, closing on average less than 10% of " \
           "the gap from the untrained accuracy to the optimum." in text
    assert any(line.startswith("deterministic-walk: attn-paper-a dtype=float32 reaches the Bayes optimum (")
               and "while attn-paper-a stays at chance" in line for line in text)
    assert "random-walk: attn-paper-a (0.500 ± 0.025) reaches the Bayes-optimal accuracy 0.500 within the 95% " \
           "interval." in text
    gap = notes.gap_closed(cells["attn-paper-a"])
    assert gap.mean == pytest.approx(((0.165 + 0.17 + 0.168) / 3 - 0.167) / (1 - 0.167))


def test_no_model_at_the_optimum_names_the_best():
    board = build(seeds(2, [0.6, 0.62], task_params={**WALK, "p": 0.8}, bayes=0.8))
    (line,) = notes.findings(board)
    assert line.startswith("random-walk: no model reaches the Bayes-optimal accuracy 0.800; the best, attn-paper-a,")
    assert line.endswith("76% of the optimum.")


def test_protocol_states_seeds_recipes_lr_selection_and_failures():
    grid = {"optimizer": "adam", "lr": 0.01, "steps": 50, "batch_size": 0, "lr_grid": [0.01, 0.1]}
    recs = seeds(2, [0.5, 0.5], train=grid) + [record(seed=2, train=grid, error="RuntimeError: boom")]
    lines = notes.protocol(build(recs))
    assert "Seeds: 0,1 in every cell." in lines
    assert any("picks its learning rate per run from 0.01/0.1 by validation accuracy" in line for line in lines)
    assert any(line.startswith("1 of 3 runs failed") for line in lines)
    assert any(line.startswith("Recipe of attn-paper-a: gd, lr 1, 50 steps") for line in lines)


def test_null_metrics_are_left_out_not_averaged():
    recs = seeds(2, [0.5, 0.5], diagnostics={"svm_correlation": 0.9})
    recs[1]["metrics"]["svm_correlation"] = None  # a non-finite diagnostic is written as null
    recs[1]["curve"]["accuracy"][0] = None
    (cell,) = build(recs).cells.values()
    assert cell.metrics["svm_correlation"].n == 1 and cell.untrained is None
    assert notes.gap_closed(cell) is None and not notes.at_chance(cell)


def test_findings_group_models_and_explain_a_training_split_above_the_optimum():
    scc = {"task": "scc-implicit-bias", "task_params": {"n": 6}, "eval_split": "train", "bayes": 0.25}
    recs = [rec for i, model in enumerate(("a", "b", "c", "d"))
            for rec in seeds(3, [0.98, 1.0, 0.99], model=model, diagnostics={"svm_correlation": 0.9 + i / 100}, **scc)]
    recs += seeds(3, [0.2, 0.3, 0.25], model="e", **scc)
    text = notes.findings(build(recs))
    assert text == [
        "scc-implicit-bias (train split): e (0.250 ± 0.124) reaches the Bayes-optimal accuracy 0.250 within the 95% "
        "interval.",
        "scc-implicit-bias (train split): every model except e (0.250 ± 0.124) exceeds the Bayes-optimal accuracy "
        "0.250: on its train split a model can fit the sample beyond the optimum of the distribution.",
        "scc-implicit-bias (train split): largest mean svm_correlation: d (0.930 ± 0.000).",
    ]
