"""The conformance kit checks what the leaderboard rests on: the Bayes optimum and log-probabilities at every
declared setting, causality of models that predict at every position, the contract declaration; and it checks a
plugin against the built-ins and itself, whatever else is installed."""
from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from tokbench.plugins import registry
from tokbench.testing import check_bayes_log_probs, check_causal, check_contract

sys.path.insert(0, str(Path(__file__).parent / "fake_plugins"))
import contract_v1  # noqa: E402
import kit_faults  # noqa: E402

KIT = '''
from tokbench.testing import ModelConformance, TaskConformance


class TestNoisyCopy(TaskConformance):
    tasks = ["noisy-copy"]


class TestPeeking(ModelConformance):
    models = ["peeking"]
'''


def _sample(params):
    task = kit_faults.NOISY_COPY.create(params)
    return task, task.generate(2000, torch.Generator().manual_seed(0))


def test_bayes_log_probs_wrong_only_at_a_declared_setting_are_caught_there():
    check_bayes_log_probs(*_sample({}))
    with pytest.raises(AssertionError, match="sum to"):
        check_bayes_log_probs(*_sample({"noise": 1.0, "V": 8}))


def test_a_model_that_reads_future_tokens_is_caught_and_a_causal_one_passes():
    task = registry().task("icl-markov").create({"train_size": 16, "val_size": 16, "test_size": 16})
    with pytest.raises(AssertionError, match="reads future tokens"):
        check_causal(kit_faults.PEEKING.build({}, task), task)
    spec = registry().model("transformer")
    torch.manual_seed(0)
    check_causal(spec.build(spec.resolve(), task), task)


def test_a_spec_of_a_plugin_without_a_contract_declaration_fails():
    check_contract(registry().model("attn-rope"))
    with pytest.raises(AssertionError, match="TOKBENCH_CONTRACT = 2"):
        check_contract(replace(contract_v1.ONE_QUERY, contract=1))


def _kit(tmp_path, env, *args):
    (tmp_path / "kit").mkdir()
    (tmp_path / "kit" / "test_kit.py").write_text(KIT)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args, "test_kit.py"],
                          cwd=tmp_path / "kit", env=env, capture_output=True, text=True, timeout=600)


def test_the_kit_fails_the_plugin_where_the_leaderboard_would_be_wrong(plugin_site, tmp_path):
    import os

    env = {**os.environ, **plugin_site(faults="kit_faults")}
    result = _kit(tmp_path, env, "-k", "bayes_log_probs or causal or contract", "-rf")
    failed = {line.split()[1].partition("::")[2] for line in result.stdout.splitlines() if line.startswith("FAILED")}
    assert "TestNoisyCopy::test_bayes_log_probs_are_normalised_and_consistent[noisy-copy]" in failed, result.stdout
    assert "bayes_log_probs at {'noise': 1.0}: scored rows sum to" in result.stdout
    assert "TestPeeking::test_predictions_are_causal[icl-markov-peeking]" in failed
    assert not any("contract" in name for name in failed)


def test_the_kit_checks_a_plugin_against_the_built_ins_and_itself_only(plugin_site, tmp_path):
    import os

    env = {**os.environ, **plugin_site(faults="kit_faults", dup="duplicate_model", one="shared_model",
                                       two="shared_model_twin")}
    result = _kit(tmp_path, env, "--collect-only")
    assert result.returncode == 0, result.stdout[-3000:]
    ids = result.stdout
    assert "test_one_training_step_with_every_model[noisy-copy-peeking]" in ids
    assert "test_one_training_step_with_every_model[noisy-copy-transformer]" in ids
    assert "dup:linear-attention" not in ids and "shared-guess" not in ids  # other plugins only on request
    assert "test_forward_on_every_task[noisy-copy-peeking]" in ids and "[mqar-peeking]" in ids
