"""Mamba, a selective state-space model (Gu & Dao 2023), from the pure-PyTorch package ``mambapy``.

Shape legend: n sequences, T positions, V vocabulary, d width, L layers.

    x = embed(tokens)                          (n, T, d)
    x = mambapy.Mamba(x)                       L residual blocks: x + MambaBlock(RMSNorm(x)), causal
    logits = head(RMSNorm(x))                  (n, T, V)

``mambapy`` (Torres-Leguet, github.com/alxndrTL/mamba.py) gives the blocks in plain PyTorch. The selective
scan: on a CPU, :mod:`tokbench_models.scan`'s single pass over time (the same function, several times faster
there than mambapy's parallel scan, which a vmapped stack of replicas keeps); on a GPU with the authors'
package ``mamba-ssm`` installed, mambapy's own switch (``use_cuda``) hands it to their fused CUDA kernel, with
the same parameters (tests/test_models_kernels.py compares the two); else mambapy's parallel scan. No
attention weights are reported.
"""
from __future__ import annotations

from typing import Any

import torch
from mambapy.mamba import Mamba, MambaBlock, MambaConfig, RMSNorm
from torch import nn

from tokbench.model import ModelOutput, TokenModel
from tokbench.task import Task
from tokbench_models.kernels import fused_allowed, optional
from tokbench_models.scan import selective_scan, usable

SELECTIVE_SCAN = ("mamba_ssm.ops.selective_scan_interface", "selective_scan_fn")  # the fused kernel, where installed


class _Block(MambaBlock):
    """mambapy's block with the CPU's sequential scan where it applies (:func:`tokbench_models.scan.usable`)."""

    def selective_scan(self, x, delta, A, B, C, D):  # noqa: N803 - the paper's names, as mambapy's signature
        if usable(x):
            return selective_scan(x, delta, A, B, C, D)
        return super().selective_scan(x, delta, A, B, C, D)


class MambaModel(TokenModel):
    """Token embedding, ``layers`` Mamba blocks, a final RMSNorm and a linear head, as in mambapy's language model."""

    def __init__(self, params: dict[str, Any], task: Task) -> None:
        super().__init__(params, task)
        d = params["d"]
        config = MambaConfig(d_model=d, n_layers=params["layers"], d_state=params["d_state"],
                             expand_factor=params["expand"], d_conv=params["d_conv"])
        self.embedding = nn.Embedding(self.vocab_size, d)
        self.backbone = Mamba(config)
        self.norm = RMSNorm(d, config.rms_norm_eps)
        self.head = nn.Linear(d, self.vocab_size, bias=False)
        for layer in self.backbone.layers:  # same parameters and function, another way to compute the scan
            layer.mixer.__class__ = _Block
        kernel = optional(*SELECTIVE_SCAN)
        if kernel is not None:  # what mambapy's blocks take when built with use_cuda, without its fallback message
            for layer in self.backbone.layers:
                layer.mixer.selective_scan_cuda = kernel

    def forward(self, tokens: torch.Tensor, need_attention: bool = False) -> ModelOutput:
        # one config for every block: the fused scan on a GPU where installed, mambapy's parallel scan otherwise
        self.backbone.config.use_cuda = fused_allowed(tokens) and optional(*SELECTIVE_SCAN) is not None
        x = self.backbone(self.embedding(tokens))  # (n, T, d)
        return ModelOutput(self.head(self.norm(x)))  # (n, T, V)

    def state_size(self) -> int:
        """Per layer, mambapy's recurrent cache: the SSM state (E d, N) and the convolution's last d_conv - 1
        inputs (E d, d_conv - 1)."""
        inner = self.params["expand"] * self.params["d"]
        return self.params["layers"] * inner * (self.params["d_state"] + self.params["d_conv"] - 1)
