"""A small key-value recall task for the model-family contrasts (tests/test_models_contrasts.py).

``kv-recall``: P pairs k_1 v_1 ... k_P v_P (distinct keys, values drawn independently), then a
query key q, one of the k_i; the label is its value. Reading the value needs two steps: bind
each value to the key before it, then find the query's key. One attention layer cannot do the
first (Olsson et al. 2022, induction heads; Bietti et al. 2023, "Birth of a Transformer"): a
model that cannot bind can at best guess the most frequent value in the context, which is
:func:`no_binding_accuracy`.

It is scored at the last position, so that models predicting only there (the attn-* family) apply.
"""
from __future__ import annotations

import torch

from tokbench import Param, TaskSpec
from tokbench.plugins import registry
from tokbench.task import AttentionTarget, Split, Task

SIZES = (
    Param("train_size", "int", 4000, "training sequences", low=1),
    Param("val_size", "int", 500, "validation sequences", low=1),
    Param("test_size", "int", 1000, "test sequences", low=1),
)


class KeyValueRecall(Task):
    """Keys are tokens [0, K), values [K, K + W); the context is 2P + 1 tokens long."""

    @property
    def vocab_size(self) -> int:
        return self.params["keys"] + self.params["values"]

    @property
    def context_length(self) -> int:
        return 2 * self.params["pairs"] + 1

    def generate(self, n: int, generator: torch.Generator) -> Split:
        K, W, P = self.params["keys"], self.params["values"], self.params["pairs"]
        keys = torch.rand(n, K, generator=generator).argsort(1)[:, :P]  # P distinct keys per sequence
        values = K + torch.randint(0, W, (n, P), generator=generator)
        asked = torch.randint(0, P, (n,), generator=generator)
        rows = torch.arange(n)
        tokens = torch.cat([torch.stack([keys, values], 2).flatten(1), keys[rows, asked, None]], dim=1)
        value_position = torch.zeros(n, self.context_length, dtype=torch.bool)
        value_position[rows, 2 * asked + 1] = True
        target = AttentionTarget(value_position, layer="last", head="best")  # the induction head reads the value
        return Split(tokens, values[rows, asked], {"value_attention": target})

    def bayes_accuracy(self) -> float:
        return 1.0

    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        pairs = tokens[:, :-1].view(len(tokens), -1, 2)
        match = pairs[:, :, 0] == tokens[:, -1:]
        return pairs[:, :, 1][match]


def no_binding_accuracy(task: KeyValueRecall, samples: int = 200_000, seed: int = 0) -> float:
    """Accuracy of guessing the most frequent value in the context (ties broken uniformly), over ``samples``."""
    split = task.generate(samples, torch.Generator().manual_seed(seed))
    values = split.tokens[:, 1:-1:2] - task.params["keys"]
    counts = torch.zeros(samples, task.params["values"]).scatter_add_(1, values, torch.ones_like(values, dtype=torch.float))
    label_count = counts.gather(1, (split.labels - task.params["keys"])[:, None])[:, 0]
    best = counts.max(1).values
    ties = (counts == best[:, None]).sum(1)
    return float(((label_count == best) / ties).mean())


KV_RECALL = TaskSpec(
    name="kv-recall", version="1", description="Key-value recall at the last position (tests only).",
    implementation="models_support:KeyValueRecall",
    params=(Param("keys", "int", 16, "key tokens", low=2), Param("values", "int", 8, "value tokens", low=2),
            Param("pairs", "int", 8, "key-value pairs per sequence", low=1), *SIZES),
)


def build_model(name: str, task: Task, **params) -> torch.nn.Module:
    """The registered model ``name`` with ``params`` over its defaults, built for ``task`` from seed 0, in eval mode."""
    spec = registry().model(name)
    torch.manual_seed(0)
    return spec.build(spec.resolve(params), task).eval()
