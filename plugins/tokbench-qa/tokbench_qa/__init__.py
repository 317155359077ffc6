"""tokbench plugin: the two question-answering tasks of [A].

[A] Wei Shi, Yuan Cao. Towards Understanding Token Selection in Self-Attention: Successes and
Pitfalls in Learning Random Walks (ICLR 2025 submission); later version arXiv:2511.23239.

Both tasks share a vocabulary of 19 words and ask which fruit, apple or orange, answers a
question. Counting answers it in the first task; only word order answers it in the second.
"""
from tokbench import Param, TaskSpec, hookimpl

TOKBENCH_CONTRACT = 2  # the plugin contract this module is written for (CONTRIBUTING.md)

CITATION = (
    "Shi & Cao, Towards Understanding Token Selection in Self-Attention: Successes and Pitfalls in "
    "Learning Random Walks (ICLR 2025 submission), arXiv:2511.23239"
)

SIZES = (
    Param("train_size", "int", 1000, "training sequences", low=1),
    Param("val_size", "int", 1000, "validation sequences", low=1),
    Param("test_size", "int", 1000, "test sequences", low=1),
)

FRUIT_COUNT = TaskSpec(
    name="qa-fruit-count",
    version="1",
    description=(
        "Question answering of [A], task 1: 'here is a list <fruits> . which fruit appears most in the list ?' "
        "over a list of apples and oranges; the answer is the majority fruit. The bag of words decides it, "
        "so attention averaging suffices. Bayes-optimal accuracy 1."
    ),
    citation=CITATION,
    implementation="tokbench_qa.tasks:FruitCount",
    params=(
        Param("items", "int", 5, "fruits in the list (odd, so there is always a majority)", low=1, high=99),
        *SIZES,
    ),
)

FRUIT_PREFERENCE = TaskSpec(
    name="qa-fruit-preference",
    version="1",
    description=(
        "Question answering of [A], task 2: 'i prefer an <x> to an <y> . which fruit do i prefer ?' with "
        "{x, y} = {apple, orange}; the answer is x. Both sentences have the same bag of words, so only "
        "word order decides it: attention averaging stays at 1/2. Bayes-optimal accuracy 1."
    ),
    citation=CITATION,
    implementation="tokbench_qa.tasks:FruitPreference",
    params=SIZES,
)


@hookimpl
def register_tasks(register):
    register(FRUIT_COUNT)
    register(FRUIT_PREFERENCE)
