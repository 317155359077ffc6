"""Built-in plugin: retrieval and selection tasks from the token-selection literature.

Each task tests which tokens a sequence model learns to select: selecting positions named in the
input (``sparse-selection``), averaging rather than selecting (``majority``) and selecting a fixed
offset (``lag-walk``). Every task has an exact Bayes-optimal accuracy and attention annotations.
The implementations live in ``selection`` (sparse selection, majority) and ``lag`` (lag-k walks);
this module only registers the specs.
"""
from tokbench import Param, TaskSpec, hookimpl

CITATION_A = "Shi & Cao, Towards Understanding Transformers in Learning Random Walks, NeurIPS 2025, arXiv:2511.23239"
CITATION_SPARSE = (
    "Sanford, Hsu & Telgarsky, Representational Strengths and Limitations of Transformers, NeurIPS 2023, "
    "arXiv:2306.02896; Wang, Wei, Hsu & Lee, Transformers Provably Learn Sparse Token Selection While "
    "Fully-Connected Nets Cannot, ICML 2024, arXiv:2406.06893"
)

_SIZES = (
    Param("train_size", "int", 2000, "training sequences", low=1),
    Param("val_size", "int", 1000, "validation sequences", low=1),
    Param("test_size", "int", 1000, "test sequences", low=1),
)

SPARSE_SELECTION = TaskSpec(
    name="sparse-selection",
    version="1",
    description=(
        "Discrete sparse token selection (q-sparse averaging of Sanford et al.; Wang et al.): num_tokens data "
        "tokens i.i.d. from {0..V-1}, then q position tokens V+i naming q distinct positions i in random order. "
        "The label, after the last position token, is the sum of the selected data tokens mod V (q = 1: pointer "
        "retrieval). It is a function of the input, so the Bayes-optimal accuracy is 1. Annotation "
        "selected_attention: the attention mass on the selected positions. Difficulty axes: num_tokens (the "
        "context), q, vocab_size."
    ),
    citation=CITATION_SPARSE,
    implementation="tokbench_retrieval.selection:SparseSelection",
    params=(
        Param("vocab_size", "int", 8, "V: data values and labels 0..V-1 (the input vocabulary is V + num_tokens)",
              low=2),
        Param("num_tokens", "int", 16, "data tokens before the position tokens", low=1),
        Param("q", "int", 2, "positions selected (at most num_tokens)", low=1),
        *_SIZES,
    ),
)

MAJORITY = TaskSpec(
    name="majority",
    version="1",
    description=(
        "In-context majority: T tokens i.i.d. uniform over {0..V-1}; the label is the most frequent token, a "
        "tie broken uniformly at random among the tied tokens. Bayes-optimal accuracy E[1/m], m the number of "
        "tied tokens, computed exactly. Averaging is the solution (uniform attention gives the counts): the "
        "contrast task to selection. Difficulty axes: vocab_size (more "
        "ties, smaller margins), context_length (larger counts to compare)."
    ),
    citation=CITATION_A,
    implementation="tokbench_retrieval.selection:Majority",
    params=(
        Param("vocab_size", "int", 4, "V: tokens 0..V-1", low=2),
        Param("context_length", "int", 16, "T: tokens counted", low=1),
        *_SIZES,
    ),
)

LAG_WALK = TaskSpec(
    name="lag-walk",
    version="1",
    description=(
        "k interleaved random walks on a circle of K nodes: x(t+1) = x(t+1-k) + 1 with probability p, else - 1, "
        "each of the k walks from a uniform start. Predict the next node; the parent is the k-th last input, "
        "so for k > 1 the last token is independent of the label. Bayes-optimal accuracy max(p, 1-p); k = 1 is "
        "the random walk of [A]. Annotation parent_attention: the mass on position T-k. Difficulty axes: k "
        "(the offset to select), context_length."
    ),
    citation=CITATION_A,
    implementation="tokbench_retrieval.lag:LagWalk",
    params=(
        Param("K", "int", 6, "nodes on the circle (the vocabulary)", low=3),
        Param("k", "int", 2, "walks interleaved: the label continues the k-th last input", low=1),
        Param("context_length", "int", 32, "T inputs per sequence (T >= k)", low=1),
        Param("p", "float", 0.8, "probability of a +1 step (at 1/2 the grandparent is as good as the parent)",
              low=0.0, high=1.0),
        *_SIZES,
    ),
)

TASKS = (SPARSE_SELECTION, MAJORITY, LAG_WALK)


@hookimpl
def register_tasks(register):
    for spec in TASKS:
        register(spec)
