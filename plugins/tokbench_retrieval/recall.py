"""Recall tasks scored at many positions: multi-query associative recall and selective copying."""
from __future__ import annotations

import math
from abc import abstractmethod
from typing import ClassVar, NamedTuple

import torch

from tokbench.errors import ParamError
from tokbench.task import IGNORE, AttentionTarget, Split
from tokbench_retrieval.certain import DeterministicTask


def source_target(n: int, T: int, rows: torch.Tensor, columns: torch.Tensor) -> AttentionTarget:
    """Mass on one source per scored query: row ``rows[i, j]`` of sequence i marks column ``columns[i, j]``.

    The last layer's best head is scored: in a model of several layers or heads, one head does the
    retrieval (an induction or copying head). A bool mask, the smallest (n, T, T) there is.
    """
    mask = torch.zeros(n, T, T, dtype=torch.bool)
    mask[torch.arange(n)[:, None], rows, columns] = True
    return AttentionTarget(mask, kind="mass", layer="last", head="best")


def distinct_draws(n: int, M: int, N: int, generator: torch.Generator) -> torch.Tensor:
    """(n, N) int64: per row, N distinct values of [0, M) in uniformly random order.

    Floyd's algorithm (a uniformly random N-subset in N draws, so its cost does not grow with M, unlike
    the top N of M uniforms), then a uniformly random order.
    """
    chosen = torch.empty(n, N, dtype=torch.int64)
    for k, j in enumerate(range(M - N, M)):
        draw = (torch.rand(n, generator=generator, dtype=torch.float64) * (j + 1)).long()
        taken = (chosen[:, :k] == draw[:, None]).any(1)
        chosen[:, k] = torch.where(taken, j, draw)
    order = torch.rand(n, N, generator=generator).argsort(dim=1)
    return chosen.gather(1, order)


class Sourced(NamedTuple):
    """One draw of a recall task: tokens and labels (n, T), and for each scored query ``rows[i, j]`` the position
    ``sources[i, j]`` it should read."""

    tokens: torch.Tensor
    labels: torch.Tensor
    rows: torch.Tensor
    sources: torch.Tensor


class SourcedTask(DeterministicTask):
    """A recall task whose every scored query reads one source position (:meth:`draw`), annotated as the
    mass target :attr:`target_name` by :func:`source_target`.

    The target is an (n, T, T) mask, quadratic in the context (500 MiB for 2,000 sequences at T = 512), so the
    training batches of ``data = "fresh"``, which never read it, are drawn without it: the same tokens and labels.
    """

    target_name: ClassVar[str]

    @abstractmethod
    def draw(self, n: int, generator: torch.Generator) -> Sourced:
        """``n`` sequences, using only ``generator`` for randomness."""

    def generate(self, n: int, generator: torch.Generator) -> Split:
        tokens, labels, rows, sources = self.draw(n, generator)
        return Split(tokens, labels, {self.target_name: source_target(n, self.context_length, rows, sources)})

    def training_batch(self, n: int, generator: torch.Generator) -> Split:
        tokens, labels, _, _ = self.draw(n, generator)
        return Split(tokens, labels)


class MQAR(SourcedTask):
    """Zoology's multi-query associative recall, with filler token 0 between the queries."""

    target_name = "value_attention"

    @property
    def vocab_size(self) -> int:
        return self.params["vocab_size"]

    @property
    def context_length(self) -> int:
        return self.params["context_length"]

    @property
    def query_slots(self) -> int:
        """Even offsets after the pairs where a query may stand."""
        return (self.context_length - 2 * self.params["num_kv_pairs"]) // 2

    def validate(self) -> None:
        V, N, Q = self.vocab_size, self.params["num_kv_pairs"], self.params["num_queries"]
        if N > V // 2 - 1:
            raise ParamError(f"num_kv_pairs={N} needs {N} distinct keys from [1, V/2) but vocab_size={V} has "
                             f"{V // 2 - 1}; use vocab_size >= {2 * N + 2}")
        if Q > N:
            raise ParamError(f"num_queries={Q} exceeds num_kv_pairs={N}: each key is queried at most once")
        if Q > self.query_slots:
            raise ParamError(f"context_length={self.context_length} leaves {self.query_slots} query slots after "
                             f"{N} pairs, fewer than num_queries={Q}; use context_length >= {2 * N + 2 * Q}")

    def draw(self, n: int, generator: torch.Generator) -> Sourced:
        V, T, N, Q = self.vocab_size, self.context_length, self.params["num_kv_pairs"], self.params["num_queries"]
        keys = 1 + distinct_draws(n, V // 2 - 1, N, generator)
        values = V // 2 + distinct_draws(n, V - V // 2, N, generator)
        # Zoology draws the slots one after another without replacement, each with probability proportional
        # to its weight: the Q smallest Exp(1) / weight, in increasing order, have exactly that law
        weights = (torch.arange(1, self.query_slots + 1, dtype=torch.float64)) ** (self.params["power_a"] - 1)
        race = torch.empty(n, self.query_slots, dtype=torch.float64).exponential_(generator=generator) / weights
        slots = race.topk(Q, dim=1, largest=False).indices
        tokens = torch.zeros(n, T, dtype=torch.int64)
        tokens[:, 0 : 2 * N : 2], tokens[:, 1 : 2 * N : 2] = keys, values
        queries = 2 * N + 2 * slots
        tokens.scatter_(1, queries, keys[:, :Q])
        labels = torch.full((n, T), IGNORE, dtype=torch.int64).scatter_(1, queries, values[:, :Q])
        value_positions = 1 + 2 * torch.arange(Q).expand(n, Q)  # key i sits at 2i, its value at 2i + 1
        return Sourced(tokens, labels, queries, value_positions)

    def bayes_accuracy(self) -> float:
        return 1.0  # keys are distinct, so the prefix fixes every queried value

    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        N = self.params["num_kv_pairs"]
        value_of = torch.zeros(tokens.shape[0], self.vocab_size, dtype=torch.int64)
        value_of.scatter_(1, tokens[:, 0 : 2 * N : 2], tokens[:, 1 : 2 * N : 2])
        return value_of.gather(1, tokens)

    def guess_log_probs(self, tokens: torch.Tensor) -> torch.Tensor:
        """(n, T, V): at position t, log 1/k on each of the k values written so far, -inf elsewhere (before the
        first value, uniform over the value range [V/2, V)).

        The in-context guess (the ``context-guess`` baseline): a reader that holds the values but binds none to
        its key. Every query follows the N pairs and the values are distinct, so it is right with probability
        exactly 1/N there, and its loss is log N."""
        V, N = self.vocab_size, self.params["num_kv_pairs"]
        n, T = tokens.shape
        # pair j's value sits at 2j + 1; a token that is no value of the prefix gets pair index N (never written)
        pair = torch.full((n, V), N, dtype=torch.int64)
        pair.scatter_(1, tokens[:, 1 : 2 * N : 2], torch.arange(N).expand(n, N))
        written = ((torch.arange(T) + 1) // 2).clamp(max=N)  # (T,): values written up to position t
        known = pair[:, None, :] < written[None, :, None]  # (n, T, V)
        known[:, written == 0, V // 2 :] = True
        share = torch.where(written == 0, V - V // 2, written).double().log().float()  # (T,)
        return torch.where(known, -share[None, :, None], -math.inf)

    def describe(self) -> str:
        p = self.params
        return (f"{self.spec.name} v{self.spec.version}: V={self.vocab_size}, T={self.context_length}, "
                f"{p['num_kv_pairs']} key-value pairs, {p['num_queries']} queries over {self.query_slots} slots "
                f"(power_a {p['power_a']:g}); Bayes-optimal accuracy 1")


class SelectiveCopy(SourcedTask):
    """MAD's selective copying: data tokens among blanks, the copy token, then one blank per data token."""

    target_name = "source_attention"

    @property
    def vocab_size(self) -> int:
        return self.params["vocab_size"]

    @property
    def context_length(self) -> int:
        return self.params["context_length"]

    @property
    def region(self) -> int:
        """Positions before the copy token, where the data tokens lie among blanks."""
        return self.context_length - self.params["num_tokens_to_copy"] - 1

    def validate(self) -> None:
        T, K = self.context_length, self.params["num_tokens_to_copy"]
        if T < 2 * K + 2:
            raise ParamError(f"context_length={T} is too short for num_tokens_to_copy={K}: K data tokens, at least "
                             f"one blank, the copy token and K output positions need context_length >= {2 * K + 2}")

    def draw(self, n: int, generator: torch.Generator) -> Sourced:
        V, T, K = self.vocab_size, self.context_length, self.params["num_tokens_to_copy"]
        data = torch.randint(0, V - 2, (n, K), generator=generator)
        positions = torch.rand(n, self.region, generator=generator).topk(K, dim=1).indices.sort(dim=1).values
        tokens = torch.full((n, T), V - 2, dtype=torch.int64).scatter_(1, positions, data)
        tokens[:, self.region] = V - 1
        labels = torch.full((n, T), IGNORE, dtype=torch.int64)
        labels[:, T - K :] = data
        return Sourced(tokens, labels, torch.arange(T - K, T).expand(n, K), positions)

    def bayes_accuracy(self) -> float:
        return 1.0  # the data tokens are in the input, in order

    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        V, T, K = self.vocab_size, self.context_length, self.params["num_tokens_to_copy"]
        head = tokens[:, : self.region]
        order = (head >= V - 2).to(torch.int8).sort(dim=1, stable=True).indices  # data positions first, in order
        prediction = torch.zeros_like(tokens)
        prediction[:, T - K :] = head.gather(1, order[:, :K])
        return prediction

    def describe(self) -> str:
        p = self.params
        return (f"{self.spec.name} v{self.spec.version}: V={self.vocab_size} (blank {self.vocab_size - 2}, copy "
                f"{self.vocab_size - 1}), T={self.context_length}, {p['num_tokens_to_copy']} tokens to copy; "
                f"Bayes-optimal accuracy 1")
