"""Built-in plugin: single-layer attention models.

Holds the exact layer of [A] (``attn-paper-a``) and the standard single-layer
softmax attention family with swappable positional encodings.
"""
from tokbench import ModelSpec, Param, Recipe, hookimpl

PAPER_A = ModelSpec(
    name="attn-paper-a",
    version="1",
    description=(
        "The single attention layer of [A]: one-hot tokens with orthogonal positions concatenated, a zero "
        "query slot at position N, f = V X softmax(X~^T W x~_N) without scaling, loss -log(f_y + eps). "
        "Recipe: full-batch GD, lr 1, 50 steps, zero init, float64, one-hot positions of norm 10."
    ),
    citation="Shi & Cao, NeurIPS 2025, arXiv:2511.23239",
    implementation="tokbench_attention.paper_a:PaperALayer",
    params=(
        Param("positions", "str", "onehot", "orthogonal position vectors: scaled one-hot or sinusoidal",
              choices=("onehot", "sinusoidal")),
        Param("position_norm", "float", 10.0, "norm of every position vector (sets the learning speed)", low=1e-6),
        Param("position_dim", "int", 1000, "M, the dimension of the position vectors (>= N)", low=1),
        Param("dtype", "str", "float64", "floating-point precision", choices=("float64", "float32")),
        Param("init", "str", "zero", "initialisation of V and W", choices=("zero", "gaussian")),
        Param("init_sigma", "float", 0.01, "standard deviation of the Gaussian init", low=0.0),
        Param("eps", "float", 0.1, "eps in the loss -log(f_y + eps)", low=1e-12),
    ),
    recipe=Recipe(optimizer="gd", lr=1.0, steps=50, batch_size=0),
)


@hookimpl
def register_models(register):
    register(PAPER_A)
