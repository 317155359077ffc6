"""A test plugin that uses every point of contract v2.

Task ``previous-token``: uniform tokens; at every position t >= 1 the label is the
token at t - 1 (position 0 is not scored), so it needs labels at many positions. It
declares a mass target on position t - 1 (first layer, best head), a graded target
spread evenly over the prefix (last layer, head average), a reference strategy
(repeating the current token), and the Bayes predictor's log-probabilities (it is
deterministic: loss 0).

Model ``two-layer-attention``: two causal softmax attention layers with two heads
each, predicting at every position and returning attention per layer and head.
Model ``last-position-attention``: the same layers declared to predict only the last
position, so that it is not applicable to ``previous-token``.
"""
from tokbench import ModelSpec, Param, Recipe, TaskSpec, hookimpl

TOKBENCH_CONTRACT = 2  # the plugin contract this module is written for (CONTRIBUTING.md)

PREVIOUS_TOKEN = TaskSpec(
    name="previous-token", version="1", scoring="positions",
    description="Predict at every position the token before it (tests contract v2).",
    implementation="contract_v2_impl:PreviousToken",
    params=(Param("V", "int", 8, "vocabulary", low=2, high=64), Param("T", "int", 12, "context length", low=2, high=64),
            Param("train_size", "int", 256, "", low=1), Param("val_size", "int", 64, "", low=1),
            Param("test_size", "int", 128, "", low=1)),
)

TWO_LAYER = ModelSpec(
    name="two-layer-attention", version="1", predicts="every",
    description="Two causal attention layers, two heads each (tests contract v2).",
    implementation="contract_v2_impl:TwoLayerAttention",
    params=(Param("d", "int", 32, "width", low=4, high=64), Param("heads", "int", 2, "heads", choices=(1, 2, 4))),
    recipe=Recipe(optimizer="adamw", lr=3e-2, steps=600, weight_decay=0.01, schedule="cosine", warmup_steps=10,
                  grad_clip=1.0, target=0.99, eval_every=50),
)


LAST_POSITION = ModelSpec(
    name="last-position-attention", version="1",
    description="Declares that it predicts only the last position (tests not-applicable pairings).",
    implementation="contract_v2_impl:TwoLayerAttention", params=TWO_LAYER.params,
)


@hookimpl
def register_tasks(register):
    register(PREVIOUS_TOKEN)


@hookimpl
def register_models(register):
    register(TWO_LAYER)
    register(LAST_POSITION)
