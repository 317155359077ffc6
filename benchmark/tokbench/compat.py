"""The adapter that keeps contract-1 plugins working under contract 2.

A hook module that declares no ``TOKBENCH_CONTRACT`` was written for contract 1 (see
:mod:`tokbench.hookspecs`). Its tasks and models are built as usual and then adapted
here, each change with one warning per process naming what its author should change:

- a model whose ``forward(tokens)`` lacks ``need_attention`` and returns the final
  query's attention as ``(n, T + S)``: called without the flag, its attention reshaped
  to ``(n, 1, 1, 1, T + S)`` (one layer, one head, one query);
- a task whose attention targets are plain ``(n, T)`` masks: each becomes an
  :class:`~tokbench.task.AttentionTarget` of kind ``"mass"`` (the contract-1 metric);
- a task whose ``model_metrics`` reads contract-1 attention: it is handed a view of the
  model whose forward returns the contract-1 output, the logits of the last position
  and the final query's attention in the last layer, heads averaged, ``(n, T + S)``,
  and the split with its targets as the masks it drew.
"""
from __future__ import annotations

import inspect
import warnings
from dataclasses import replace
from types import MethodType
from typing import TYPE_CHECKING, Any

from tokbench.hookspecs import CONTRACT

if TYPE_CHECKING:
    import torch

    from tokbench.model import ModelOutput, TokenModel
    from tokbench.task import Split, Task

MIGRATION = "CONTRIBUTING.md#migrating-to-contract-2"
_warned: set[str] = set()


class ContractWarning(UserWarning):
    """A plugin of an older contract runs through the adapter; the message says what to change."""


def warn_once(key: str, message: str) -> None:
    """Warn ``message`` (a :class:`ContractWarning`) the first time ``key`` is seen in this process."""
    if key not in _warned:
        _warned.add(key)
        warnings.warn(f"{message}; see {MIGRATION}", ContractWarning, stacklevel=3)


def _name(obj: object) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _takes_need_attention(forward: Any) -> bool:
    parameters = inspect.signature(forward).parameters.values()
    return any(p.name == "need_attention" or p.kind is p.VAR_KEYWORD for p in parameters)


def _forward_v2(model: TokenModel, tokens: torch.Tensor, need_attention: bool = False) -> ModelOutput:
    name = _name(model)
    warn_once(f"forward:{name}", f"model {name} (contract 1): forward(tokens) lacks need_attention and returns "
              f"attention (n, T + S); write forward(tokens, need_attention=False) returning (n, L, H, Q, T + S) "
              f"and declare TOKBENCH_CONTRACT = {CONTRACT}")
    output = type(model).forward(model, tokens)
    attention = output.attention
    if attention is not None and attention.dim() == 2:
        attention = attention[:, None, None, None, :]
    return output._replace(attention=attention if need_attention else None)


def adapt_model(model: TokenModel) -> None:
    """Give a contract-1 model the contract-2 ``forward(tokens, need_attention=False)``, in place."""
    if not _takes_need_attention(model.forward):
        # bound to the instance, so that a deep copy of the model calls the copy's own forward
        model.forward = MethodType(_forward_v2, model)  # nn.Module.__call__ looks instance attributes up first


class _ContractOneView:
    """A model seen through contract 1: ``view(tokens)`` returns ``(n, V)`` logits and ``(n, T + S)`` attention;
    every other attribute is the model's own."""

    def __init__(self, model: TokenModel) -> None:
        self._model = model

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._model, attribute)

    def __call__(self, tokens: torch.Tensor) -> ModelOutput:
        output = self._model(tokens, need_attention=True)
        logits = output.logits[:, -1] if output.logits.dim() == 3 else output.logits
        attention = output.attention
        if attention is not None:  # last layer, heads averaged, final query
            attention = attention[:, -1].mean(1)[:, -1]
        return output._replace(logits=logits, attention=attention)


def _generate_v2(task: Task, n: int, generator: torch.Generator) -> Split:
    from tokbench.task import AttentionTarget

    split = type(task).generate(task, n, generator)
    plain = sorted(key for key, target in split.attention_targets.items() if not isinstance(target, AttentionTarget))
    if plain:
        name = _name(task)
        warn_once(f"targets:{name}", f"task {name} (contract 1): attention targets {', '.join(plain)} are plain "
                  f"masks; wrap each in tokbench.task.AttentionTarget(mask) and declare TOKBENCH_CONTRACT = {CONTRACT}")
        split.attention_targets = {key: target if isinstance(target, AttentionTarget) else AttentionTarget(target)
                                   for key, target in split.attention_targets.items()}
    return split


def _model_metrics_v1(task: Task, model: TokenModel, split: Split) -> dict[str, float]:
    name = _name(task)
    warn_once(f"metrics:{name}", f"task {name} (contract 1): model_metrics is given contract-1 attention (n, T + S); "
              f"read ModelOutput.attention as (n, L, H, Q, T + S) and declare TOKBENCH_CONTRACT = {CONTRACT}")
    masks = {key: target.weights for key, target in split.attention_targets.items()}  # as contract 1 drew them
    return type(task).model_metrics(task, _ContractOneView(model), replace(split, attention_targets=masks))


def adapt_task(task: Task) -> None:
    """Give a contract-1 task contract-2 attention targets and ``model_metrics``, in place."""
    from tokbench.task import Task

    task.generate = MethodType(_generate_v2, task)
    if type(task).model_metrics is not Task.model_metrics:
        task.model_metrics = MethodType(_model_metrics_v1, task)
