"""When a model may hand its forward to a fused GPU kernel of the field's libraries (mamba-ssm,
flash-linear-attention): never a dependency, used where installed, the pure-PyTorch path otherwise."""
from __future__ import annotations

import functools
import importlib
from typing import Any

import torch
from torch._C._functorch import is_functorch_wrapped_tensor


def fused_allowed(x: torch.Tensor) -> bool:
    """On a CUDA tensor outside torch.func transforms: the kernels are autograd Functions without vmap rules,
    so replicas stacked under ``vmap`` (or a ``grad`` transform) keep the pure-PyTorch path."""
    return x.is_cuda and not is_functorch_wrapped_tensor(x)


@functools.cache
def optional(module: str, name: str) -> Any:
    """``module.name`` where the package is installed, else None (looked up once)."""
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError:
        return None
