"""Replicas of a model stacked with torch.func (``stack_module_state`` + ``functional_call`` + ``vmap``) compute what
each copy computes alone: the forward and the gradients.

Checked with the registered defaults on a task scored at every position and one scored at the last. Not
vmap-compatible today, for reasons outside these models' own code: ``gru`` and ``lstm`` (``aten::gru``/``lstm``
have no batching rule), ``mamba`` (mambapy's parallel scan is an autograd Function without a vmap rule; its
sequential mode, ``pscan=False``, runs under vmap), ``attn-paper-a`` and ``attn-paper-b`` (an in-place
``scatter_add_`` into an unbatched tensor), the ``uniform`` baseline (random draws: vmap needs
``randomness="different"``) and ``bayes-optimal`` (data-dependent control flow); docs/models.md.
"""
from __future__ import annotations

import copy

import pytest
import torch
from torch.func import functional_call, grad, stack_module_state, vmap

from tokbench.plugins import registry
from tokbench_models.h3 import ShiftSSM

STACKED = ("gla", "h3", "transformer", "transformer-2l", "transformer-1l-tied", "linear-attention", "mlp",
           "attn-nope", "attn-rope", "attn-alibi", "attn-t5bias", "attn-onehot-concat-zeroinit")


@pytest.fixture(scope="module", params=["mqar", "random-walk"])
def task(request):
    if request.param == "mqar":
        return registry().task("mqar").create({"vocab_size": 32, "num_kv_pairs": 2, "num_queries": 2,
                                               "context_length": 20, "train_size": 6})
    return registry().task("random-walk").create({"K": 5, "context_length": 12, "train_size": 6})


@pytest.mark.parametrize("name", STACKED)
def test_two_stacked_replicas_equal_two_separate_models(task, name):
    _assert_stacked_equals_separate(task, name)


def test_h3_gpu_form_stacked_equals_separate(task, monkeypatch):
    """H3's shift SSM takes a depthwise conv1d on a GPU and its Toeplitz matmul on a CPU (the test above): the
    GPU's form under vmap, run here on the CPU."""
    monkeypatch.setattr(ShiftSSM, "toeplitz", ShiftSSM.convolution)
    _assert_stacked_equals_separate(task, "h3")


def _assert_stacked_equals_separate(task, name: str) -> None:
    spec = registry().model(name)
    torch.manual_seed(0)
    replicas = [spec.build(spec.resolve(), task) for _ in range(2)]
    params, buffers = stack_module_state(replicas)
    base = copy.deepcopy(replicas[0])  # a real copy, not "meta": .to("meta") unties transformer-1l-tied's weights
    tokens = torch.stack([task.make_split("train", seed).tokens for seed in (0, 1)])  # each replica its own data

    def logits(p, b, x):
        return functional_call(base, (p, b), (x,)).logits

    def loss(p, b, x):
        return logits(p, b, x).square().mean()

    stacked = vmap(logits)(params, buffers, tokens)
    alone = torch.stack([model(x).logits for model, x in zip(replicas, tokens)])
    torch.testing.assert_close(stacked, alone, atol=1e-5, rtol=1e-4)
    gradients = vmap(grad(loss))(params, buffers, tokens)
    for i, (model, x) in enumerate(zip(replicas, tokens)):
        model.zero_grad()
        model(x).logits.square().mean().backward()
        for key, parameter in model.named_parameters():
            torch.testing.assert_close(gradients[key][i], parameter.grad, atol=1e-6, rtol=1e-4, msg=f"{name}: {key}")
