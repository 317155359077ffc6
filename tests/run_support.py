"""Small suites and helpers shared by the ``tokbench run`` tests."""
from __future__ import annotations

from pathlib import Path

# 3 models x 2 seeds on a short random walk, 3 optimiser steps: a whole grid in a few seconds.
TINY_SUITE = """
seeds = 2
[[grid]]
tasks = ["random-walk"]
models = ["attn-paper-a", "attn-nope", "last-token"]
[grid.task.random-walk]
context_length = 8
train_size = 32
val_size = 16
test_size = 32
[grid.model.attn-paper-a]
position_dim = 16
[grid.train]
steps = 3
"""


def write_suite(folder: Path, text: str = TINY_SUITE, name: str = "tiny.toml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def record_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"))
