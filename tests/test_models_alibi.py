"""Multi-head ALiBi with the paper's slopes (Press, Smith & Lewis 2022, arXiv:2108.12409): head h of H adds
-2^(-8h/H) x distance to its scores. One head has the slope 2^-8 alone, a bias of at most -0.125 at distance 32,
which scores as NoPE; ``heads`` > 1 on ``attn-alibi`` (and on the decoders with ``positional=alibi``) gives the
geometric sequence 2^(-8/H), ..., 2^-8."""
from __future__ import annotations

import pytest
import torch

from models_support import build_model
from tokbench.plugins import registry


@pytest.fixture(scope="module")
def chain():
    return registry().task("markov-switch").create({"context_length": 12, "train_size": 4})


@pytest.mark.parametrize("heads", [1, 2, 4, 8])
def test_attn_alibi_head_h_of_h_attends_with_the_papers_slope(chain, heads):
    """With zero keys (init=zero) the scores are the bias alone: the weight of key s for query t is proportional to
    2^(-8h/H (t - s)) in head h."""
    model = build_model("attn-alibi", chain, heads=heads, d=16, init="zero")
    tokens = chain.make_split("train", 0).tokens
    with torch.no_grad():
        attention = model(tokens, need_attention=True).attention[0, 0]  # (H, T, T), the same for every sequence
    T = chain.context_length
    distance = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).float()
    for h in range(1, heads + 1):
        slope = 2.0 ** (-8 * h / heads)
        expected = torch.exp(-slope * distance).tril()
        torch.testing.assert_close(attention[h - 1], expected / expected.sum(-1, keepdim=True))


def test_the_decoder_with_alibi_shares_the_papers_slopes_across_layers(chain):
    model = build_model("transformer-2l", chain, positional="alibi", heads=4)
    torch.testing.assert_close(model.encoding.slopes, torch.tensor([2.0 ** (-2 * h) for h in range(1, 5)]))
