"""Task settings small enough for tests that train through the harness in a fraction of a second."""
from __future__ import annotations

from tokbench.plugins import registry
from tokbench.task import Task


def small_walk() -> Task:
    """[A]'s random walk on a circle of 5 states, 8 tokens, 64 sequences per split."""
    return registry().task("random-walk").create({"K": 5, "context_length": 8, "train_size": 64,
                                                   "val_size": 64, "test_size": 64})


def create_task(name: str, **params) -> Task:
    """The registered task ``name`` created with ``params``."""
    return registry().task(name).create(params)


def small_mqar() -> Task:
    """MQAR with 2 pairs among 16 tokens of a vocabulary of 32."""
    return registry().task("mqar").create({"vocab_size": 32, "context_length": 16, "num_kv_pairs": 2,
                                           "num_queries": 2, "train_size": 128, "val_size": 64, "test_size": 64})
