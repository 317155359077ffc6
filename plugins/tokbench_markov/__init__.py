"""Built-in plugin: Markov-chain and induction tasks, scored at every position and by loss against the Bayes predictor.

- ``icl-markov``: a fresh Markov chain per sequence, learnt in context (statistical induction heads);
- ``markov-switch``: one binary chain, whose stationary (unigram) predictor is a local minimum;
- ``causal-graph``: a latent graph over positions, with transitions drawn per sequence, and one query.

See docs/tasks/markov.md. The implementations are imported only when a run builds a task.
"""
from tokbench import Param, TaskSpec, hookimpl

TOKBENCH_CONTRACT = 2  # the plugin contract this module is written for (CONTRIBUTING.md)

CITATION_EDELMAN = ("Edelman, Edelman, Goel, Malach & Tsilivis, The Evolution of Statistical Induction Heads: "
                    "In-Context Learning Markov Chains, NeurIPS 2024, arXiv:2402.11004")
CITATION_MAKKUVA = ("Makkuva, Bondaschi, Girish, Nagle, Jaggi, Kim & Gastpar, Attention with Markov: A Framework for "
                    "Principled Analysis of Transformers via Markov Chains, 2024, arXiv:2402.04161")
CITATION_NICHANI = ("Nichani, Damian & Lee, How Transformers Learn Causal Structure with Gradient Descent, ICML 2024, "
                    "arXiv:2402.14735")

_SIZES = (
    Param("train_size", "int", 10000, "training sequences", low=1),
    Param("val_size", "int", 1000, "validation sequences", low=1),
    Param("test_size", "int", 1000, "test sequences", low=1),
)


def _in_context_params(states: int, context_length: int) -> tuple[Param, ...]:
    return (
        Param("states", "int", states, "S, the number of states (the vocabulary); k in Edelman et al.", low=2,
              high=32),
        Param("context_length", "int", context_length, "T, inputs per sequence (labels: the T next tokens)", low=2,
              high=512),
        Param("alpha", "float", 1.0, "Dirichlet concentration of each transition row (1: uniform on the simplex)",
              low=0.05, high=100.0),
    )


ICL_MARKOV = TaskSpec(
    name="icl-markov",
    version="1",
    difficulty=("states", "context_length"),
    scoring="positions",
    description=(
        "In-context Markov chains (Edelman et al. 2024): each sequence draws its own S x S transition matrix, "
        "rows iid Dirichlet(alpha); x_0 is uniform (Edelman et al. draw it from the stationary law, which "
        "would make the count predictor only approximately Bayes); the label at every position is the next "
        "token. Bayes predictor: the posterior mean (n(x_t -> j) + alpha) / (n(x_t -> .) + S alpha) of the "
        "in-context transition counts; loss metrics against it (estimated on the evaluation split). Bayes "
        "accuracy by Monte Carlo on a fixed-seed sample (standard error about 5e-4 at the defaults, `tokbench show task`). "
        "Diagnostics: agreement with the in-context unigram (argmax of token counts) and bigram (Bayes) "
        "predictors; first-layer attention on the previous token. Defaults: the released notebook's "
        "S = 2, T = 100, alpha = 1. Difficulty grows with S (more transitions to count) and falls with T."
    ),
    citation=CITATION_EDELMAN,
    implementation="tokbench_markov.incontext:InContextMarkov",
    evaluation_axes=("context_length",),
    params=(*_in_context_params(2, 100), *_SIZES),
)

MARKOV_SWITCH = TaskSpec(
    name="markov-switch",
    version="1",
    difficulty=("p", "q", "context_length"),
    scoring="positions",
    description=(
        "One binary Markov chain for all data (Makkuva et al. 2024): P = [[1-p, p], [q, 1-q]], x_0 from the "
        "stationary law pi = (q, p) / (p + q); the label at every position is the next token. Bayes "
        "predictor: the kernel row of the current token, loss the entropy rate (q h(p) + p h(q)) / (p + q) "
        "nats (exact); the unigram predictor (always pi) has loss h(p / (p + q)) and is a local minimum for "
        "single-layer transformers when p + q > 1 (shown by the paper for weight-tied models). "
        "Diagnostics: agreement with the stationary (unigram) and kernel (bigram) predictions. p, q in [0, 1], "
        "p + q > 0; the gap between the two losses, and p + q against 1, set the difficulty. No pitfall is "
        "declared: the registered weight-tied model (transformer-1l-tied) does not stall with its authors' "
        "recipe (Adam's beta2 0.95), only with beta2 0.999, and the last-token baseline is Bayes-optimal here."
    ),
    citation=CITATION_MAKKUVA,
    implementation="tokbench_markov.switch:MarkovSwitch",
    evaluation_axes=("context_length",),
    params=(
        Param("p", "float", 0.6, "switching probability 0 -> 1", low=0.0, high=1.0),
        Param("q", "float", 0.8, "switching probability 1 -> 0", low=0.0, high=1.0),
        Param("context_length", "int", 64, "T, inputs per sequence", low=1, high=1024),
        *_SIZES,
    ),
)

CAUSAL_GRAPH = TaskSpec(
    name="causal-graph",
    version="2",
    difficulty=("states", "context_length"),
    description=(
        "In-context causal structure (Nichani et al. 2024, single_parent.py): one latent graph over the first "
        "T - 1 positions, fixed for the task (`graph`: chain, icl pairs, or random: position i's parent uniform "
        "over {root, 0, .., i-1}, drawn from `graph_seed`); each sequence draws its own S x S transition matrix "
        "pi, rows iid Dirichlet(alpha), alpha = 0.1 as in the paper; roots are uniform (the paper draws them "
        "from pi's stationary law, which would make the count predictor only approximately Bayes) and every "
        "other token comes from its parent's row. The last position holds a query s, uniform over the states; "
        "the label is a draw from pi[s] (the paper's target is the row itself: the expected cross-entropy "
        "against a draw is that against the row plus the row's entropy). Bayes predictor: the posterior mean "
        "of pi[s], counting x_i over positions i whose parent holds s, adding alpha; loss metrics against it. "
        "Annotation transition_attention: the last layer's attention of the query on those positions (best "
        "head; every context position when there are none). At a longer context the random graph extends the "
        "training one, so its new positions have parents a model never saw in training. Difficulty: S, T, and "
        "how far parents lie."
    ),
    citation=CITATION_NICHANI,
    implementation="tokbench_markov.incontext:CausalGraph",
    evaluation_axes=("context_length",),
    params=(
        Param("states", "int", 10, "S, the number of states (the vocabulary)", low=2, high=32),
        Param("context_length", "int", 20, "T: T - 1 graph positions, then the query", low=2, high=512),
        Param("alpha", "float", 0.1, "Dirichlet concentration of each transition row (Nichani et al.: 0.1)",
              low=0.05, high=100.0),
        Param("graph", "str", "random", "the latent graph over positions", choices=("chain", "icl", "random")),
        Param("graph_seed", "int", 0, "seed of the random graph", low=0),
        *_SIZES,
    ),
)


@hookimpl
def register_tasks(register):
    for spec in (ICL_MARKOV, MARKOV_SWITCH, CAUSAL_GRAPH):
        register(spec)
