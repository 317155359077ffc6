"""The conformance kit checks everything a record reports: the Bayes log-probabilities (shape, normalised rows,
consistent with bayes_accuracy and bayes_loss), every metric's declared range; and the oracle is a spec flag."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

from tokbench.harness import run_pairing
from tokbench.leaderboard.aggregate import build
from tokbench.plugins import registry
from tokbench.testing import check_bayes_log_probs, check_metric

from leaderboard_synth import record

sys.path.insert(0, str(Path(__file__).parent / "fake_plugins"))
import contract_v2  # noqa: E402
from contract_v2_impl import PreviousToken  # noqa: E402


class Unnormalised(PreviousToken):
    """Log-probabilities whose rows sum to 2 in probability."""

    def bayes_log_probs(self, tokens):
        return super().bayes_log_probs(tokens).clamp(min=-1e9).exp().mul(2).log()


class WrongShape(PreviousToken):
    def bayes_log_probs(self, tokens):
        return super().bayes_log_probs(tokens)[:, -1]


class NegativeLoss(PreviousToken):
    def bayes_loss(self):
        return -5.0


class Noisy(PreviousToken):
    """A genuinely uncertain predictor: uniform over the vocabulary, which is not what bayes_accuracy() = 1 says."""

    def bayes_log_probs(self, tokens):
        return torch.full((*tokens.shape, self.vocab_size), -math.log(self.vocab_size))


def _sample(cls):
    task = cls(contract_v2.PREVIOUS_TOKEN, contract_v2.PREVIOUS_TOKEN.resolve())
    return task, task.generate(2000, torch.Generator().manual_seed(0))


def test_a_task_that_is_right_passes():
    check_bayes_log_probs(*_sample(PreviousToken))  # -inf for the impossible tokens is allowed


@pytest.mark.parametrize("cls, says", [(Unnormalised, "sum to"), (WrongShape, "shape"), (NegativeLoss, "bayes_loss"),
                                       (Noisy, "accuracy")])
def test_the_kit_rejects_wrong_bayes_log_probs(cls, says):
    with pytest.raises(AssertionError, match=says):
        check_bayes_log_probs(*_sample(cls))


@pytest.mark.parametrize("name, value", [("first_attention", 1.5), ("value_correlation", -1.2), ("loss", -0.1),
                                         ("excess_loss_se", -1e-3), ("agree_copy", 1.01), ("val_accuracy", math.nan)])
def test_a_metric_outside_its_declared_range_is_rejected(name, value):
    with pytest.raises(AssertionError, match=name):
        check_metric(name, value)


def test_metrics_within_their_ranges_pass():
    for name, value in (("first_attention", 1.0), ("value_correlation", -1.0), ("excess_loss", -0.01),
                        ("normalized_accuracy", 1.02)):
        check_metric(name, value)


def test_the_oracle_is_a_spec_flag_and_reports_the_bayes_log_probabilities():
    reg = registry()
    assert reg.model("bayes-optimal").oracle and not reg.model("uniform").oracle
    task = reg.task("icl-markov").create({"train_size": 64, "val_size": 64, "test_size": 256})
    spec = reg.model("bayes-optimal")
    metrics = run_pairing(task, spec, spec.resolve(), spec.recipe, seed=0, accelerator="cpu").metrics
    assert metrics["bayes_loss"] > 0 and metrics["loss"] == pytest.approx(metrics["bayes_loss"], abs=1e-9)
    assert metrics["excess_loss"] == pytest.approx(0.0, abs=1e-9)


def test_the_leaderboard_reads_the_oracle_flag_from_the_record():
    flagged = record(model="my-reference", meta={"model_oracle": True})
    plain = record(model="bayes-optimal", meta={"model_oracle": False}, seed=1)
    legacy = record(model="bayes-optimal", seed=2, model_params={"other": 1})  # written before the flag: by name
    rows = {(r.model, r.params.get("other")): r.oracle for r in build([flagged, plain, legacy]).rows}
    assert rows == {("my-reference", None): True, ("bayes-optimal", None): False, ("bayes-optimal", 1): True}


def test_the_kit_fails_a_spec_that_refuses_its_own_example():
    """A range end or choice on its own may be ruled out (skipped); a spec's own ``examples`` may not."""
    from tokbench.errors import UsageError
    from tokbench.testing import _refused

    spec = registry().task("mqar")
    example = dict(spec.examples[0])
    with pytest.raises(AssertionError, match="refuses its own example"):
        _refused(spec, example, UsageError("no data can be drawn"))
    _refused(spec, {"num_kv_pairs": 1000}, UsageError("more pairs than the context holds"))  # not an example: fine
