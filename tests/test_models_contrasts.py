"""Known contrasts between the model families, trained through the harness at CPU sizes.

- Key-value recall needs two layers: a two-layer transformer reads the value of the queried key,
  every one-layer model stays near what a model that cannot bind a value to its key can reach,
  guessing the most frequent value in the context (induction heads: Olsson et al. 2022,
  arXiv:2209.11895; Bietti et al. 2023, arXiv:2306.00802). Measured (seed 0): ceiling 0.411, the
  two-layer model 0.9995, the one-layer models 0.398-0.435. One layer can rise a little above the
  ceiling: a head whose score depends on the value token weights the position rows of the values
  it likes, which leaks some of where each value sits; so the bound is the ceiling plus 0.05.
- Sparse token selection: one attention layer finds the token at a position named by the query at
  any context length; a fully connected net on the flattened sequence falls away as the context
  grows (Sanford, Hsu & Telgarsky 2023, arXiv:2306.02896; Wang, Wei, Hsu & Lee 2024, arXiv:2406.06893).

Recall uses the small last-position task of models_support.py, so that the single-layer attn-* models (which
predict only the last position) take part; mqar is scored at many positions. Selection uses sparse-selection
with q = 1 (the retrieval plugin's pointer retrieval).
"""
from __future__ import annotations

import pytest

from models_support import KV_RECALL, no_binding_accuracy
from tokbench.harness import run_pairing
from tokbench.plugins import registry

pytestmark = pytest.mark.slow

RECALL = {"keys": 8, "values": 8, "pairs": 4, "train_size": 4000, "val_size": 500, "test_size": 2000}
# The two-layer transformer leaves the no-binding plateau after ~1100-1400 steps (seeds 0-2) at a constant rate
# after the warm-up; a cosine decay over 2000 steps lowers the rate while it is still on the plateau, and two seeds
# in three stayed there. Training stops once validation accuracy reaches 0.99.
RECALL_RECIPE = {"steps": 2500, "schedule": "constant", "target": 0.99, "eval_every": 100}
LEAK = 0.05  # how far above the no-binding ceiling a one-layer model may get (see the module docstring)


def train(task, model: str, params: dict | None = None, recipe: dict | None = None) -> dict[str, float]:
    spec = registry().model(model)
    result = run_pairing(task, spec, spec.resolve(params or {}), spec.recipe.override(recipe or {}), seed=0,
                         accelerator="cpu")
    return result.metrics


@pytest.fixture(scope="module")
def recall():
    return KV_RECALL.create(RECALL)


@pytest.fixture(scope="module")
def ceiling(recall) -> float:
    return no_binding_accuracy(recall)


def test_the_no_binding_ceiling_is_far_below_the_bayes_accuracy(recall, ceiling):
    split = recall.make_split("test", 0)
    assert bool((recall.bayes_predict(split.tokens) == split.labels).all()) and recall.bayes_accuracy() == 1.0
    assert 0.35 < ceiling < 0.5


def test_a_two_layer_transformer_solves_key_value_recall_with_an_induction_head(recall):
    metrics = train(recall, "transformer-2l", recipe=RECALL_RECIPE)
    assert metrics["accuracy"] >= 0.95
    # its last layer's best head attends to the value of the queried key
    assert metrics["value_attention"] >= 0.5


ONE_LAYER_RECIPE = {"steps": 1500, "schedule": "constant"}  # more steps than the two-layer model needs


@pytest.mark.parametrize(("model", "params", "recipe"), [
    ("transformer", {}, ONE_LAYER_RECIPE),  # the same decoder as the two-layer one, with one layer
    ("linear-attention", {"layers": 1}, ONE_LAYER_RECIPE),
    *((name, {}, {"steps": 300}) for name in ("attn-rope", "attn-learned", "attn-alibi", "attn-t5bias",
                                              "attn-nope", "attn-sinusoidal")),
])
def test_one_layer_models_stay_near_the_no_binding_ceiling(recall, ceiling, model, params, recipe):
    accuracy = train(recall, model, params, recipe)["accuracy"]
    assert accuracy <= ceiling + LEAK, f"{model}: {accuracy:.3f} vs ceiling {ceiling:.3f}"


SOLVED_EARLY = {"target": 0.99, "eval_every": 50}  # the default recipe, stopped once validation is solved


def test_attention_selects_the_named_token_where_the_mlp_falls_away_as_the_context_grows():
    accuracies = {}
    for length in (8, 32):
        task = registry().task("sparse-selection").create(
            {"vocab_size": 8, "num_tokens": length, "q": 1, "train_size": 2000, "val_size": 200, "test_size": 1000})
        accuracies[length] = {"transformer": train(task, "transformer", recipe=SOLVED_EARLY)["accuracy"],
                              "mlp": train(task, "mlp")["accuracy"]}
    for length, by_model in accuracies.items():
        assert by_model["transformer"] >= 0.95, (length, by_model)
    margins = {length: by_model["transformer"] - by_model["mlp"] for length, by_model in accuracies.items()}
    assert margins[32] >= 0.5 and margins[32] > margins[8] + 0.2, accuracies
