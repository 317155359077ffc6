"""Built-in plugin: random walks and deterministic walks on a circle, after [A].

[A] Wei Shi, Yuan Cao. Towards Understanding Transformers in Learning Random Walks.
NeurIPS 2025, arXiv:2511.23239 (ICLR 2025 submission: "Towards Understanding Token
Selection in Self-Attention: Successes and Pitfalls in Learning Random Walks").
"""
from tokbench import Param, TaskSpec, hookimpl

TOKBENCH_CONTRACT = 2  # the plugin contract this module is written for (CONTRIBUTING.md)

CITATION_A = "Shi & Cao, Towards Understanding Transformers in Learning Random Walks, NeurIPS 2025, arXiv:2511.23239"

_SIZES = (
    Param("train_size", "int", 1000, "training sequences", low=1),
    Param("val_size", "int", 1000, "validation sequences", low=1),
    Param("test_size", "int", 1000, "test sequences", low=1),
)

RANDOM_WALK = TaskSpec(
    name="random-walk",
    version="1",
    difficulty=("K", "context_length"),
    description=(
        "Walk on a circle of K nodes, +1 with probability p and -1 otherwise; predict the next node "
        "from the T = N-1 visited nodes. Markov, so the parent token (the last input) is all that "
        "matters; Bayes-optimal accuracy max(p, 1-p). Defaults are the setting of [A]. A reproduction task: the "
        "last-token baseline is optimal, so it says nothing about which model selects better (lag-walk, where "
        "the parent is k positions back, is the ranked variant)."
    ),
    citation=CITATION_A,
    implementation="tokbench_walks.walks:RandomWalk",
    evaluation_axes=("context_length",),
    params=(
        Param("K", "int", 6, "nodes on the circle (the vocabulary)", low=3),
        Param("context_length", "int", 96, "inputs per sequence, N-1 in [A]", low=1),
        Param("p", "float", 0.5, "probability of a +1 step", low=0.0, high=1.0),
        *_SIZES,
    ),
)

DETERMINISTIC_WALK = TaskSpec(
    name="deterministic-walk",
    version="1",
    difficulty=("K", "laps"),
    pitfall=("[A] proves that gradient descent from zero initialisation keeps its single attention layer at "
             "the random guess 1/K, since the average of whole laps carries no information; the symmetric point "
             "is an unstable saddle that rounding can leave, so attn-paper-a escapes to 1.0 on some seeds and "
             "machines (docs/science.md)."),
    description=(
        "The p = 1 walk of [A]: always +1, so every input fixes the label and the Bayes-optimal "
        "accuracy is 1. The context covers `laps` full laps (N = rK + 1), so the plain average of "
        "the inputs is uninformative: the pitfall where [A]'s layer stays at 1/K from zero init. A "
        "reproduction task: the last-token baseline is optimal. The context length is laps x K, so a "
        "longer context is evaluated through `laps`."
    ),
    evaluation_axes=("laps",),
    evaluation_note=("The context length is laps x K (whole laps, so that the average stays uninformative): "
                     "evaluate longer contexts through laps, e.g. laps x2."),
    citation=CITATION_A,
    implementation="tokbench_walks.walks:DeterministicWalk",
    params=(
        Param("K", "int", 6, "nodes on the circle (the vocabulary)", low=3),
        Param("laps", "int", 16, "r: the context has r*K inputs, so N = rK + 1", low=1),
        *_SIZES,
    ),
)


@hookimpl
def register_tasks(register):
    register(RANDOM_WALK)
    register(DETERMINISTIC_WALK)
