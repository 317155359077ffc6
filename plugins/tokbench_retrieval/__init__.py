"""Built-in plugin: retrieval and selection tasks from the token-selection literature.

Each task tests which tokens a sequence model learns to select: binding a value to its key
(``mqar``), content-based selection among noise (``selective-copy``), selecting positions named in
the input (``sparse-selection``), averaging rather than selecting (``majority``) and selecting a fixed
offset (``lag-walk``). Every task has an exact Bayes-optimal accuracy and attention annotations.
The implementations live in ``recall`` (MQAR, selective copying), ``selection`` (sparse selection,
majority) and ``lag`` (lag-k walks); this module only registers the specs.
"""
from tokbench import Param, TaskSpec, hookimpl

TOKBENCH_CONTRACT = 2  # the plugin contract this module is written for (CONTRIBUTING.md)

CITATION_A = "Shi & Cao, Towards Understanding Transformers in Learning Random Walks, NeurIPS 2025, arXiv:2511.23239"
CITATION_MQAR = (
    "Arora, Eyuboglu, Timalsina, Johnson, Poli, Zou, Rudra & Ré, Zoology: Measuring and Improving Recall in "
    "Efficient Language Models, ICLR 2024, arXiv:2312.04927"
)
CITATION_COPY = (
    "Gu & Dao, Mamba: Linear-Time Sequence Modeling with Selective State Spaces, arXiv:2312.00752; "
    "Poli et al., Mechanistic Design and Scaling of Hybrid Architectures, ICML 2024, arXiv:2403.17844"
)
CITATION_MAJORITY = (
    "Merrill, Sabharwal & Smith, Saturated Transformers are Constant-Depth Threshold Circuits, TACL 2022, "
    "arXiv:2106.16213 (binary MAJORITY); the V-token version with random tie breaks is tokbench's own"
)
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

MQAR = TaskSpec(
    name="mqar",
    version="2",
    difficulty=("num_kv_pairs", "context_length", "vocab_size", "num_queries"),
    description=(
        "Multi-query associative recall (Zoology): key-value pairs k1 v1 ... kN vN with distinct keys from "
        "[1, V/2) and distinct values from [V/2, V), then queries of num_queries of the keys at even offsets "
        "(slot g drawn without replacement with weight (g+1)^(power_a-1)), filler token 0 elsewhere. Scored at "
        "each query: the label is the queried key's value, never written after it. Keys are unique, so the "
        "Bayes-optimal accuracy is 1. Defaults: Zoology's smallest setting, T = 64 with N = 4 (T = 16N, so "
        "most of the context is filler and the query gaps vary), with V = 256 (Zoology: 8192). Annotation "
        "value_attention: the query's attention on the position of its value (an induction head's target). "
        "Difficulty axes: num_kv_pairs, context_length (filler), vocab_size, each varied on its own."
    ),
    citation=CITATION_MQAR,
    implementation="tokbench_retrieval.recall:MQAR",
    scoring="positions",
    evaluation_axes=("context_length",),
    params=(
        Param("vocab_size", "int", 256, "V: keys from [1, V/2), values from [V/2, V), 0 is the filler", low=4),
        Param("context_length", "int", 64, "T: 2N tokens of pairs, then (T - 2N) // 2 query slots", low=4),
        Param("num_kv_pairs", "int", 4, "N: key-value pairs (N < V/2 keys are needed)", low=1),
        Param("num_queries", "int", 4, "keys queried, each once (at most N and at most the query slots)", low=1),
        Param("power_a", "float", 0.01, "query slot weight (g+1)^(a-1): 0.01 as Zoology favours early "
              "slots, 1 is uniform", low=1e-6, high=1.0),
        *_SIZES,
    ),
    examples=({"context_length": 128, "num_kv_pairs": 8, "num_queries": 8},
              {"vocab_size": 10, "context_length": 12, "num_kv_pairs": 4, "num_queries": 2}),
)

SELECTIVE_COPY = TaskSpec(
    name="selective-copy",
    version="1",
    difficulty=("num_tokens_to_copy", "context_length", "vocab_size"),
    description=(
        "Selective copying (Mamba; MAD's layout): K data tokens drawn i.i.d. from {0..V-3} at a uniformly random "
        "set of positions among blanks (V-2), then the copy token (V-1), then K blanks. Scored at the last K "
        "positions: label j is the j-th data token, in order. The data tokens are visible, so the Bayes-optimal "
        "accuracy is 1. Annotation source_attention: the attention of copy position j on the j-th data token. "
        "Difficulty axes: context_length (noise between the data), num_tokens_to_copy, vocab_size."
    ),
    citation=CITATION_COPY,
    implementation="tokbench_retrieval.recall:SelectiveCopy",
    evaluation_axes=("context_length",),
    scoring="positions",
    params=(
        Param("vocab_size", "int", 16, "V: data tokens 0..V-3, blank V-2, copy V-1", low=3),
        Param("context_length", "int", 32, "T: total length, T >= 2K + 2 (at least one blank among the data)",
              low=4),
        Param("num_tokens_to_copy", "int", 4, "K: data tokens to copy", low=1),
        *_SIZES,
    ),
    examples=({"context_length": 64, "num_tokens_to_copy": 16}, {"context_length": 10, "num_tokens_to_copy": 4}),
)

SPARSE_SELECTION = TaskSpec(
    name="sparse-selection",
    version="2",
    difficulty=("q", "num_tokens", "vocab_size"),
    description=(
        "Discrete q-sparse averaging (Sanford et al.'s qSA; Wang et al.'s sparse token selection): num_tokens "
        "data tokens i.i.d. from {0..V-1}, then q position tokens V+i naming q distinct positions i in random "
        "order. The target, after the last position token, is the average of the q selected one-hot tokens; "
        "the label is a sample of it (the data token at one of the q named positions, uniformly), so the "
        "expected cross-entropy of training is the cross-entropy against that average up to a constant. "
        "Bayes predictor: a most frequent selected value, right with probability its count / q; Bayes accuracy "
        "E[max count] / q and Bayes loss exact (q = 1: pointer retrieval, optimum 1). References: pointer "
        "(the token the last input names, a single selection: accuracy (1 + (q-1)/V)/q, below the optimum from "
        "q = 3) and average (the Bayes predictor), reported as agree_pointer and agree_average. Annotation "
        "selected_attention: the graded target 1/q on each selected position (1 - total variation). "
        "Difficulty axes: num_tokens (the context), q, vocab_size."
    ),
    citation=CITATION_SPARSE,
    implementation="tokbench_retrieval.selection:SparseSelection",
    evaluation_note=("A longer context needs new position tokens V + i (the input vocabulary is V + num_tokens), "
                     "which a model trained at the shorter length has never embedded."),
    params=(
        Param("vocab_size", "int", 8, "V: data values and labels 0..V-1 (the input vocabulary is V + num_tokens)",
              low=2),
        Param("num_tokens", "int", 16, "data tokens before the position tokens", low=1),
        Param("q", "int", 2, "positions selected (at most num_tokens)", low=1),
        *_SIZES,
    ),
    examples=({"q": 16}, {"vocab_size": 2, "num_tokens": 64, "q": 1}),
)

MAJORITY = TaskSpec(
    name="majority",
    version="1",
    difficulty=("vocab_size", "context_length"),
    pitfall=("The answer needs the counts of the whole context, which averaging gives: a model that "
             "selects a few tokens cannot count them (Merrill et al. 2022: hard attention cannot recognise "
             "MAJORITY, uniform attention can), the opposite of the other retrieval tasks."),
    description=(
        "In-context majority: T tokens i.i.d. uniform over {0..V-1}; the label is the most frequent token, a "
        "tie broken uniformly at random among the tied tokens. Bayes-optimal accuracy E[1/m], m the number of "
        "tied tokens, computed exactly. Averaging is the solution (uniform attention gives the counts): the "
        "annotation uniform_attention is the uniform target over the context (1 - total variation). The "
        "contrast task to selection. The V-token generalisation of MAJORITY (Merrill et al. 2022 prove a "
        "saturated-attention layer recognises the binary language by uniform attention). Difficulty axes: "
        "vocab_size (more ties, smaller margins), context_length (larger counts to compare)."
    ),
    citation=CITATION_MAJORITY,
    implementation="tokbench_retrieval.selection:Majority",
    evaluation_axes=("context_length",),
    params=(
        Param("vocab_size", "int", 4, "V: tokens 0..V-1", low=2),
        Param("context_length", "int", 16, "T: tokens counted", low=1),
        *_SIZES,
    ),
    examples=({"vocab_size": 2, "context_length": 2}, {"vocab_size": 10, "context_length": 64}),
)

LAG_WALK = TaskSpec(
    name="lag-walk",
    version="1",
    difficulty=("k", "context_length"),
    description=(
        "k interleaved random walks on a circle of K nodes: x(t+1) = x(t+1-k) + 1 with probability p, else - 1, "
        "each of the k walks from a uniform start. Predict the next node; the parent is the k-th last input, "
        "so for k > 1 the last token is independent of the label. Bayes-optimal accuracy max(p, 1-p); k = 1 is "
        "the random walk of [A]. Annotation parent_attention: the mass on position T-k. Difficulty axes: k "
        "(the offset to select), context_length."
    ),
    citation=CITATION_A,
    implementation="tokbench_retrieval.lag:LagWalk",
    evaluation_axes=("context_length",),
    params=(
        Param("K", "int", 6, "nodes on the circle (the vocabulary)", low=3),
        Param("k", "int", 2, "walks interleaved: the label continues the k-th last input", low=1),
        Param("context_length", "int", 32, "T inputs per sequence (T >= k)", low=1),
        Param("p", "float", 0.8, "probability of a +1 step (at 1/2 the grandparent is as good as the parent)",
              low=0.0, high=1.0),
        *_SIZES,
    ),
    examples=({"k": 5, "context_length": 5}, {"p": 0.5}),
)

TASKS = (MQAR, SELECTIVE_COPY, SPARSE_SELECTION, MAJORITY, LAG_WALK)


@hookimpl
def register_tasks(register):
    for spec in TASKS:
        register(spec)
