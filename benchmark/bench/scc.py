"""Benchmark section for [B]: harness vs plain loop for the layer of [B], and graph-SVM solve times.

    python benchmark/bench/scc.py [--quick]
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from timing import compare, median_seconds  # noqa: E402

from tokbench.harness import train_model  # noqa: E402
from tokbench.optim import make_optimizer  # noqa: E402
from tokbench.plugins import registry  # noqa: E402
from tokbench.seeding import derive_seed  # noqa: E402
from tokbench_scc.svm import solve_graph_svm  # noqa: E402

PAPER_SIZES = {  # [B]'s two settings, with d = 8
    "acyclic": {"variant": "acyclic", "n": 4, "context_length": 6, "K": 8},
    "cyclic": {"variant": "cyclic", "n": 6, "context_length": 4, "K": 6},
}


def _plain_loop(task, spec, params, recipe, seed, train) -> None:
    """The same maths as the harness (model, loss, normalised GD), as a bare PyTorch loop."""
    torch.manual_seed(derive_seed(seed, "init"))
    model = spec.build(params, task)
    optimizer = make_optimizer(recipe, model.parameters())
    for _ in range(recipe.steps):
        loss = model.loss(model(train.tokens), train.labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def run(quick: bool) -> list[tuple[str, float, str]]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # microsecond steps: more intra-op threads only add synchronisation
    try:
        return _rows(quick)
    finally:
        torch.set_num_threads(threads)


def _rows(quick: bool) -> list[tuple[str, float, str]]:
    reg = registry()
    spec = reg.model("attn-paper-b")
    params = spec.resolve({})
    rows = []

    task = reg.task("scc-implicit-bias").create(PAPER_SIZES["cyclic"])
    train = task.make_split("train", 0)
    recipe = spec.recipe  # 4000 normalised GD steps
    t_harness, t_plain = compare(
        lambda: train_model(task, spec, params, recipe, 0, train, None, "cpu"),
        lambda: _plain_loop(task, spec, params, recipe, 0, train),
        2 if quick else 5,
    )
    rows.append(("harness / plain loop, attn-paper-b, scc-implicit-bias", t_harness / t_plain,
                 f"{recipe.steps} NGD steps, n=6, T=4, K=6, d=8, 1 thread (target <= 1.10); "
                 f"harness {t_harness:.2f}s, plain {t_plain:.2f}s"))

    for variant, sizes in PAPER_SIZES.items():
        task = reg.task("scc-implicit-bias").create(sizes)
        split = task.make_split("train", 0)
        torch.manual_seed(0)
        E = spec.build(params, task).E.numpy()
        tokens, labels = split.tokens.numpy(), split.labels.numpy()
        seconds = median_seconds(lambda: solve_graph_svm(tokens, labels, E), 5 if quick else 20)
        rows.append((f"graph-SVM solve seconds, {variant} paper size", seconds,
                     f"n={sizes['n']}, T={sizes['context_length']}, K={sizes['K']}, d=8: {seconds * 1e3:.2f} ms"))
    return rows


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(*row, sep="\t")
