"""Built-in plugin: reference baselines that anchor the leaderboard's scale.

``uniform`` is the floor (1/K), ``bayes-optimal`` the ceiling (the task's own Bayes
predictor, scored on the test split like any model), ``last-token`` a strong
non-attention baseline for Markov tasks, and ``context-guess`` the level of naming a
context token that can answer without finding the right one (mqar's 1/N). None of
them is trained by gradient descent (``trained=False``: no recipe, 0 steps), and
none has attention weights.
Each predicts every position, so each pairs with every task (``context-guess`` only with
a task that declares its guess).
"""
from tokbench import ModelSpec, Recipe, hookimpl

TOKBENCH_CONTRACT = 2  # the plugin contract this module is written for (CONTRIBUTING.md)

NO_TRAINING = Recipe(optimizer="adam", lr=0.0, steps=0, batch_size=0)

UNIFORM = ModelSpec(
    name="uniform",
    version="1",
    family="baseline",
    description=(
        "A uniform random guess: logits are i.i.d. U(0, 1) noise drawn from a generator seeded at build time "
        "(from the run's init seed), so the argmax is a uniformly random token and the expected accuracy is "
        "exactly 1/V whatever the labels. Recipe: none (0 steps)."
    ),
    implementation="tokbench_baselines.baselines:UniformGuess",
    recipe=NO_TRAINING,
    predicts="every",
    trained=False,
)

LAST_TOKEN = ModelSpec(
    name="last-token",
    version="1",
    family="baseline",
    description=(
        "Predicts the most frequent next token given the last input token, counted on the training split "
        "(a bigram table; ties and unseen last tokens go to the smallest token). Bayes-optimal on Markov "
        "tasks such as the walks of [A]. Recipe: counting only (0 gradient steps)."
    ),
    implementation="tokbench_baselines.baselines:LastTokenCounts",
    recipe=NO_TRAINING,
    predicts="every",
    trained=False,
)

BAYES_OPTIMAL = ModelSpec(
    name="bayes-optimal",
    version="1",
    family="oracle",
    description=(
        "The task's own Bayes predictor (Task.bayes_predict), scored on the test split like any model: its "
        "accuracy must match the task's analytic optimum within sampling error, which checks the task too. "
        "Where the task gives its Bayes log-probabilities, they are the oracle's, so its loss is the Bayes loss. "
        "An oracle: shown, never ranked. Recipe: none (0 steps)."
    ),
    implementation="tokbench_baselines.baselines:BayesOptimal",
    recipe=NO_TRAINING,
    predicts="every",
    trained=False,
    oracle=True,
)

CONTEXT_GUESS = ModelSpec(
    name="context-guess",
    version="1",
    family="baseline",
    description=(
        "The task's in-context guess (its guess_log_probs method): it names one of the context tokens that can answer, "
        "without finding the one that does (ties to the smallest token). On mqar that is one of the N values in "
        "the prefix, whatever the query: accuracy exactly 1/N, the level of a model that stores the values but "
        "binds none to its key (no recall). Not applicable to a task that declares no guess. Recipe: none "
        "(0 steps)."
    ),
    implementation="tokbench_baselines.baselines:ContextGuess",
    recipe=NO_TRAINING,
    predicts="every",
    trained=False,
)


@hookimpl
def register_models(register):
    for spec in (UNIFORM, LAST_TOKEN, CONTEXT_GUESS, BAYES_OPTIMAL):
        register(spec)
