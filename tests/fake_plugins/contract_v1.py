"""A plugin written against contract 1, kept unchanged: the host must keep it working or refuse it in one line.

Contract 1 (tokbench 0.1 before contract 2) had no declared contract number, a model's
``forward(tokens)`` without ``need_attention`` returning the final query's attention as ``(n, T + S)``,
attention targets as plain ``(n, T)`` bool masks, and ``model_metrics`` reading that ``(n, T + S)``
attention. Task ``first-token-v1`` uses all of it; model ``one-query-v1`` is a contract-1 model.
"""
from tokbench import ModelSpec, Param, TaskSpec, hookimpl

FIRST_TOKEN = TaskSpec(
    name="first-token-v1", version="1",
    description="Recall the first token (a contract-1 task: bool attention targets, a metric on (n, T) attention).",
    implementation="contract_v1_impl:FirstTokenV1",
    params=(Param("vocab_size", "int", 6, "tokens", low=2, high=64),
            Param("context_length", "int", 8, "tokens per sequence", low=2, high=64),
            Param("train_size", "int", 256, "", low=1), Param("val_size", "int", 64, "", low=1),
            Param("test_size", "int", 128, "", low=1)),
)

ONE_QUERY = ModelSpec(
    name="one-query-v1", version="1",
    description="One attention head with a learned query (a contract-1 model: forward(tokens) only).",
    implementation="contract_v1_impl:OneQueryV1",
    params=(Param("d", "int", 16, "width", low=2, high=64),),
)


@hookimpl
def register_tasks(register):
    register(FIRST_TOKEN)


@hookimpl
def register_models(register):
    register(ONE_QUERY)
