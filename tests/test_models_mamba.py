"""Mamba's paper result, selective copying (Gu & Dao 2023, arXiv:2312.00752, Sec. 4.1.1 and Table 1), at a CPU size.

The paper trains 2-layer models of width D = 64 on sequences of 4096 with 16 data tokens (vocabulary 16, noise
included) for 400K steps; a Mamba block with its selective SSM (S6) reaches 99.8%. That length and training need a GPU
(the tokbench-scale suite's selective copying at 256 and 512). Here the same model (2 blocks, D = 64, the plugin's
d_state 16 and expansion 2) on the selective-copy task at T = 32 with 4 data tokens (vocabulary 16), fresh sequences
of batch 64, stopped once validation accuracy reaches 0.99.
"""
from __future__ import annotations

import pytest

from tokbench.harness import run_pairing
from tokbench.plugins import registry

pytestmark = pytest.mark.slow


def test_mamba_solves_selective_copying():
    """The bar, 0.97, is the paper's 99.8% less what one seed of a short run may miss. Measured at seed 0 on one
    thread (2026-12-07): 0.992 at step 1400 with the recipe's rate (1e-3), 0.996 at step 500 with 3e-3, and with
    the rate here, 4e-3 (the suite's x 4 candidate), 0.996 at step 400 in 43 s of CPU. At this size the contrast of
    Table 1 does not show: H3 (its plugin, D = 64, 3e-3) reaches 0.991 by step 1400 too; the paper's 57% for H3 is at
    a context 128 times as long."""
    task = registry().task("selective-copy").create({"vocab_size": 16, "context_length": 32, "num_tokens_to_copy": 4,
                                                     "train_size": 2000, "val_size": 500, "test_size": 1000})
    spec = registry().model("mamba")
    recipe = spec.recipe.override({"lr": 4e-3, "steps": 2000, "batch_size": 64, "data": "fresh", "target": 0.99,
                                   "eval_every": 100})
    result = run_pairing(task, spec, spec.resolve({"d": 64}), recipe, seed=0, accelerator="cpu")
    assert result.metrics["accuracy"] >= 0.97, result.metrics["accuracy"]
