"""The SCC tasks: the generative automaton and [B]'s implicit-bias datasets."""
from __future__ import annotations

from functools import cached_property

import torch

from tokbench.errors import ParamError, UsageError
from tokbench.model import TokenModel
from tokbench.task import AttentionTarget, Split, Task
from tokbench_scc.automaton import SCCAutomaton, distinct_tokens
from tokbench.metrics import matrix_correlation
from tokbench_scc.svm import InfeasibleSVMError, solve_graph_svm
from tokbench_scc.tpg import all_acyclic, token_priority_graphs, top_scc_mask


def _check_length(K: int, T: int) -> None:
    if T > K:
        raise ParamError(f"context_length={T} exceeds K={K}: a sequence holds T distinct tokens, so T <= K")


class SCCAutomatonTask(Task):
    """Sequences retrieved through a fixed SCC priority structure per query token."""

    @property
    def vocab_size(self) -> int:
        return self.params["K"]

    @property
    def context_length(self) -> int:
        return self.params["context_length"]

    def validate(self) -> None:
        _check_length(self.vocab_size, self.context_length)
        self.bayes_accuracy()  # raises early when the exact computation is out of reach

    @cached_property
    def automaton(self) -> SCCAutomaton:
        generator = torch.Generator().manual_seed(self.params["automaton_seed"])
        return SCCAutomaton.random(self.vocab_size, self.params["num_sccs"], self.params["weights"], generator)

    def generate(self, n: int, generator: torch.Generator) -> Split:
        tokens, labels, retrieved = self.automaton.sample(n, self.context_length, generator)
        return Split(tokens, labels, {"top_scc_attention": AttentionTarget(retrieved)})

    def bayes_accuracy(self) -> float:
        return self._bayes

    @cached_property
    def _bayes(self) -> float:
        return self.automaton.bayes_accuracy(self.context_length)

    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.automaton.bayes_predict(tokens)

    def describe(self) -> str:
        p = self.params
        lines = [
            f"{self.spec.name} v{self.spec.version}: K={self.vocab_size}, context length {self.context_length}, "
            f"{p['num_sccs']} SCCs per query, {p['weights']} weights, automaton seed {p['automaton_seed']}; "
            f"Bayes-optimal accuracy {self.bayes_accuracy():.4f}",
            "SCC priority order per query token (highest first; token:weight when weights are drawn):",
        ]
        weight = self.automaton.weight
        for k in range(self.vocab_size):
            show = (lambda t: f"{t}:{weight[k, t].item():.2f}") if p["weights"] == "random" else str
            classes = " > ".join("{" + ", ".join(show(t) for t in scc) + "}" for scc in self.automaton.classes(k))
            lines.append(f"  query {k}: {classes}")
        return "\n".join(lines)


class SCCImplicitBiasTask(Task):
    """[B]'s experiment: one small random dataset, trained on and evaluated on itself.

    Each sequence has T distinct tokens; the label is uniform over the K tokens,
    replaced by a uniform context token when absent. A dataset is redrawn (at
    most ``max_tries`` times) until every G^(k) is acyclic, or until one has a cycle.
    """

    eval_split = "train"

    @property
    def vocab_size(self) -> int:
        return self.params["K"]

    @property
    def context_length(self) -> int:
        return self.params["context_length"]

    def validate(self) -> None:
        _check_length(self.vocab_size, self.context_length)
        if self.params["variant"] == "cyclic" and (self.params["n"] < 2 or self.context_length < 2):
            raise ParamError("variant=cyclic needs n >= 2 and context_length >= 2: a cycle needs two sequences "
                             "and two tokens in each")

    def split_size(self, split: str) -> int:
        return self.params["n"]  # every split is one dataset of the paper's size

    def _draw(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        K, T = self.vocab_size, self.context_length
        tokens = distinct_tokens(n, K, T, generator)
        labels = torch.randint(0, K, (n,), generator=generator)
        substitute = tokens.gather(1, torch.randint(0, T, (n, 1), generator=generator)).squeeze(1)
        absent = ~(tokens == labels[:, None]).any(dim=1)
        return tokens, torch.where(absent, substitute, labels)

    def generate(self, n: int, generator: torch.Generator) -> Split:
        want_acyclic = self.params["variant"] == "acyclic"
        for _ in range(self.params["max_tries"]):
            tokens, labels = self._draw(n, generator)
            priorities = token_priority_graphs(tokens.numpy(), labels.numpy())
            if all_acyclic(priorities) == want_acyclic:
                mask = torch.from_numpy(top_scc_mask(tokens.numpy(), labels.numpy(), priorities))
                return Split(tokens, labels, {"top_scc_attention": AttentionTarget(mask)})
        raise UsageError(
            f"no {self.params['variant']} dataset of n={n}, T={self.context_length}, K={self.vocab_size} "
            f"found in {self.params['max_tries']} draws; "
            + ("use fewer or shorter sequences" if want_acyclic else "use more sequences (a cycle needs n >= 2)")
            + " or raise max_tries"
        )

    def bayes_accuracy(self) -> float:
        # P(y = j | X) = 1/K + (K - T)/K * 1/T = 1/T for each of the T distinct context tokens.
        return 1.0 / self.context_length

    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        return tokens.min(dim=1).values  # every context token is equally likely; ties to the smallest

    def model_metrics(self, model: TokenModel, split: Split) -> dict[str, float]:
        """``svm_correlation``: <W, W_svm> / (||W|| ||W_svm||), W_svm solved for the model's own embedding."""
        key_query = model.key_query()
        if key_query is None:
            return {}
        W, E = (m.detach().cpu().double().numpy() for m in key_query)
        try:
            W_svm = solve_graph_svm(split.tokens.numpy(), split.labels.numpy(), E)
        except InfeasibleSVMError:
            return {}  # no max-margin direction exists for this embedding: the diagnostic does not apply
        return {"svm_correlation": matrix_correlation(W, W_svm)}

    def describe(self) -> str:
        p = self.params
        return (
            f"{self.spec.name} v{self.spec.version}: {p['variant']} datasets of n={p['n']} sequences, "
            f"T={self.context_length} distinct tokens of K={self.vocab_size}; a training-set task (accuracy, "
            f"top_scc_attention and svm_correlation are measured on the training data); "
            f"Bayes-optimal accuracy of the unconditioned draw 1/T = {self.bayes_accuracy():.4f}"
        )
