"""What is specific to the two tasks; [A]'s result, trained, comes from `tokbench run --suite suite.toml`."""
import pytest
import torch

from tokbench.errors import ParamError
from tokbench.plugins import registry
from tokbench_qa.tasks import APPLE, ORANGE, WORDS, decode

TASKS = ("qa-fruit-count", "qa-fruit-preference")


def task(name, **params):
    return registry().task(name).create(params)


def test_both_tasks_share_one_vocabulary_of_19_words():
    assert len(WORDS) == len(set(WORDS)) == 19
    used = set()
    for name in TASKS:
        assert task(name).vocab_size == 19
        used |= set(task(name).make_split("test", 0).tokens.unique().tolist())
    assert used == set(range(19)), "every word occurs in one of the sentences"


def test_fruit_count_asks_for_the_majority_fruit():
    split = task("qa-fruit-count").make_split("test", 0)
    sentence, answer = decode(split.tokens[0]), WORDS[int(split.labels[0])]
    fruits = sentence.removeprefix("here is a list ").split(" . ")[0].split()
    assert sentence.endswith(". which fruit appears most in the list ?") and len(fruits) == 5
    assert fruits.count(answer) >= 3


def test_fruit_count_needs_an_odd_list():
    assert task("qa-fruit-count", items=7).context_length == 20
    with pytest.raises(ParamError, match="must be odd"):
        task("qa-fruit-count", items=4)


def test_the_two_preference_sentences_have_the_same_bag_of_words():
    split = task("qa-fruit-preference").make_split("test", 0)
    bags = torch.nn.functional.one_hot(split.tokens, len(WORDS)).sum(1)
    assert (bags == bags[0]).all(), "every sentence has the same word counts"
    assert set(split.labels.tolist()) == {APPLE, ORANGE}, "yet the answers differ: a bag-of-words model is at 1/2"
    first_apple = split.tokens[split.labels == APPLE][0]
    assert decode(first_apple) == "i prefer an apple to an orange . which fruit do i prefer ?"
