"""A plugin with two faults the conformance kit must catch, both invisible at the defaults' training scores.

Task ``noisy-copy``: the label is the last token, replaced with probability ``noise`` by a uniform token. Its
Bayes log-probabilities are right everywhere but at ``noise = 1.0`` (its range's end and its declared example),
where they do not sum to 1. Model ``peeking``: predicts at every position, and reads the token after it.
"""
from tokbench import ModelSpec, Param, TaskSpec, hookimpl

TOKBENCH_CONTRACT = 2

NOISY_COPY = TaskSpec(
    name="noisy-copy", version="1", description="Copy the last token through label noise (a kit test).",
    implementation="kit_faults_impl:NoisyCopy",
    params=(Param("V", "int", 4, "vocabulary", low=2, high=8), Param("T", "int", 6, "context length", low=2, high=8),
            Param("noise", "float", 0.2, "label noise", low=0.0, high=1.0),
            Param("train_size", "int", 64, "", low=1), Param("val_size", "int", 32, "", low=1),
            Param("test_size", "int", 64, "", low=1)),
    examples=({"noise": 1.0, "V": 8},),
)

PEEKING = ModelSpec(
    name="peeking", version="1", predicts="every",
    description="Predicts each position's next token by reading it (a kit test).",
    implementation="kit_faults_impl:Peeking",
)


@hookimpl
def register_tasks(register):
    register(NOISY_COPY)


@hookimpl
def register_models(register):
    register(PEEKING)
