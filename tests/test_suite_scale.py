"""The tokbench-scale suite: Zoology's accuracy-against-width grid, planned for every architecture of the ranking."""
from __future__ import annotations

from collections import defaultdict

from tokbench.cli import main
from tokbench.grid import expand
from tokbench.plugins import registry
from tokbench.suites import load_suite


def test_every_architecture_is_planned_at_three_widths_and_four_contexts_up_to_512():
    suite = load_suite("tokbench-scale")
    ranked = set(load_suite("tokbench").blocks[0].models) - {"last-token", "uniform", "context-guess", "bayes-optimal"}
    grid: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for pairing in expand(suite, registry()):
        if pairing.task_spec.name != "mqar":
            continue
        width = pairing.model_params.get("d", pairing.model_params.get("width"))
        grid[pairing.model_spec.name].add((width, pairing.task_params["context_length"]))
    assert ranked <= set(grid)
    for model in ranked - {"mlp"}:  # the MLP has no width to vary: its layer grows with T x V
        widths = {w for w, _ in grid[model]}
        lengths = {t for _, t in grid[model]}
        assert widths == {64, 128, 256} and lengths == {64, 128, 256, 512}, model
        assert len(grid[model]) == 12, model


def test_the_width_blocks_differ_only_in_width():
    blocks = [block for block in load_suite("tokbench-scale").blocks if block.tasks == ("mqar",)]
    assert [block.model_params["*"]["d"] for block in blocks] == [64, 128, 256]
    first = blocks[0]
    for block in blocks[1:]:
        assert (block.tasks, block.models, block.train, block.sweep, block.ladders, block.task_params) == (
            first.tasks, first.models, first.train, first.sweep, first.ladders, first.task_params)
        assert {k: v for k, v in block.model_params["*"].items() if k not in ("d", "hidden")} == {}


def test_dry_run_lists_the_scale_suite(tmp_path, capsys):
    assert main(["run", "--suite", "tokbench-scale", "--dry-run", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "ladder  mqar: context_length 64 -> 128 -> 256 -> 512" in out
    assert all(f"d={width} context_length=512" in out for width in (64, 128, 256))


def test_the_long_context_block_reaches_selective_copying_at_256_and_sparse_selection_at_n_128():
    longest: dict[str, int] = defaultdict(int)
    for pairing in expand(load_suite("tokbench-scale"), registry(), tasks=["selective-copy", "sparse-selection"]):
        params = pairing.task_params
        longest[pairing.task_spec.name] = max(longest[pairing.task_spec.name],
                                              params.get("num_tokens") or params["context_length"])
    assert longest["selective-copy"] >= 512 and longest["sparse-selection"] >= 256
