"""A model plugin that misbehaves on demand while it trains: ``--set model.act=...`` picks how.

``act``: none (trains normally), raise, interrupt (raises KeyboardInterrupt), sys_exit, os_exit, segfault, hang,
not_applicable (raised from the constructor), os_exit0 (``os._exit(0)`` while training), hang_term (hangs
ignoring SIGTERM), nan_eval (trains normally, outputs NaN at evaluation). The environment
variable ``HOSTILE_ACT``, where set, replaces ``act`` while training: a record made with
``act = "none"`` then fails when it is trained again (``--rerun all``, ``tokbench verify``). ``hostile-missing`` names an implementation module that
is not installed.
"""
import ctypes
import os
import signal
import sys
import time

import torch

from tokbench import ModelSpec, Param, Recipe, hookimpl
from tokbench.errors import NotApplicable
from tokbench.model import ModelOutput, TokenModel

TOKBENCH_CONTRACT = 2

ACTS = ("none", "raise", "sys_exit", "os_exit", "segfault", "hang", "not_applicable", "os_exit0", "hang_term",
        "nan_eval", "interrupt")


class HostileModel(TokenModel):
    def __init__(self, params, task):
        super().__init__(params, task)
        if params["act"] == "not_applicable":
            raise NotApplicable("this model refuses every task")
        self.table = torch.nn.Parameter(torch.zeros(self.vocab_size, self.vocab_size))

    def forward(self, tokens, need_attention=False):
        if self.training:
            act = os.environ.get("HOSTILE_ACT", self.params["act"])
            if act == "raise":
                raise RuntimeError("raised on purpose while training")
            if act == "interrupt":
                raise KeyboardInterrupt
            if act == "sys_exit":
                sys.exit(0)
            if act == "os_exit":
                os._exit(7)
            if act == "segfault":
                ctypes.string_at(0)
            if act == "hang":
                time.sleep(3600)
            if act == "os_exit0":
                os._exit(0)
            if act == "hang_term":
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                time.sleep(3600)
        elif self.params["act"] == "nan_eval":
            return ModelOutput(torch.full((len(tokens), self.vocab_size), float("nan")))
        return ModelOutput(self.table[tokens[:, -1]])


PARAMS = (Param("act", "str", "none", "how to misbehave while training", choices=ACTS),)
RECIPE = Recipe(optimizer="adam", lr=0.1, steps=3)


@hookimpl
def register_models(register):
    register(ModelSpec(name="hostile", version="1", description="Misbehaves on demand.",
                       implementation="hostile_model:HostileModel", params=PARAMS, recipe=RECIPE))
    register(ModelSpec(name="hostile-missing", version="1", description="Its module is not installed.",
                       implementation="tokbench_no_such_module:Model", recipe=RECIPE))
