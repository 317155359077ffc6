"""Reference baselines: no attention, no gradient training.

Each predicts every position (``predicts="every"``), so it pairs with tasks scored
at many positions; on a task scored at the last position it returns only the
last position's logits (n, V), which is all the harness reads there.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from tokbench.errors import NotApplicable
from tokbench.model import ModelOutput, TokenModel
from tokbench.task import Split, Task


class UniformGuess(TokenModel):
    """Logits of i.i.d. U(0, 1) noise: a uniformly random guess, accuracy 1/V in expectation.

    Equal logits would not do: the argmax would always pick token 0. The noise
    comes from the module's own generator, seeded from torch's global generator
    when the model is built (the harness seeds that from the run's init seed),
    so a run is reproducible and each call draws fresh guesses.
    """

    def __init__(self, params: dict[str, Any], task: Task) -> None:
        super().__init__(params, task)
        self.generator = torch.Generator().manual_seed(int(torch.randint(2**62, ())))

    def forward(self, tokens: torch.Tensor, need_attention: bool = False) -> ModelOutput:
        shape = tokens.shape if self.scoring == "positions" else tokens.shape[:1]
        noise = torch.rand(*shape, self.vocab_size, generator=self.generator)
        return ModelOutput(noise.to(tokens.device))


class LastTokenCounts(TokenModel):
    """Predicts argmax_y count(last token, y) from the training split; logits are add-one-smoothed log frequencies."""

    def __init__(self, params: dict[str, Any], task: Task) -> None:
        super().__init__(params, task)
        self.register_buffer("counts", torch.zeros(self.vocab_size, self.vocab_size))

    def fit(self, train: Split) -> None:
        scored = train.scored
        labels = train.labels[scored] if train.labels.dim() == 2 else train.labels
        pairs = train.tokens[scored] * self.vocab_size + labels
        counts = torch.bincount(pairs, minlength=self.vocab_size**2).view(self.vocab_size, self.vocab_size)
        self.counts.copy_(counts)

    def forward(self, tokens: torch.Tensor, need_attention: bool = False) -> ModelOutput:
        current = tokens if self.scoring == "positions" else tokens[:, -1]
        rows = self.counts[current] + 1.0  # torch.argmax takes the first maximum: ties to the smaller token
        return ModelOutput(torch.log(rows / rows.sum(-1, keepdim=True)))


class BayesOptimal(TokenModel):
    """The task's Bayes predictor: it predicts ``bayes_predict``, and where the task gives ``bayes_log_probs``
    its log-probabilities are those, so its loss is the Bayes loss (its loss columns mean something).

    The logits are the log-probabilities (a token of probability 0 floored at :data:`FLOOR`, so that they
    stay finite) plus :data:`MARGIN` on the predicted token, which :meth:`log_probs` takes off again; in
    float64, so that nothing is lost. A task without log-probabilities gets one-hot logits.
    """

    FLOOR = -1e4  # exp(FLOOR) is 0 in float64: the floored tokens keep probability 0
    MARGIN = 2e4  # more than any gap between two floored log-probabilities: the argmax is bayes_predict's

    def __init__(self, params: dict[str, Any], task: Task) -> None:
        super().__init__(params, task)
        self.task = task

    def law(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The prediction, (n,) or (n, T) for a task scored at many positions, and its log-probabilities or None."""
        return self.task.bayes_predict(tokens), self.task.bayes_log_probs(tokens)

    def forward(self, tokens: torch.Tensor, need_attention: bool = False) -> ModelOutput:
        prediction, log_probs = self.law(tokens)
        choice = F.one_hot(prediction, self.vocab_size)
        if log_probs is None:
            return ModelOutput(choice.float())
        return ModelOutput(log_probs.double().clamp(min=self.FLOOR) + self.MARGIN * choice)

    def log_probs(self, output: ModelOutput) -> torch.Tensor:
        if output.logits.dtype != torch.float64:  # one-hot logits: the task gives no log-probabilities
            return super().log_probs(output)
        chosen = output.logits.argmax(-1, keepdim=True)
        return F.log_softmax(output.logits.scatter_add(-1, chosen, torch.full_like(chosen, -self.MARGIN,
                                                                                   dtype=torch.float64)), dim=-1)


class ContextGuess(BayesOptimal):
    """The task's in-context guess (its ``guess_log_probs``): the Bayes predictor of a reader that knows which
    tokens of the context can answer but not which one does. It predicts their argmax (ties to the smallest
    token) and its loss is their cross-entropy, through :class:`BayesOptimal`'s logits.

    On ``mqar`` that is a uniform choice among the N values of the prefix: accuracy exactly 1/N, loss log N.
    A task without a guess raises :class:`NotApplicable`.
    """

    def __init__(self, params: dict[str, Any], task: Task) -> None:
        super().__init__(params, task)
        if not callable(getattr(task, "guess_log_probs", None)):
            raise NotApplicable(f"{task.spec.name} declares no in-context guess (a guess_log_probs method)")

    def law(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        log_probs = self.task.guess_log_probs(tokens)
        return log_probs.argmax(-1), log_probs
