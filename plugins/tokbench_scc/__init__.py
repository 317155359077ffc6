"""Built-in plugin: token-priority graphs and SCC automata, after [B].

[B] Yingcong Li, Yixiao Huang, M. Emrullah Ildiz, Ankit Singh Rawat, Samet Oymak.
Mechanics of Next Token Prediction with Self-Attention. AISTATS 2024, arXiv:2403.08081.

The library modules work on their own, without the harness: ``tpg`` (token-priority
graphs and their SCCs, with networkx), ``svm`` (the graph-SVM, with scipy, and the
matrix correlation), ``automaton`` (the generative SCC automaton).
"""
from tokbench import ModelSpec, Param, Recipe, TaskSpec, hookimpl

TOKBENCH_CONTRACT = 2  # the plugin contract this module is written for (CONTRIBUTING.md)

CITATION_B = "Li, Huang, Ildiz, Rawat & Oymak, Mechanics of Next Token Prediction with Self-Attention, AISTATS 2024, arXiv:2403.08081"

SCC_AUTOMATON = TaskSpec(
    name="scc-automaton",
    version="1",
    difficulty=("K", "context_length", "num_sccs"),
    description=(
        "The benchmark form of [B]: for each query token the tokens are split into SCCs in a strict "
        "priority order. A sequence is T distinct tokens ending in the query; the label is drawn among the "
        "context tokens of the highest-priority SCC present, by fixed composition weights. Exact "
        "Bayes-optimal accuracy; diagnostic top_scc_attention = the query's attention on that SCC."
    ),
    citation=CITATION_B,
    implementation="tokbench_scc.tasks:SCCAutomatonTask",
    evaluation_note=("A sequence holds T distinct tokens of the K in the vocabulary (T <= K), so its context "
                     "cannot grow past K; a longer context is a larger vocabulary, another automaton."),
    params=(
        Param("K", "int", 6, "tokens in the vocabulary", low=2),
        Param("context_length", "int", 4, "T distinct tokens per sequence, the last one the query (T <= K)", low=1),
        Param("num_sccs", "int", 3, "SCCs per query token; sizes from random cut points", low=1),
        Param("weights", "str", "random", "composition weights inside an SCC: all equal, or drawn once from Exp(1)",
              choices=("uniform", "random")),
        Param("automaton_seed", "int", 0, "seed of the automaton (separate from the data seeds)", low=0),
        Param("train_size", "int", 2000, "training sequences", low=1),
        Param("val_size", "int", 2000, "validation sequences", low=1),
        Param("test_size", "int", 2000, "test sequences", low=1),
    ),
)

SCC_IMPLICIT_BIAS = TaskSpec(
    name="scc-implicit-bias",
    version="1",
    description=(
        "[B]'s own experiment, a training-set task: one small random dataset (T distinct tokens, label "
        "uniform over K, replaced by a context token when absent), redrawn until every token-priority graph "
        "is acyclic, or one has a cycle. It studies implicit bias, not generalisation: accuracy, "
        "top_scc_attention and svm_correlation (trained W against the graph-SVM direction) are measured on "
        "the training data. Defaults: the paper's cyclic setting."
    ),
    citation=CITATION_B,
    implementation="tokbench_scc.tasks:SCCImplicitBiasTask",
    evaluation_note=("A training-set task: it studies the implicit bias on one fixed dataset, with no test "
                     "distribution to evaluate elsewhere (and T <= K bounds the context)."),
    params=(
        Param("variant", "str", "cyclic", "acyclic: every G^(k) acyclic; cyclic: at least one has a cycle",
              choices=("acyclic", "cyclic")),
        Param("n", "int", 6, "sequences in the dataset (every split is one such dataset)", low=1),
        Param("context_length", "int", 4, "T distinct tokens per sequence, the last one the query (T <= K)", low=1),
        Param("K", "int", 6, "tokens in the vocabulary", low=2),
        Param("max_tries", "int", 10000, "datasets drawn at most to meet the variant", low=1),
    ),
)

PAPER_B = ModelSpec(
    name="attn-paper-b",
    version="1",
    family="attention (1 layer)",
    description=(
        "The attention layer of [B]: f(X) = X^T softmax(X W x_T), fixed token embeddings, identity value map, "
        "only W (d x d) trained; P(k) = attention mass on token k, loss -log(P(y) + eps); on a task scored at "
        "many positions every token queries the ones up to it (a causal mask). Recipe: full-batch "
        "normalised GD, lr 0.01, 4000 steps, float64."
    ),
    citation=CITATION_B,
    implementation="tokbench_scc.paper_b:PaperBLayer",
    params=(
        Param("d", "int", 8, "embedding dimension", low=1),
        Param("embeddings", "str", "random", "token embeddings: Gaussian rows scaled to unit norm, or orthonormal "
              "rows (needs K <= d)", choices=("random", "orthonormal")),
        Param("init", "str", "uniform", "W at the start: U(-1/sqrt(d), 1/sqrt(d)) as nn.Linear (and [B]'s code), or zero",
              choices=("uniform", "zero")),
        Param("eps", "float", 2.220446049250313e-16, "eps in log(P + eps); float64 machine epsilon as in [B]'s code",
              low=1e-300),
    ),
    recipe=Recipe(optimizer="ngd", lr=0.01, steps=4000, batch_size=0),
    predicts="every",
)


@hookimpl
def register_tasks(register):
    register(SCC_AUTOMATON)
    register(SCC_IMPLICIT_BIAS)


@hookimpl
def register_models(register):
    register(PAPER_B)
