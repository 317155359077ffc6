"""The implementation of the contract-1 test plugin, as its author wrote it for contract 1."""
import torch
from torch import nn

from tokbench.model import ModelOutput, TokenModel
from tokbench.task import Split, Task


class FirstTokenV1(Task):
    @property
    def vocab_size(self):
        return self.params["vocab_size"]

    @property
    def context_length(self):
        return self.params["context_length"]

    def generate(self, n, generator):
        tokens = torch.randint(0, self.vocab_size, (n, self.context_length), generator=generator)
        first = torch.zeros(n, self.context_length, dtype=torch.bool)
        first[:, 0] = True
        return Split(tokens, tokens[:, 0].clone(), {"first_token_attention": first})

    def bayes_accuracy(self):
        return 1.0

    def bayes_predict(self, tokens):
        return tokens[:, 0].clone()

    def model_metrics(self, model, split):
        # contract 1: the final query's attention, (n, T + S)
        attention = model(split.tokens).attention
        if attention is None:
            return {}
        T = self.context_length
        mass = (attention[:, :T] * split.attention_targets["first_token_attention"]).sum(-1)
        return {"first_token_mass": float(mass.mean())}


class OneQueryV1(TokenModel):
    def __init__(self, params, task):
        super().__init__(params, task)
        d = params["d"]
        self.embed = nn.Embedding(self.vocab_size, d)
        self.position = nn.Parameter(torch.randn(self.context_length, d))
        self.query = nn.Parameter(torch.randn(d))
        self.out = nn.Linear(d, self.vocab_size)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position
        attention = (x @ self.query).softmax(-1)  # (n, T)
        return ModelOutput(self.out((attention[..., None] * x).sum(1)), attention)
