"""The two question-answering tasks of [A] over one 19-word vocabulary.

A sentence is a template of words with fruit slots; ``apple`` and ``orange``
are tokens 0 and 1, so a label is the index of the answer word.
"""
from __future__ import annotations

import torch

from tokbench.errors import ParamError
from tokbench.task import AttentionTarget, Split, Task

WORDS = (
    "apple", "orange",
    "here", "is", "a", "list", ".", "which", "fruit", "appears", "most", "in", "the", "?",
    "i", "prefer", "an", "to", "do",
)
APPLE, ORANGE = WORDS.index("apple"), WORDS.index("orange")
ANSWER = "answer_attention"  # the query's attention mass on the positions holding the answer word


def encode(words: list[str]) -> torch.Tensor:
    """Token ids of ``words``, int64."""
    return torch.tensor([WORDS.index(w) for w in words], dtype=torch.int64)


def decode(tokens: torch.Tensor) -> str:
    return " ".join(WORDS[int(t)] for t in tokens)


class QATask(Task):
    """Shared by both tasks: the vocabulary, the exact answer, and a readable example."""

    @property
    def vocab_size(self) -> int:
        return len(WORDS)

    def bayes_accuracy(self) -> float:
        return 1.0  # the sentence determines the answer

    def describe(self) -> str:
        example = self.generate(1, torch.Generator().manual_seed(0))
        return (
            f"{self.spec.name} v{self.spec.version}: {self.vocab_size} words, {self.context_length} tokens; "
            f"e.g. '{decode(example.tokens[0])}' -> {WORDS[int(example.labels[0])]}"
        )


class FruitCount(QATask):
    """'here is a list <items fruits> . which fruit appears most in the list ?' -> the majority fruit."""

    HEAD = "here is a list".split()
    TAIL = ". which fruit appears most in the list ?".split()

    def validate(self) -> None:
        if self.params["items"] % 2 == 0:
            raise ParamError(f"items={self.params['items']} must be odd, so that one fruit is the majority")

    @property
    def items(self) -> int:
        return self.params["items"]

    @property
    def context_length(self) -> int:
        return len(self.HEAD) + self.items + len(self.TAIL)

    def _fruits(self, tokens: torch.Tensor) -> torch.Tensor:
        return tokens[:, len(self.HEAD): len(self.HEAD) + self.items]

    def generate(self, n: int, generator: torch.Generator) -> Split:
        fruits = torch.where(torch.rand(n, self.items, generator=generator) < 0.5, APPLE, ORANGE)
        tokens = torch.cat([encode(self.HEAD).expand(n, -1), fruits, encode(self.TAIL).expand(n, -1)], dim=1)
        labels = self.bayes_predict(tokens)
        return Split(tokens, labels, {ANSWER: AttentionTarget(tokens == labels[:, None])})

    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        oranges = (self._fruits(tokens) == ORANGE).sum(1)
        return torch.where(2 * oranges > self.items, ORANGE, APPLE)


class FruitPreference(QATask):
    """'i prefer an <x> to an <y> . which fruit do i prefer ?' -> x; the two sentences are anagrams."""

    SENTENCE = "i prefer an <x> to an <y> . which fruit do i prefer ?".split()
    X, Y = SENTENCE.index("<x>"), SENTENCE.index("<y>")

    @property
    def context_length(self) -> int:
        return len(self.SENTENCE)

    def generate(self, n: int, generator: torch.Generator) -> Split:
        preferred = torch.where(torch.rand(n, generator=generator) < 0.5, APPLE, ORANGE)
        words = [w if w not in ("<x>", "<y>") else "apple" for w in self.SENTENCE]
        tokens = encode(words).repeat(n, 1)
        tokens[:, self.X] = preferred
        tokens[:, self.Y] = APPLE + ORANGE - preferred
        answer = torch.zeros(n, self.context_length, dtype=torch.bool)
        answer[:, self.X] = True
        return Split(tokens, preferred, {ANSWER: AttentionTarget(answer)})

    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        return tokens[:, self.X].clone()
