"""Mamba's CPU scan (tokbench_models.scan) computes mambapy's parallel scan's function, with its gradients.

Tolerances: float64 gradients against finite differences (torch.autograd.gradcheck's defaults); float32 outputs
and gradients against mambapy's scan within 1e-5 relative to the largest value (measured: at most 3e-7).
"""
from __future__ import annotations

import pytest
import torch
from mambapy.mamba import MambaBlock
from mambapy.pscan import pscan

from tokbench.plugins import registry
from tokbench_models import scan
from tokbench_models.scan import selective_scan

TOLERANCE = 1e-5


def parallel(x, delta, A, B, C, D):
    """mambapy's own selective scan (MambaBlock.selective_scan without the block)."""
    states = pscan(torch.exp(delta.unsqueeze(-1) * A), delta.unsqueeze(-1) * B.unsqueeze(2) * x.unsqueeze(-1))
    return (states @ C.unsqueeze(-1)).squeeze(3) + D * x


def inputs(n, T, E, N, dtype, seed=0):
    generator = torch.Generator().manual_seed(seed)

    def draw(*shape):
        return torch.randn(*shape, dtype=dtype, generator=generator)
    tensors = (draw(n, T, E), torch.nn.functional.softplus(draw(n, T, E)), -4 * torch.rand(E, N, dtype=dtype,
               generator=generator), draw(n, T, N), draw(n, T, N), draw(E))
    return tuple(t.requires_grad_() for t in tensors)


def close(a, b):
    return (a - b).abs().max().item() <= TOLERANCE * max(1.0, b.abs().max().item())


def test_the_hand_written_backward_matches_finite_differences():
    assert torch.autograd.gradcheck(selective_scan, inputs(2, 7, 3, 4, torch.float64))


@pytest.mark.parametrize("shape", [(4, 16, 8, 4), (3, 33, 16, 16)])
def test_the_scan_equals_mambapys_parallel_scan_with_its_gradients(shape):
    tensors = inputs(*shape, torch.float32)
    ours, theirs = selective_scan(*tensors), parallel(*tensors)
    assert close(ours, theirs)
    weights = torch.randn_like(theirs)
    for mine, reference in zip(torch.autograd.grad((ours * weights).sum(), tensors),
                               torch.autograd.grad((theirs * weights).sum(), tensors)):
        assert close(mine, reference)


def test_the_mamba_model_scans_on_the_cpu_with_its_own_parameters_and_mambapys_result(monkeypatch):
    task = registry().task("mqar").create({"vocab_size": 32, "context_length": 16, "num_kv_pairs": 2,
                                           "num_queries": 2})
    spec = registry().model("mamba")
    torch.manual_seed(0)
    model = spec.build(spec.resolve({"d": 16}), task)
    tokens = task.make_split("train", 0).tokens[:8]
    calls = []
    monkeypatch.setattr("tokbench_models.mamba.selective_scan", lambda *a: calls.append(1) or selective_scan(*a))
    ours = model(tokens).logits
    assert len(calls) == len(model.backbone.layers)
    grads = torch.autograd.grad(ours.square().sum(), list(model.parameters()))
    monkeypatch.setattr("tokbench_models.mamba.usable", lambda x: False)  # mambapy's parallel scan
    theirs = model(tokens).logits
    assert len(calls) == len(model.backbone.layers)
    reference = torch.autograd.grad(theirs.square().sum(), list(model.parameters()))
    assert all(isinstance(layer.mixer, MambaBlock) for layer in model.backbone.layers)
    assert close(ours, theirs) and not torch.equal(ours, theirs)  # computed another way, to rounding
    assert all(close(a, b) for a, b in zip(grads, reference))


def test_a_vmapped_stack_keeps_mambapys_scan():
    seen = []

    def probe(x):
        seen.append(scan.usable(x))
        return x.sum()
    torch.vmap(probe)(torch.zeros(2, 3))
    assert seen == [False] and scan.usable(torch.zeros(2))
