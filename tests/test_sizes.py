"""Model sizes: every model states its trainable parameters and its state (docs/models.md, "Sizes"), and every ok
run record carries them (docs/run-records.md)."""
from __future__ import annotations

import pytest
import torch

from models_support import build_model
from tokbench.errors import NotApplicable
from tokbench.grid import Pairing
from tokbench.outcome import attempt, record_of
from tokbench.plugins import registry
from tokbench.results import provenance, validate


@pytest.fixture(scope="module")
def chain():
    return registry().task("markov-switch").create({"context_length": 8, "train_size": 4})


@pytest.mark.parametrize("name", sorted(registry().models))
def test_every_model_counts_its_trainable_parameters_once(chain, name):
    try:
        model = build_model(name, chain)
    except NotApplicable:
        pytest.skip(f"{name} does not apply to markov-switch")
    # every registration of a tensor, shared ones repeated, folded by storage: not model.parameters()'s own de-duplication
    unique = {(p.data_ptr(), p.shape): p.numel()
              for _, p in model.named_parameters(remove_duplicate=False) if p.requires_grad}
    size = model.size()
    assert size["parameters"] == sum(unique.values())
    assert size["state"] is None or (isinstance(size["state"], int) and size["state"] > 0)


def test_a_tied_weight_is_counted_once(chain):
    tied, untied = build_model("transformer-1l-tied", chain), build_model("transformer", chain, layers=1, heads=1, d=8,
                                                             positional="learned")
    assert tied.size()["parameters"] == untied.size()["parameters"] - untied.head.weight.numel()


@pytest.mark.parametrize(("name", "params", "state"), [
    ("transformer-2l", {}, None), ("attn-alibi", {}, None),  # attention: what it keeps grows with the context
    ("gru", {"hidden": 64, "layers": 2}, 128), ("lstm", {"hidden": 64, "layers": 2}, 256),
    ("linear-attention", {"d": 32, "heads": 2, "layers": 2}, 2 * 2 * (16 * 16 + 16)),
    ("mamba", {"d": 32, "layers": 2, "d_state": 16, "expand": 2, "d_conv": 4}, 2 * 64 * (16 + 3)),
    # per head keys d/2H = 4 and values d/H = 8; the short convolution's last 3 inputs of q, k, v (16 + 16 + 32)
    ("gla", {"d": 32, "heads": 4, "layers": 2}, 2 * (4 * 4 * 8 + 3 * 64)),
    ("gla", {"d": 32, "heads": 4, "layers": 2, "conv": 0}, 2 * 4 * 4 * 8),
    ("h3", {"d": 32, "head_dim": 1, "d_state": 64, "layers": 2}, 2 * (32 * 63 + 32 * 64)),
    ("h3", {"d": 32, "head_dim": 4, "d_state": 8, "layers": 1}, 32 * 7 + 32 * 4 * 8),
    ("mlp", {"width": 256}, 256),  # the running sum of first-layer rows
])
def test_state_sizes(chain, name, params, state):
    assert build_model(name, chain, **params).state_size() == state


@pytest.mark.parametrize("name", ["gru", "lstm"])
def test_recurrent_state_is_what_torch_carries(chain, name):
    model = build_model(name, chain, layers=2)
    tokens = chain.make_split("train", 0).tokens
    _, carried = model.rnn(model.embedding(tokens))
    carried = carried if isinstance(carried, tuple) else (carried,)
    assert sum(t.numel() for t in carried) // len(tokens) == model.state_size()


def test_mamba_state_is_mambapys_cache_and_suffices(chain):
    """Stepping through the sequence with mambapy's cache alone gives the parallel scan's logits."""
    model = build_model("mamba", chain)
    tokens = chain.make_split("train", 0).tokens
    config = model.backbone.config
    caches = [(None, torch.zeros(len(tokens), config.d_inner, config.d_conv - 1)) for _ in range(config.n_layers)]
    logits = []
    with torch.no_grad():
        for t in range(tokens.shape[1]):
            x, caches = model.backbone.step(model.embedding(tokens[:, t]), caches)
            logits.append(model.head(model.norm(x)))
        torch.testing.assert_close(torch.stack(logits, dim=1), model(tokens).logits, atol=1e-5, rtol=1e-4)
    assert sum(part.numel() for cache in caches for part in cache) // len(tokens) == model.state_size()


def test_an_ok_record_states_the_size_and_the_schema_checks_it():
    reg = registry()
    task, model = reg.task("random-walk"), reg.model("gru")
    pairing = Pairing.of(task, model, task.resolve({"context_length": 8, "train_size": 32, "val_size": 16,
                                                     "test_size": 16}),
                         model.resolve({"hidden": 16}), model.recipe.override({"steps": 2}), 0)
    record = record_of(pairing, attempt(pairing), provenance(None))
    validate(record)
    built = model.build(model.resolve({"hidden": 16}), task.create(pairing.task_params))
    assert record["status"] == "ok" and record["size"] == built.size() and record["size"]["state"] == 16
    for bad in ({"parameters": -1, "state": 16}, {"parameters": 3}, {"parameters": 3, "state": 1.5}):
        with pytest.raises(ValueError, match="size"):
            validate({**record, "size": bad})


BUDGET_MODEL = "transformer-2l"  # the common budget of the architecture ranking's size rule (docs/suites.md)
NOT_SIZE_MATCHED = {"mlp"}  # its first layer grows with T x V (stated in the suites and docs/models.md)


@pytest.mark.parametrize("suite", ["tokbench", "tokbench-scale"])
def test_the_architecture_rankings_size_rule_holds_on_the_suites_plan(suite):
    """Every trained architecture has between 1/2 and 2 times transformer-2l's parameters on the same task setting
    at the same width, as the suites state; the single-layer variants (their papers' sizes) and the MLP are not
    size-matched, and say so."""
    from tokbench.grid import expand
    from tokbench.suites import load_suite

    reg = registry()
    sizes: dict[tuple, dict[str, int]] = {}
    for pairing in expand(load_suite(suite), reg):
        name = pairing.model_spec.name
        if (pairing.seed or pairing.not_applicable is not None or not pairing.model_spec.trained
                or name.startswith("attn-") or name in NOT_SIZE_MATCHED):
            continue
        setting = (pairing.task_spec.name, tuple(sorted(pairing.task_params.items())), pairing.model_params.get("d"))
        if name in sizes.setdefault(setting, {}):
            continue
        task = pairing.task_spec.create({**pairing.task_params, "train_size": 2, "val_size": 2, "test_size": 2})
        sizes[setting][name] = pairing.model_spec.build(pairing.model_params, task).size()["parameters"]
    assert sizes
    outside = {(setting[0], setting[2], name): round(count / models[BUDGET_MODEL], 3)
               for setting, models in sizes.items() for name, count in models.items()
               if not 0.5 <= count / models[BUDGET_MODEL] <= 2.0}
    assert not outside, outside
    assert {"gru", "lstm", "mamba", "transformer-4l"} <= {name for models in sizes.values() for name in models}
