"""The label law that validation by expected accuracy reads: kept at the scored positions only, in bounded chunks."""
from __future__ import annotations

import torch

from tokbench import harness
from tokbench.metrics import expected_accuracy
from tokbench.plugins import registry
from tokbench.specs import Recipe


def _dense(task, split):
    return expected_accuracy(task.bayes_predict(split.tokens), task.bayes_log_probs(split.tokens).double().exp(),
                             split.labels)


def test_the_compact_law_gives_the_dense_laws_expected_accuracy_in_chunks_of_bounded_size(monkeypatch):
    task = registry().task("icl-markov").create({"context_length": 16, "states": 3, "val_size": 50})
    val = task.make_split("val", 0)
    monkeypatch.setattr(harness, "LAW_BUDGET", 16 * 3 * 7)  # 7 sequences a chunk: the last chunk is shorter
    law = harness.validation_law(task, val, Recipe(validate_by="expected"))
    assert law.probs.shape == (50, 16, 3)
    assert torch.equal(law.expected(task.bayes_predict(val.tokens), 0), _dense(task, val))


def test_a_task_scored_at_a_few_positions_keeps_only_those_rows():
    task = registry().task("mqar").create({"vocab_size": 256, "context_length": 64, "num_kv_pairs": 4,
                                           "num_queries": 4, "val_size": 40})
    val = task.make_split("val", 0)
    law = harness.validation_law(task, val, Recipe(validate_by="expected"))
    assert law.probs.shape == (40, 4, 256) and bool(law.scored.all())
    predictions = task.bayes_predict(val.tokens)
    assert torch.equal(law.expected(predictions, 0), _dense(task, val))
    wrong = torch.where(val.labels >= 0, (predictions + 1) % 256, predictions)
    assert law.expected(wrong, 0).sum().item() == 0.0
    assert harness.oracle_accuracy(task, val, law) == 1.0


def test_evaluation_passes_bound_the_logits_of_long_contexts_and_large_vocabularies():
    task = registry().task("mqar").create({"vocab_size": 8192, "context_length": 512, "num_kv_pairs": 64,
                                           "num_queries": 64, "val_size": 8, "train_size": 8, "test_size": 8})
    spec = registry().model("transformer-2l")
    model = spec.build(spec.resolve({"d": 8, "heads": 1}), task)
    assert harness._logit_chunk(model, 512) * 512 * 8192 <= harness.LOGIT_BUDGET  # 64 sequences a pass, not 8192
    small = registry().task("mqar").create({"vocab_size": 256, "context_length": 64})
    assert harness._logit_chunk(spec.build(spec.resolve({}), small), 64) == harness.EVAL_CHUNK
