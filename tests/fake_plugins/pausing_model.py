"""A model that says when a pairing reaches a moment, and lingers there, so that a test can stop the run then.

``PAUSE_AT`` names the moment (``build``, ``train``, ``evaluate`` or ``write``: the model's constructor, its
training steps, its evaluation, the worker's write of the record) and ``PAUSE_MARKS`` a folder: on reaching
the moment, the worker creates a file there named after its process id, then lingers ``PAUSE_SECONDS``
(default 0.5; spread over the steps while training). Without ``PAUSE_AT`` it is a plain bigram table.
"""
import os
import time
from pathlib import Path

import torch

from tokbench import ModelSpec, Recipe, hookimpl
from tokbench.model import ModelOutput, TokenModel

TOKBENCH_CONTRACT = 2
STEPS = 1000


def _reached(moment: str) -> bool:
    """Mark ``moment`` when it is the one asked for, and say whether it is."""
    if os.environ.get("PAUSE_AT") != moment:
        return False
    (Path(os.environ["PAUSE_MARKS"]) / f"{os.getpid()}-{moment}").touch()
    return True


def _linger(share: float = 1.0) -> None:
    """Keep the processor busy, as training does (a sleeping worker loses every race against the parent)."""
    end = time.perf_counter() + float(os.environ.get("PAUSE_SECONDS", "0.5")) * share
    while time.perf_counter() < end:
        pass


class PausingModel(TokenModel):
    def __init__(self, params, task):
        super().__init__(params, task)
        self.table = torch.nn.Parameter(torch.zeros(self.vocab_size, self.vocab_size))
        if _reached("build"):
            _linger()

    def forward(self, tokens, need_attention=False):
        if _reached("train" if self.training else "evaluate"):
            _linger(1 / STEPS if self.training else 1.0)
        return ModelOutput(self.table[tokens[:, -1]])


def _pausing_write(write):
    def atomic_write(path, data, **options):
        if _reached("write"):
            _linger()
        return write(path, data, **options)
    return atomic_write


import tokbench.results  # noqa: E402 - the worker writes its record through this name

tokbench.results.atomic_write = _pausing_write(tokbench.results.atomic_write)


@hookimpl
def register_models(register):
    register(ModelSpec(name="pausing", version="1", description="Lingers at a moment named by PAUSE_AT.",
                       implementation="pausing_model:PausingModel", recipe=Recipe(optimizer="adam", lr=0.1,
                                                                                   steps=STEPS)))
