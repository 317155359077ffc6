"""Built-in plugin: single-layer attention models.

Holds the exact layer of [A] (``attn-paper-a``) and the standard single-layer
softmax attention family with swappable positional encodings.
"""
from dataclasses import replace

from tokbench import ModelSpec, Param, Recipe, hookimpl

TOKBENCH_CONTRACT = 2  # the plugin contract this module is written for (CONTRIBUTING.md)
# Why a model cannot run past its training length (ModelSpec.fixed_length); the encodings say it too.
FIXED_LEARNED = "learned absolute positions: the table has one trained row per training position"
FIXED_CONCAT = ("orthogonal positions concatenated to the tokens: the input width holds one dimension per "
                "training position")

PAPER_A = ModelSpec(
    name="attn-paper-a",
    version="2",
    family="attention (1 layer)",
    description=(
        "The single attention layer of [A]: one-hot tokens with orthogonal positions concatenated, a zero "
        "query slot at position N, f = V X softmax(X~^T W x~_N) without scaling, loss -log(f_y + eps); on a "
        "task scored at many positions, a slot after every prefix under a causal mask. "
        "Recipe: full-batch GD, lr 1, 50 steps, zero init, float64, one-hot positions of norm 20."
    ),
    citation="Shi & Cao, NeurIPS 2025, arXiv:2511.23239",
    implementation="tokbench_attention.paper_a:PaperALayer",
    params=(
        Param("positions", "str", "onehot", "orthogonal position vectors: scaled one-hot or sinusoidal",
              choices=("onehot", "sinusoidal")),
        # 20, near the norm sqrt((M+1)/2) = 22.4 of [A]'s likely raw sinusoids: at 10 the first W step can
        # commit the attention to a far position by sampling noise (1 data seed in 10 at p = 0.5).
        Param("position_norm", "float", 20.0, "norm of every position vector (sets the learning speed)", low=1e-6),
        Param("position_dim", "int", 1000, "M, the dimension of the position vectors (>= N)", low=1),
        Param("dtype", "str", "float64", "floating-point precision", choices=("float64", "float32")),
        Param("init", "str", "zero", "initialisation of V and W", choices=("zero", "gaussian")),
        Param("init_sigma", "float", 0.01, "standard deviation of the Gaussian init", low=0.0),
        Param("eps", "float", 0.1, "eps in the loss -log(f_y + eps)", low=1e-12),
    ),
    recipe=Recipe(optimizer="gd", lr=1.0, steps=50, batch_size=0),
    predicts="every",
    fixed_length=FIXED_CONCAT,
)


CITATION_POSITIONS = (
    "Vaswani et al. 2017 (sinusoids); Su et al. 2021, arXiv:2104.09864 (RoPE); Press et al. 2022, "
    "arXiv:2108.12409 (ALiBi); Raffel et al. 2020, arXiv:1910.10683 (T5 bias); Shi & Cao, arXiv:2511.23239 (concat)"
)

STANDARD_PARAMS = (
    Param("d", "int", 16, "token embedding width", low=1),
    Param("heads", "int", 1, "attention heads (d must be a multiple)", low=1),
    Param("query", "str", "last", "the query: the last input token, or a learned query slot appended after it",
          choices=("last", "slot")),
    Param("init", "str", "default", "default: torch's init; zero: key and output projections (and learned "
          "positional parameters) zero, so attention starts uniform and logits at 0, the rest default; "
          "gaussian: every parameter N(0, init_sigma^2)", choices=("default", "zero", "gaussian")),
    Param("init_sigma", "float", 0.01, "standard deviation of the gaussian init", low=0.0),
)
BASE = Param("base", "float", 10000.0, "wavelength base of the sinusoids", low=1.0)
STANDARD_RECIPE = Recipe(optimizer="adam", lr=1e-2, steps=100, batch_size=0)

T5_PARAMS = (
    Param("t5_buckets", "int", 32, "relative-offset buckets (exact below half, log-spaced above)", low=2),
    Param("t5_max_distance", "int", 128, "offset at which the last bucket starts", low=2),
)
CONCAT_PARAMS = (
    Param("positions", "str", "onehot", "one-hot, or [A]'s sinusoidal (DST-I) orthogonal basis",
          choices=("onehot", "sinusoidal")),
    Param("position_norm", "float", 1.0, "norm of every position vector", low=1e-6),
)
# encoding key: (implementation class in standard.py, what the encoding does, its own parameters,
# why it cannot run past its training length or "")
VARIANTS = {
    "nope": ("NoPEAttention", "no positional encoding (NoPE)", (), ""),
    "sinusoidal": ("SinusoidalAttention", "fixed sinusoids added to the embeddings", (BASE,), ""),
    "learned": ("LearnedPositionAttention", "a learned absolute position table added to the embeddings", (),
                FIXED_LEARNED),
    "rope": ("RoPEAttention", "rotary position embedding (RoPE) of queries and keys", (BASE,), ""),
    "alibi": ("ALiBiAttention", "ALiBi: a fixed linear distance penalty with the paper's slope per head", (), ""),
    "t5bias": ("T5BiasAttention", "a T5-style learned bias per head and relative-offset bucket", T5_PARAMS, ""),
    "onehot-concat": ("ConcatPositionAttention",
                      "orthogonal equal-norm positions concatenated to the embeddings as in [A]", CONCAT_PARAMS,
                      FIXED_CONCAT),
}


def _standard_spec(name: str, cls: str, encoding: str, extra: tuple[Param, ...], fixed_length: str,
                   **defaults: str) -> ModelSpec:
    """A family member; ``defaults`` overrides parameter defaults for a named preset."""
    params = tuple(replace(p, default=defaults.get(p.name, p.default)) for p in STANDARD_PARAMS)
    start = ", ".join(f"{key} {value}" for key, value in defaults.items()) or "query last, init default"
    return ModelSpec(
        name=name,
        version="1",
        family="attention (1 layer)",
        description=(
            f"Standard single-layer softmax attention, {encoding}: embeddings of width d, one query after the "
            f"last token (the token itself or a slot), or after every token under a causal mask where a task is "
            f"scored at many positions, 1/sqrt(d/heads) scaling, value and output projections to logits, "
            f"cross-entropy; "
            f"{start}. Recipe: {STANDARD_RECIPE.describe()}; where a task needs another lr, set "
            f"train.lr_grid (chosen on the validation split, never on test)."
        ),
        citation=CITATION_POSITIONS,
        implementation=f"tokbench_attention.standard:{cls}",
        params=params + extra,
        recipe=STANDARD_RECIPE,
        predicts="every",
        fixed_length=fixed_length,
    )


STANDARD = tuple(_standard_spec(f"attn-{key}", *row) for key, row in VARIANTS.items())
# Named presets for [A]'s starting point: a query slot, attention uniform and outputs zero at step 0.
ZERO_INIT = tuple(
    _standard_spec(f"attn-{key}-zeroinit", *VARIANTS[key], query="slot", init="zero")
    for key in ("rope", "onehot-concat")
)


@hookimpl
def register_models(register):
    register(PAPER_A)
    for spec in STANDARD + ZERO_INIT:
        register(spec)
