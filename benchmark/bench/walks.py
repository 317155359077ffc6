"""Benchmark section for [A]: harness vs plain loop, structured vs dense layer, vectorised generation."""
from __future__ import annotations

import random

import torch

from timing import compare
from tokbench.harness import train_model
from tokbench.plugins import registry
from tokbench.seeding import derive_seed
from tokbench_attention.paper_a import dense_forward


def _plain_loop(task, spec, params, recipe, seed, train) -> None:
    """The same maths as the harness, as a bare PyTorch loop."""
    torch.manual_seed(derive_seed(seed, "init"))
    model = spec.build(params, task)
    optimizer = torch.optim.SGD(model.parameters(), lr=recipe.lr)
    for _ in range(recipe.steps):
        loss = model.loss(model(train.tokens), train.labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def _step(model, forward, tokens: torch.Tensor, labels: torch.Tensor) -> None:
    loss = model.loss(forward(tokens), labels)
    model.zero_grad()
    loss.backward()


def _python_loop_walks(n: int, length: int, K: int, p: float, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    walks = []
    for _ in range(n):
        state = rng.randrange(K)
        walk = [state]
        for _ in range(length - 1):
            state = (state + (1 if rng.random() < p else -1)) % K
            walk.append(state)
        walks.append(walk)
    return walks


def run(quick: bool) -> list[tuple[str, float, str]]:
    reg = registry()
    task = reg.task("random-walk").create({})
    spec = reg.model("attn-paper-a")
    params = spec.resolve({})
    repeats = 3 if quick else 5
    rows = []

    steps = 100 if quick else 500
    recipe = spec.recipe.override({"steps": steps})
    train = task.make_split("train", 0)
    t_harness, t_plain = compare(
        lambda: train_model(task, spec, params, recipe, 0, train, None, "cpu"),
        lambda: _plain_loop(task, spec, params, recipe, 0, train),
        repeats,
    )
    rows.append(("harness / plain loop, attn-paper-a, random-walk", t_harness / t_plain,
                 f"{steps} GD steps, n=1000, N=97 (target <= 1.10); plain {t_plain:.2f}s"))

    n_dense = 100 if quick else 250
    model = spec.build(params, task)
    torch.nn.init.normal_(model.W, std=0.01)
    tokens, labels = train.tokens[:n_dense], train.labels[:n_dense]
    t_dense, t_structured = compare(lambda: _step(model, lambda x: dense_forward(model, x), tokens, labels),
                                    lambda: _step(model, model, tokens, labels), repeats)
    rows.append(("structured speed-up over dense [A] layer", t_dense / t_structured,
                 f"one forward+backward, n={n_dense}, N=97, M=1000, float64 (target >= 10)"))

    n_walks = 2000 if quick else 10000
    generator = torch.Generator()
    t_loop, t_vector = compare(lambda: _python_loop_walks(n_walks, 97, 6, 0.5, 0),
                               lambda: task.generate(n_walks, generator.manual_seed(0)), repeats)
    rows.append(("vectorised walk generation speed-up over a Python loop", t_loop / t_vector,
                 f"{n_walks} walks of 97 states"))
    return rows
