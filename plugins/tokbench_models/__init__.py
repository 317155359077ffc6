"""Built-in plugin: model families beyond one attention layer.

Multi-layer causal transformers, causal linear attention, GRU and LSTM, a fully connected net on
the flattened sequence, Mamba, gated linear attention (GLA) and H3. Every family predicts at every
position (causally), so each applies to tasks scored at the last position and to tasks scored at
many. The implementations (one family per module) are imported only when a run builds a model.
"""
from dataclasses import replace

from tokbench import ModelSpec, Param, Recipe, hookimpl
from tokbench_attention import BASE, CITATION_POSITIONS, CONCAT_PARAMS, FIXED_LEARNED, T5_PARAMS

# Why the flattened MLP cannot run past its training length (ModelSpec.fixed_length).
FIXED_LENGTH = "the flattened MLP has one block of first-layer weights per training position"

TOKBENCH_CONTRACT = 2  # the plugin contract this module is written for (CONTRIBUTING.md)

# nanoGPT's recipe at these sizes: AdamW (betas 0.9, 0.95), weight decay 0.1, linear warm-up then cosine
# decay, gradient norm clipped at 1. The learning rate is a small model's: 1e-3 (nanoGPT's 6e-4 is for GPT-2).
ADAMW_COSINE = Recipe(optimizer="adamw", lr=1e-3, steps=1000, batch_size=64, weight_decay=0.1, betas=(0.9, 0.95),
                      schedule="cosine", warmup_steps=50, grad_clip=1.0)

ENCODING_CHOICES = ("nope", "sinusoidal", "learned", "rope", "alibi", "t5bias", "onehot-concat")
TABLE_ENCODINGS = ("nope", "sinusoidal", "learned", "onehot-concat")  # those that act on the embeddings only
DECODER_PARAMS = (
    Param("layers", "int", 1, "blocks (attention + optional MLP)", low=1),
    Param("d", "int", 32, "width of the residual stream", low=1),
    Param("heads", "int", 2, "attention heads per layer (d must be a multiple)", low=1),
    Param("mlp", "bool", True, "an MLP (d -> 4d -> d, GELU) after the attention of each block"),
    Param("positional", "str", "rope", "positional encoding, as in the attn-* family", choices=ENCODING_CHOICES),
    BASE, *T5_PARAMS, *CONCAT_PARAMS,
)


def _decoder_params(encodings: tuple[str, ...], **defaults) -> tuple[Param, ...]:
    """The decoder's parameters with the positional encodings it supports and its own defaults."""
    params = []
    for p in DECODER_PARAMS:
        changes = {"choices": encodings} if p.name == "positional" else {}
        params.append(replace(p, **changes, default=defaults.get(p.name, p.default)))
    return tuple(params)


def _transformer(name: str, layers: int) -> ModelSpec:
    return ModelSpec(
        name=name,
        version="1",
        family="transformer",
        description=(
            f"A causal pre-LN transformer decoder (nanoGPT's layout), {layers} layer(s) of multi-head softmax "
            "attention and a GELU MLP, any positional encoding of the attn-* family (RoPE by default); predicts "
            "at every position and returns the attention of every layer and head. "
            f"Recipe: {ADAMW_COSINE.describe()}."
        ),
        citation=f"Vaswani et al. 2017, arXiv:1706.03762; Karpathy, nanoGPT (layout and recipe); {CITATION_POSITIONS}",
        implementation="tokbench_models.transformer:Transformer",
        params=_decoder_params(ENCODING_CHOICES, layers=layers),
        recipe=ADAMW_COSINE,
        predicts="every",
    )


TRANSFORMERS = (_transformer("transformer", 1), _transformer("transformer-2l", 2), _transformer("transformer-4l", 4))

LINEAR_ATTENTION = ModelSpec(
    name="linear-attention",
    version="2",
    family="linear attention",
    description=(
        "Causal linear attention with the elu(x) + 1 feature map in the pre-LN decoder of `transformer` "
        "(2 layers by default); trained with running sums (linear in the context length), and its normalised "
        "weights phi(q).phi(k) / sum phi(q).phi(k') are its attention. Positions only through a table on the "
        f"embeddings (fixed sinusoids by default, so it runs at any length). Recipe: {ADAMW_COSINE.describe()}."
    ),
    citation="Katharopoulos, Vyas, Pappas & Fleuret, Transformers are RNNs, ICML 2020, arXiv:2006.16236",
    implementation="tokbench_models.linear_attention:LinearTransformer",
    # version 2: sinusoids by default (version 1: a learned table, which cannot run past the training length)
    params=_decoder_params(TABLE_ENCODINGS, layers=2, positional="sinusoidal"),
    recipe=ADAMW_COSINE,
    predicts="every",
)

# Recurrent nets are classically trained with Adam at a constant rate and clipped gradients.
RECURRENT_RECIPE = Recipe(optimizer="adam", lr=3e-3, steps=1000, batch_size=64, grad_clip=1.0)
RECURRENT_PARAMS = (
    Param("d", "int", 32, "token embedding width", low=1),
    Param("hidden", "int", 64, "hidden state width", low=1),
    Param("layers", "int", 1, "stacked recurrent layers", low=1),
)
RECURRENT = tuple(
    ModelSpec(
        name=name,
        version="1",
        family="recurrent",
        description=(f"torch.nn.{cls} over learned token embeddings, a linear read-out of the hidden state at "
                     f"every position; no attention. Recipe: {RECURRENT_RECIPE.describe()}."),
        citation=citation,
        implementation=f"tokbench_models.recurrent:{cls}",
        params=RECURRENT_PARAMS,
        recipe=RECURRENT_RECIPE,
        predicts="every",
    )
    for name, cls, citation in (
        ("gru", "GRU", "Cho et al. 2014, arXiv:1406.1078"),
        ("lstm", "LSTM", "Hochreiter & Schmidhuber, Neural Computation 1997"),
    )
)

MLP = ModelSpec(
    name="mlp",
    version="1",
    family="mlp",
    description=(
        "A fully connected ReLU net on the flattened one-hot sequence (T*V inputs), the FCN of the sparse "
        "token selection results. It predicts at every position by zeroing the inputs after it and adding a "
        "one-hot of the position; at the last position it is exactly the FCN on the whole sequence. No "
        "attention; not applicable where its first layer would exceed 2^24 weights or the context 128 tokens. "
        "Recipe: AdamW, weight decay 0.01, constant lr 1e-3, 1000 steps, batch 64."
    ),
    citation=("Sanford, Hsu & Telgarsky, Representational Strengths and Limitations of Transformers, NeurIPS 2023, "
              "arXiv:2306.02896; Wang, Wei, Hsu & Lee, Transformers Provably Learn Sparse Token Selection While "
              "Fully-Connected Nets Cannot, ICML 2024, arXiv:2406.06893"),
    implementation="tokbench_models.mlp:FlattenedMLP",
    params=(
        Param("width", "int", 256, "width of every hidden layer", low=1),
        Param("depth", "int", 2, "hidden layers", low=1),
    ),
    recipe=Recipe(optimizer="adamw", lr=1e-3, steps=1000, batch_size=64, weight_decay=0.01),
    predicts="every",
    fixed_length=FIXED_LENGTH,
)

MAMBA = ModelSpec(
    name="mamba",
    version="1",
    family="state space",
    description=(
        "Mamba, a selective state-space model, from the pure-PyTorch package mambapy (parallel scan, runs on "
        "a CPU): token embedding, residual Mamba blocks with RMSNorm, a linear head at every position; no "
        f"attention. Recipe (Gu & Dao's: AdamW, betas 0.9/0.95, weight decay 0.1, warm-up and cosine decay, "
        f"clipping at 1): {ADAMW_COSINE.describe()}."
    ),
    citation="Gu & Dao, Mamba: Linear-Time Sequence Modeling with Selective State Spaces, 2023, arXiv:2312.00752; "
             "mambapy (Torres-Leguet, github.com/alxndrTL/mamba.py)",
    implementation="tokbench_models.mamba:MambaModel",
    params=(
        Param("d", "int", 32, "model width", low=1),
        Param("layers", "int", 2, "Mamba blocks", low=1),
        Param("d_state", "int", 16, "SSM state size N", low=1),
        Param("expand", "int", 2, "inner width factor E", low=1),
        Param("d_conv", "int", 4, "width of the causal depthwise convolution", low=1),
    ),
    recipe=ADAMW_COSINE,
    predicts="every",
)


def _mixer_decoder_params(mixer: str, *own: Param) -> tuple[Param, ...]:
    """The decoder's depth (2 blocks, as Zoology's models), width and MLP around a mixer's ``own`` parameters."""
    return (Param("layers", "int", 2, f"blocks ({mixer} + optional MLP)", low=1),
            Param("d", "int", 32, "width of the residual stream", low=1), *own,
            Param("mlp", "bool", True, "an MLP (d -> 4d -> d, GELU) after the mixer of each block"))


GLA = ModelSpec(
    name="gla",
    version="2",
    family="gated linear attention",
    description=(
        "Gated linear attention (GLA) in the pre-LN decoder of `transformer`: per head a matrix state "
        "S_t = diag(alpha_t) S_{t-1} + k_t^T v_t with a data-dependent forget gate "
        "alpha_t = sigmoid(x W1 W2 + b)^(1/16) "
        "(rank 16), o_t = q_t S_t, keys of width d/2 and values of width d, an RMSNorm per head and a swish output "
        "gate; queries, keys and values first through a short causal depthwise convolution (4 taps, SiLU), as "
        "flash-linear-attention's layer offers and the recall comparisons use (version 2; conv = 0 is the "
        "paper's layer as written, version 1); trained in the chunkwise form (chunks of 8), "
        "flash-linear-attention's kernel on a GPU where installed; no positional encoding, no attention reported. "
        f"Recipe: {ADAMW_COSINE.describe()}."
    ),
    citation=("Yang, Wang, Shen, Panda & Kim, Gated Linear Attention Transformers with Hardware-Efficient Training, "
              "ICML 2024, arXiv:2312.06635 (Sec. 4.1 recurrent form and gate, Sec. 4.2 chunkwise form, Sec. 4.4 "
              "the GLA layer)"),
    implementation="tokbench_models.gla:GLATransformer",
    params=_mixer_decoder_params(
        "GLA", Param("heads", "int", 4, "GLA heads per layer (d must be a multiple of 2 heads)", low=1),
        Param("conv", "int", 4, "taps of the short causal depthwise convolution (then SiLU) on the queries, keys and "
              "values (flash-linear-attention's use_short_conv and conv_size); 0: none, the paper's layer as written",
              low=0)),
    recipe=ADAMW_COSINE,
    predicts="every",
)

H3 = ModelSpec(
    name="h3",
    version="1",
    family="gated convolution",
    description=(
        "H3 (Hungry Hungry Hippos) in the pre-LN decoder of `transformer`: keys through a shift SSM (a causal "
        "convolution of d_state taps), multiplied by the values, through a diagonal SSM (S4D: S4D-Lin "
        "initialisation, bilinear discretisation), then by the queries; per head of width head_dim an outer "
        "product k v^T; both SSMs computed as convolutions (the diagonal one by FFT); no positional encoding, no "
        f"attention reported. Recipe: {ADAMW_COSINE.describe()}."
    ),
    citation=("Fu, Dao, Saab, Thomas, Rudra & Re, Hungry Hungry Hippos: Towards Language Modeling with State Space "
              "Models, ICLR 2023, arXiv:2212.14052 (Sec. 3.1 and Algorithm 1, the H3 layer; Sec. 3.3, SSMs as FFT "
              "convolutions); the authors' code (HazyResearch/H3) for the SSMs' initialisation"),
    implementation="tokbench_models.h3:H3",
    params=_mixer_decoder_params(
        "H3",
        Param("head_dim", "int", 1, "width e of a head: the outer products are e x e (d must be a multiple)", low=1),
        Param("d_state", "int", 64, "state size N of each SSM: taps of the shift SSM, 2 x the diagonal SSM's "
              "complex modes (even)", low=2),
    ),
    recipe=ADAMW_COSINE,
    predicts="every",
)


# Makkuva et al.'s code (Bond1995/Markov): nanoGPT at 1 layer, 1 head, d = 8, tied embeddings; AdamW lr 2e-3,
# weight decay 1e-3, cosine decay after a 2% warm-up, batch 16, 400 iterations.
MAKKUVA_RECIPE = Recipe(optimizer="adamw", lr=2e-3, steps=400, batch_size=16, weight_decay=1e-3, betas=(0.9, 0.95),
                        schedule="cosine", warmup_steps=8)
TIED = ModelSpec(
    name="transformer-1l-tied",
    version="1",
    family="transformer",
    description=(
        "The single-layer transformer of Makkuva et al.'s Markov-chain study: the decoder of `transformer` at 1 "
        "layer, 1 head, d = 8, learned absolute positions (nanoGPT's), its read-out tied to the token embedding. "
        "With tying, the unigram predictor (always the stationary law) is a local minimum of the loss on a binary "
        f"switching chain with p + q > 1. Recipe (their code's): {MAKKUVA_RECIPE.describe()}."
    ),
    citation=("Makkuva, Bondaschi, Girish, Nagle, Jaggi, Kim & Gastpar, Attention with Markov: A Framework for "
              "Principled Analysis of Transformers via Markov Chains, 2024, arXiv:2402.04161"),
    implementation="tokbench_models.transformer:TiedTransformer",
    params=_decoder_params(ENCODING_CHOICES, layers=1, heads=1, d=8, positional="learned"),
    recipe=MAKKUVA_RECIPE,
    predicts="every",
    fixed_length=f"{FIXED_LEARNED} (its default positional=learned, as nanoGPT's)",
)


@hookimpl
def register_models(register):
    for spec in (*TRANSFORMERS, TIED, LINEAR_ATTENTION, *RECURRENT, MLP, MAMBA, GLA, H3):
        register(spec)
