"""The fused GPU kernels of the field's libraries against the models' own pure-PyTorch forms (issue: kernels behind
the model's forward). Each test runs where a CUDA device and the library are there, and is skipped, saying which is
missing, elsewhere: neither library is a dependency of tokbench.

- ``gla``: flash-linear-attention's ``chunk_gla`` (Triton) against the chunkwise form (gla.py);
- ``mamba``: mamba-ssm's ``selective_scan_fn`` (CUDA), through mambapy's ``use_cuda``, against mambapy's parallel scan.

The kernels compute some products in TF32, hence tolerances of 2e-3.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tokbench.plugins import registry
import tokbench_models.gla as gla_module
from tokbench_models.gla import gla_chunked, gla_fused
from tokbench_models.kernels import fused_allowed, optional
from tokbench_models.mamba import SELECTIVE_SCAN

TOLERANCE = {"atol": 2e-3, "rtol": 2e-3}


def require(kernel: tuple[str, str], package: str) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the fused kernels run on a GPU only")
    if optional(*kernel) is None:
        pytest.skip(f"{package} is not installed (pip install {package}); the pure-PyTorch path is used")


def on_both_devices(name: str, **params) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor],
                                                   torch.nn.Module]:
    """The model's logits and the gradient of a loss on its embedding, on the CPU (pure PyTorch) and the GPU, and
    the model."""
    task = registry().task("mqar").create({"vocab_size": 64, "num_kv_pairs": 8, "num_queries": 8,
                                           "context_length": 128, "train_size": 16})
    tokens = task.make_split("train", 0).tokens
    spec = registry().model(name)
    torch.manual_seed(0)
    model = spec.build(spec.resolve(params), task)
    results = []
    for device in ("cpu", "cuda"):
        model.to(device).zero_grad()
        logits = model(tokens.to(device)).logits
        logits.square().mean().backward()
        results.append((logits.detach().cpu(), model.embedding.weight.grad.cpu()))
    return results[0], results[1], model


def test_fused_kernels_are_used_only_on_a_gpu_and_outside_torch_func():
    """Under vmap (replicas stacked) or a grad transform the pure-PyTorch path runs: the kernels have no vmap rule."""
    seen = []

    def probe(y: torch.Tensor) -> torch.Tensor:
        seen.append(fused_allowed(y))
        return y

    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.zeros(2, 3, device=device)
    torch.func.vmap(probe)(x)
    torch.func.grad(lambda y: probe(y).sum())(x)
    assert seen == [False, False] and fused_allowed(x) == (device == "cuda")


def test_gla_kernel_equals_the_chunkwise_form():
    require(("fla.ops.gla", "chunk_gla"), "flash-linear-attention")
    generator = torch.Generator().manual_seed(0)
    q, k, gates = (torch.randn(2, 200, 4, 16, generator=generator) for _ in range(3))
    v = torch.randn(2, 200, 4, 32, generator=generator)
    log_alpha = F.logsigmoid(gates) / 16
    expected = gla_chunked(q, k, v, log_alpha)
    fused = gla_fused(*(x.cuda() for x in (q, k, v, log_alpha))).cpu()
    torch.testing.assert_close(fused, expected, **TOLERANCE)


@pytest.mark.parametrize(("name", "kernel", "package"), [
    ("gla", ("fla.ops.gla", "chunk_gla"), "flash-linear-attention"),
    ("mamba", SELECTIVE_SCAN, "mamba-ssm"),
])
def test_a_model_on_the_gpu_computes_what_it_computes_on_the_cpu(name, kernel, package, monkeypatch):
    require(kernel, package)
    calls = []  # gla's forward looks the kernel up in its module: a spy there sees whether it ran
    monkeypatch.setattr(gla_module, "gla_fused", lambda *args: calls.append(args) or gla_fused(*args))
    (cpu_logits, cpu_grad), (gpu_logits, gpu_grad), model = on_both_devices(name, d=64)
    ran = bool(calls) if name == "gla" else model.backbone.config.use_cuda  # mambapy's switch to mamba-ssm's scan
    assert ran, f"{name}: the fused kernel did not run on the GPU, so the comparison would be of PyTorch with itself"
    torch.testing.assert_close(gpu_logits, cpu_logits, **TOLERANCE)
    torch.testing.assert_close(gpu_grad, cpu_grad, atol=1e-4, rtol=2e-2)
