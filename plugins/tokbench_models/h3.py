"""H3, the gated state-space layer of Fu, Dao, Saab, Thomas, Rudra & Re, "Hungry Hungry Hippos", ICLR 2023,
arXiv:2212.14052, in the decoder of transformer.py.

Shape legend: n sequences, T positions, d width, H = d / e heads of width e (``head_dim``, 1 as in the
authors' code), N the state size of each SSM (``d_state``), N / 2 complex modes.

The layer (Sec. 3.1, Algorithm 1):

    q, k, v = x W_Q, x W_K, x W_V                          (n, T, d)
    k~ = SSM_shift(k)                                      the shift SSM: A the shift matrix, B = e_1, so y_t
                                                           = sum_{i < N} C_i k_{t-i} + D k_t, a causal
                                                           convolution of N taps per channel
    per head h: kv_t = k~_t^(h) (v_t^(h))^T                 (e, e), an outer product per position
                z = SSM_diag(kv)                           the diagonal SSM (S4D) per head, shared by the
                                                           e x e entries: x_t = A' x_{t-1} + B' u_t,
                                                           y_t = 2 Re(C x_t) + D u_t
                o_t^(h) = (q_t^(h))^T z_t                  (e,)
    y = concat_h(o^(h)) W_O

The diagonal SSM is the authors' (``SSKernelDiag``): A = -exp(a) + i b initialised S4D-Lin (-1/2 + i pi m for
mode m), B = 1, C complex normal, a step dt per head drawn log-uniformly in [0.001, 0.1], bilinear
discretisation A' = (1 + dt A / 2) / (1 - dt A / 2), B' = dt B / (1 - dt A / 2). Training computes both SSMs as
convolutions (Sec. 3.3): the shift SSM's taps with a depthwise ``conv1d`` (on a CPU, the same convolution as a
matmul with their Toeplitz matrices), the diagonal SSM's kernel
K_l = 2 Re(C B' A'^l) by FFT; ``reference = True`` on a layer runs both recurrences position by position
instead, which a test holds equal.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from tokbench.errors import ParamError
from tokbench_models.transformer import Transformer

DT_MIN, DT_MAX = 1e-3, 1e-1  # range of the diagonal SSM's initial steps (S4D's and H3's)


class ShiftSSM(nn.Module):
    """SSM_shift per channel: the last N inputs as state, C its N taps (U(-1/sqrt(N), 1/sqrt(N)), like a conv)."""

    def __init__(self, channels: int, state: int) -> None:
        super().__init__()
        self.taps = nn.Parameter(torch.empty(channels, state).uniform_(-state ** -0.5, state ** -0.5))  # C
        self.skip = nn.Parameter(torch.randn(channels))  # D

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        """(n, T, channels) -> (n, T, channels): y_t = sum_i C_i u_{t-i} + D u_t. A depthwise ``conv1d`` on an
        accelerator; on a CPU, whose ``conv1d`` backward is slow for depthwise filters (3 to 4 times the matmul's
        time at T = N = 64), one batched matmul with the banded Toeplitz matrices of the taps."""
        on_cpu = u.device.type == "cpu"
        return (self.toeplitz(u) if on_cpu else self.convolution(u)) + self.skip * u

    def convolution(self, u: torch.Tensor) -> torch.Tensor:
        """sum_i C_i u_{t-i} as a depthwise causal convolution."""
        N = self.taps.shape[1]
        x = F.pad(u.transpose(1, 2), (N - 1, 0))  # (n, channels, N - 1 + T): zeros before the start
        y = F.conv1d(x, self.taps.flip(-1)[:, None, :], groups=self.taps.shape[0])  # cross-correlation: flip C
        return y.transpose(1, 2)

    def toeplitz(self, u: torch.Tensor) -> torch.Tensor:
        """sum_i C_i u_{t-i} as y[:, t, c] = sum_s u[:, s, c] W[c, s, t], W[c, s, t] = C_{t-s} where 0 <= t - s < N."""
        T, N = u.shape[1], self.taps.shape[1]
        positions = torch.arange(T, device=u.device)
        lag = positions - positions[:, None]  # (s, t): t - s
        band = (self.taps[:, lag.clamp(0, N - 1)] * ((lag >= 0) & (lag < N)))  # (channels, T, T)
        return torch.einsum("nsc,cst->ntc", u, band)

    def recurrent(self, u: torch.Tensor) -> torch.Tensor:
        """The same, as the shift recurrence x_t = S x_{t-1} + e_1 u_t, y_t = C x_t + D u_t."""
        state = u.new_zeros(u.shape[0], u.shape[2], self.taps.shape[1])  # (n, channels, N)
        outputs = []
        for t in range(u.shape[1]):
            state = torch.cat([u[:, t, :, None], state[..., :-1]], dim=-1)
            outputs.append((state * self.taps).sum(-1) + self.skip * u[:, t])
        return torch.stack(outputs, dim=1)


class DiagonalSSM(nn.Module):
    """SSM_diag: one S4D system per channel with N / 2 complex modes (module docstring)."""

    def __init__(self, channels: int, state: int) -> None:
        super().__init__()
        modes = state // 2
        self.log_dt = nn.Parameter(torch.rand(channels) * (math.log(DT_MAX) - math.log(DT_MIN)) + math.log(DT_MIN))
        self.log_neg_real = nn.Parameter(torch.full((channels, modes), math.log(0.5)))  # Re A = -exp(.)
        self.imag = nn.Parameter(math.pi * torch.arange(modes, dtype=torch.float32).repeat(channels, 1))  # Im A
        self.B = nn.Parameter(torch.stack([torch.ones(channels, modes), torch.zeros(channels, modes)], dim=-1))
        self.C = nn.Parameter(torch.randn(channels, modes, 2) * 0.5 ** 0.5)  # complex standard normal
        self.skip = nn.Parameter(torch.randn(channels))  # D

    def discrete(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(A', B', C), complex (channels, N / 2): the bilinear discretisation."""
        dt = self.log_dt.exp()[:, None]
        A = torch.complex(-self.log_neg_real.exp(), self.imag) * dt  # dt A
        B, C = (torch.complex(p[..., 0], p[..., 1]) for p in (self.B, self.C))
        return (1 + A / 2) / (1 - A / 2), B * dt / (1 - A / 2), C

    def kernel(self, length: int) -> torch.Tensor:
        """K_l = 2 Re(C B' A'^l) for l < length: (channels, length)."""
        A, B, C = self.discrete()
        powers = torch.exp(A.log()[..., None] * torch.arange(length, device=A.device))  # (channels, N / 2, length)
        return 2 * torch.einsum("cm,cml->cl", C * B, powers).real

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        """(..., channels, T) -> the same, causal convolution with the kernel by FFT, plus D u."""
        T = u.shape[-1]
        spectrum = torch.fft.rfft(u, n=2 * T) * torch.fft.rfft(self.kernel(T), n=2 * T)  # no wrap-around at 2T
        return torch.fft.irfft(spectrum, n=2 * T)[..., :T] + self.skip[:, None] * u

    def recurrent(self, u: torch.Tensor) -> torch.Tensor:
        """The same as the recurrence x_t = A' x_{t-1} + B' u_t, y_t = 2 Re(C x_t) + D u_t."""
        A, B, C = self.discrete()
        state = torch.zeros(*u.shape[:-1], A.shape[1], dtype=A.dtype, device=u.device)  # (..., channels, N / 2)
        outputs = []
        for t in range(u.shape[-1]):
            state = A * state + B * u[..., t, None]
            outputs.append(2 * (C * state).sum(-1).real + self.skip * u[..., t])
        return torch.stack(outputs, dim=-1)


class H3Layer(nn.Module):
    """The H3 layer of Algorithm 1 (module docstring)."""

    reference = False  # True: both SSMs run as recurrences, position by position (the tests' reference)

    def __init__(self, d: int, head_dim: int, state: int) -> None:
        super().__init__()
        if d % head_dim:
            raise ParamError(f"h3: d={d} must be a multiple of head_dim={head_dim}")
        if state % 2:
            raise ParamError(f"h3: d_state={state} must be even (the diagonal SSM has d_state / 2 complex modes)")
        self.head_dim, self.heads, self.state = head_dim, d // head_dim, state
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.shift = ShiftSSM(d, state)
        self.diagonal = DiagonalSSM(self.heads, state)
        self.proj = nn.Linear(d, d)  # W_O

    def forward(self, x: torch.Tensor, encoding: object, need_attention: bool) -> tuple[torch.Tensor, None]:
        n, T, d = x.shape
        H, e = self.heads, self.head_dim
        k = self.shift.recurrent(self.k(x)) if self.reference else self.shift(self.k(x))
        k, q, v = (z.view(n, T, H, e) for z in (k, self.q(x), self.v(x)))
        kv = (k[..., :, None] * v[..., None, :]).permute(0, 3, 4, 2, 1)  # (n, e, e, H, T)
        z = self.diagonal.recurrent(kv) if self.reference else self.diagonal(kv)
        o = torch.einsum("nthi,nijht->nthj", q, z)  # (n, T, H, e)
        return self.proj(o.reshape(n, T, d)), None

    def state_size(self) -> int:
        """The shift SSM's last N - 1 inputs (the newest enters with the next input) per channel, and N / 2
        complex modes (N floats) for each of the d e entries of the heads' outer products."""
        d = self.heads * self.head_dim
        return d * (self.state - 1) + d * self.head_dim * self.state


class H3(Transformer):
    """The pre-LN decoder of transformer.py with H3 layers as its mixers (no positional encoding: the SSMs order
    the past)."""

    def build_mixer(self, params: dict) -> nn.Module:
        return H3Layer(params["d"], params["head_dim"], params["d_state"])
