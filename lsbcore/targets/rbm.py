"""A restricted Boltzmann machine's marginal over its visible units: a target that is not pairwise.

A Bernoulli RBM with weights ``W [n_hidden, n_visible]``, visible bias ``b`` and hidden bias
``c`` has energy ``-b.v - c.h - h.W v`` over ``v in {0,1}^n``, ``h in {0,1}^m``. Summing out
``h`` gives the visible marginal (the convention of the public Gibbs-with-Gradients code's
``BernoulliRBM``), with ``v = (1 + x) / 2`` for the library's states ``x in {-1, +1}^n``:

    log p~(x) = b . v + sum_j softplus(a_j),        a = c + W v      (hidden pre-activations).

Every hidden unit couples to every visible one, so flipping one site changes every ``a_j``: the
flip log-ratios are

    s_i = b_i d_i + sum_j [softplus(a_j + W_ji d_i) - softplus(a_j)],     d_i = 1 - 2 v_i = -x_i,

and the target keeps ``a [B, m]`` per chain (``ratio_cache``): after any sites flip,
``a += (v_new - v_old) @ W.T`` costs ``O(m)`` per flipped site, and ``s`` follows from ``a``.
The extension of ``log p~`` to real ``x`` is the same formula, with gradient
``d log p~ / dx = (b + W.T sigmoid(a)) / 2``.

``RBM.gibbs`` is the exact alternating block Gibbs sampler over ``(v, h)`` (each layer's
conditional factorises), the ground truth the other samplers are compared against.
"""

from __future__ import annotations

import numpy as np
import torch

from lsbcore.checks import integer, real
from lsbcore.targets.base import (
    MAX_LOCAL_FIELD,
    MAX_VALUES,
    Target,
    as_real_tensor,
    check_layout,
)

# The public Gibbs-with-Gradients code's "random" RBM (``rbm_sample.py --data random``): weights
# drawn from N(0, 0.05), both biases from N(0, 1)
RANDOM_WEIGHT_STD = 0.05**0.5
# Sites whose flips are scored at once, times chains and hidden units: bounds the [B, m, G]
# block that flip_log_ratios builds (2^22 float64 numbers = 32 MB)
FLIP_BLOCK = 1 << 22


def softplus(a: torch.Tensor) -> torch.Tensor:
    """``log(1 + e^a)`` to full float64 precision for every ``a`` (torch's own softplus returns
    ``a`` itself above a threshold, an error of ``e^-20`` that the exactness tests would see)."""
    return a.clamp(min=0.0) + torch.log1p(torch.exp(-a.abs()))


#: The arrays of ``kernel_arrays`` that ``rbm_kernels.exact_ratios`` and ``balanced_steps`` read
RATIO_TABLES = ("w_t", "b_vis", "exp_w", "exp_neg_w", "exp_w_rows", "exp_neg_w_rows", "exp_b",
                "exp_neg_b", "ratio_bound")  # fmt: skip


class RBM(Target):
    """The visible marginal of a Bernoulli RBM (see the module docstring).

    ``W`` is ``[n_hidden, n_visible]``, ``b_visible`` ``[n_visible]``, ``b_hidden``
    ``[n_hidden]``, all finite and at most ``1e6`` in magnitude. ``shape`` lays the visible units
    out for drawing (``(28, 28)`` for MNIST); by default one row.
    """

    provides = frozenset({"incremental", "gradient"})

    def __init__(self, W, b_visible, b_hidden, shape=None):
        W = as_real_tensor(W, "W")
        if W.dim() != 2 or W.shape[0] < 1 or W.shape[1] < 1:
            raise ValueError(
                f"W must be a 2-D array of shape [n_hidden, n_visible] with both sizes at least "
                f"1, got shape {tuple(W.shape)}."
            )
        m, n = W.shape
        b_visible = as_real_tensor(b_visible, "b_visible").reshape(-1)
        b_hidden = as_real_tensor(b_hidden, "b_hidden").reshape(-1)
        if b_visible.numel() != n:
            raise ValueError(
                f"b_visible must hold one bias per visible unit ({n}, the columns of W), got "
                f"{b_visible.numel()}."
            )
        if b_hidden.numel() != m:
            raise ValueError(
                f"b_hidden must hold one bias per hidden unit ({m}, the rows of W), got "
                f"{b_hidden.numel()}."
            )
        for name, value in (("W", W), ("b_visible", b_visible), ("b_hidden", b_hidden)):
            if not bool(torch.isfinite(value).all()):
                raise ValueError(f"{name} must hold finite numbers only (no NaN or infinity).")
            if bool((value.abs() > MAX_LOCAL_FIELD).any()):
                raise ValueError(
                    f"every entry of {name} must be at most {MAX_LOCAL_FIELD:g} in magnitude."
                )
        self.shape = check_layout(shape, n, "visible units")
        self.n_sites = n
        self.n_visible, self.n_hidden = n, m
        self.W = W.detach().clone()
        self.b_visible = b_visible.detach().clone()
        self.b_hidden = b_hidden.detach().clone()
        self._copies: dict[torch.device, tuple[torch.Tensor, ...]] = {}
        self._kernel_arrays: dict[str, np.ndarray] | None = None
        self._kernel_ratios: bool | None = None

    @classmethod
    def random(
        cls,
        n_visible: int = 100,
        n_hidden: int = 25,
        seed: int = 0,
        scale: float = RANDOM_WEIGHT_STD,
    ) -> RBM:
        """A random RBM like the public Gibbs-with-Gradients code's "random" setting: weights
        ``N(0, scale^2)`` (there ``scale^2 = 0.05``), both biases ``N(0, 1)``, from ``seed``."""
        n_visible = integer(n_visible, "n_visible", 1, MAX_VALUES)
        n_hidden = integer(n_hidden, "n_hidden", 1, MAX_VALUES)
        if n_visible * n_hidden > MAX_VALUES:
            raise ValueError(
                f"an RBM of {n_visible:,} x {n_hidden:,} units has too many weights; at most "
                f"{MAX_VALUES:,} are supported."
            )
        seed = integer(seed, "seed", 0, 2**63 - 1)
        scale = real(scale, "scale", 0.0, 1e3)
        generator = torch.Generator().manual_seed(seed)
        W = torch.randn(n_hidden, n_visible, generator=generator, dtype=torch.float64) * scale
        b_visible = torch.randn(n_visible, generator=generator, dtype=torch.float64)
        b_hidden = torch.randn(n_hidden, generator=generator, dtype=torch.float64)
        return cls(W, b_visible, b_hidden)

    def describe(self) -> str:
        return f"an RBM with {self.n_visible:,} visible and {self.n_hidden:,} hidden units"

    def same_graph(self, other: Target) -> bool:
        return isinstance(other, RBM) and (other.n_visible, other.n_hidden, other.shape) == (
            self.n_visible,
            self.n_hidden,
            self.shape,
        )

    def _on(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``W``, ``b_visible``, ``b_hidden`` on ``device`` (copied there once)."""
        if device not in self._copies:
            self._copies[device] = tuple(
                t.to(device) for t in (self.W, self.b_visible, self.b_hidden)
            )
        return self._copies[device]

    # ----------------------------------------------------------------- the protocol
    def _pre_activations(self, flat: torch.Tensor) -> torch.Tensor:
        """``a = c + W v`` per chain, ``[B, m]``."""
        W, _, c = self._on(flat.device)
        return torch.addmm(c, 0.5 * (1.0 + flat), W.T)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """``b . v + sum_j softplus(c_j + (W v)_j)`` per chain; also the differentiable
        extension to real ``x``."""
        flat = self._flat(x)
        _, b, _ = self._on(flat.device)
        return (0.5 * (1.0 + flat)) @ b + softplus(self._pre_activations(flat)).sum(1)

    def ratio_cache(self, x: torch.Tensor) -> torch.Tensor:
        """The hidden pre-activations ``a [B, m]`` of flat ``x``."""
        return self._pre_activations(self._flat(x))

    def _ratios_from(self, flat: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """``s [B, n]`` from the states and their pre-activations: on the CPU by the compiled
        ``rbm_kernels.exact_ratios`` (products of the shift tables: a tenth of the softplus'
        time), elsewhere sites scored in blocks so that the ``[B, m, G]`` intermediate stays
        within ``FLIP_BLOCK`` numbers."""
        if self._compiled_ratios(flat, a):
            from lsbcore.backends.rbm_kernels import exact_ratios

            s = torch.empty(flat.shape, dtype=torch.float64)
            exact_ratios(flat.contiguous().numpy(), a.contiguous().numpy(), self.ratio_tables(),
                         s.numpy())  # fmt: skip
            return s
        W, b, _ = self._on(flat.device)
        d = -flat  # change of v_i when site i flips
        s = b * d
        base = softplus(a).unsqueeze(2)  # [B, m, 1]
        chains, m = a.shape
        group = max(1, FLIP_BLOCK // max(1, chains * m))
        for first in range(0, self.n_sites, group):
            last = min(self.n_sites, first + group)
            shifted = a.unsqueeze(2) + W[:, first:last] * d[:, first:last].unsqueeze(1)
            s[:, first:last] += (softplus(shifted) - base).sum(1)
        return s

    def flip_log_ratios(self, x: torch.Tensor) -> torch.Tensor:
        flat = self._flat(x)
        return self._ratios_from(flat, self._pre_activations(flat)).view_as(x)

    def flip_log_ratios_after(self, x_old: torch.Tensor, x_new: torch.Tensor, s_old, cache):
        """``s`` at ``x_new`` from the cached ``a``: ``a += (v_new - v_old) W^T``, exact zeros
        for the sites that did not change, so a chain that stayed keeps its ``a`` bit for bit."""
        W, _, _ = self._on(x_new.device)
        a = torch.addmm(cache, 0.5 * (x_new - x_old), W.T)
        return self._ratios_from(x_new, a), a

    def grad_log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """``(b + W^T sigmoid(a)) / 2``: the chain rule through ``v = (1 + x) / 2``."""
        flat = self._flat(x)
        W, b, _ = self._on(flat.device)
        grad = 0.5 * (b + torch.sigmoid(self._pre_activations(flat)) @ W)
        return grad.view_as(x)

    def log_prob_and_grad(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Both from one product ``a = c + W v``: half the work of asking for each."""
        flat = self._flat(x)
        W, b, _ = self._on(flat.device)
        a = self._pre_activations(flat)
        log_p = (0.5 * (1.0 + flat)) @ b + softplus(a).sum(1)
        return log_p, 0.5 * (b + torch.sigmoid(a) @ W)

    def block_log_probs(self, x: torch.Tensor, sites: torch.Tensor, flips: torch.Tensor):
        """Block candidates from the hidden pre-activations: a candidate changes ``v`` by
        ``dv = v_S (flip - 1)`` on the block, so ``a' = a + dv W_S^T`` (O(k m) per candidate
        instead of a product over all ``n`` sites)."""
        flat = self._flat(x)
        W, b, _ = self._on(flat.device)
        v = 0.5 * (1.0 + flat)
        a = self._pre_activations(flat)  # [B, m]
        x_s = flat.gather(1, sites)  # [B, k]
        w_s, b_s = W.T[sites], b[sites].unsqueeze(2)  # [B, k, m], [B, k, 1]
        base = (v @ b).unsqueeze(1)  # [B, 1]
        out = torch.empty(flat.shape[0], flips.shape[0], dtype=torch.float64, device=flat.device)
        group = max(1, FLIP_BLOCK // (flat.shape[0] * self.n_hidden))  # [B, G, m] at most
        for first in range(0, flips.shape[0], group):
            dv = 0.5 * x_s.unsqueeze(1) * (flips[first : first + group].unsqueeze(0) - 1.0)
            a_new = torch.baddbmm(a.unsqueeze(1), dv, w_s)  # [B, G, m]
            visible = base + (dv @ b_s).squeeze(2)
            out[:, first : first + dv.shape[1]] = visible + softplus(a_new).sum(2)
        return out

    # ----------------------------------------------------------------- compiled steps
    @property
    def max_abs_weight(self) -> float:
        """``max |W|``: bounds the shift of the hidden pre-activations one flip makes."""
        return float(self.W.abs().max())

    def kernel_arrays(self) -> dict[str, np.ndarray]:
        """The arrays ``lsbcore.backends.rbm_kernels`` reads (float64, contiguous, built
        once): ``w`` ``[m, n]``, ``w_t`` ``[n, m]``, the shift tables ``exp_w = e^(W^T)`` and
        ``exp_neg_w = e^(-W^T)`` ``[n, m]`` and by hidden unit ``exp_w_rows = e^W``,
        ``exp_neg_w_rows = e^(-W)`` ``[m, n]``, ``b_vis`` ``[n]``, ``exp_b = e^b``,
        ``exp_neg_b = e^(-b)`` ``[n]``, ``c`` ``[m]``, and ``ratio_bound [1]``: the largest
        ``sum_j |W_jk| + |b_k|``, a bound on every flip's ``|log-ratio|``."""
        if self._kernel_arrays is None:
            w = np.ascontiguousarray(self.W.numpy())
            w_t = np.ascontiguousarray(w.T)
            b = np.ascontiguousarray(self.b_visible.numpy())
            with np.errstate(over="ignore"):  # an infinite table is refused where it matters
                self._kernel_arrays = {
                    "w": w,
                    "w_t": w_t,
                    "exp_w": np.exp(w_t),
                    "exp_neg_w": np.exp(-w_t),
                    "exp_w_rows": np.exp(w),
                    "exp_neg_w_rows": np.exp(-w),
                    "b_vis": b,
                    "exp_b": np.exp(b),
                    "exp_neg_b": np.exp(-b),
                    "c": np.ascontiguousarray(self.b_hidden.numpy()),
                    "ratio_bound": np.array([float((np.abs(w).sum(0) + np.abs(b)).max())]),
                }
        return self._kernel_arrays

    def ratio_tables(self) -> tuple[np.ndarray, ...]:
        """The arrays ``rbm_kernels.exact_ratios`` and ``balanced_steps`` read, in their order."""
        arrays = self.kernel_arrays()
        return tuple(arrays[k] for k in RATIO_TABLES)

    def _compiled_ratios(self, flat: torch.Tensor, a: torch.Tensor) -> bool:
        """Whether the ratios at ``flat`` may come from the compiled kernel: float64 states on
        the CPU with nothing to differentiate, numba installed, finite shift tables."""
        if self._kernel_ratios is None:  # once per model: its weights never change
            from lsbcore.backends import compiled_available
            from lsbcore.backends.rbm_kernels import MAX_SHIFT

            self._kernel_ratios = self.max_abs_weight <= MAX_SHIFT and compiled_available()
        return (
            self._kernel_ratios
            and flat.device.type == "cpu"
            and flat.dtype == a.dtype == torch.float64
            and not (flat.requires_grad or a.requires_grad)
        )

    # ----------------------------------------------------------------- ground truth
    def gibbs(self, n_chains: int, steps: int, seed: int = 0) -> torch.Tensor:
        """Visible states ``[n_chains, n_visible]`` of +-1 after ``steps`` sweeps of the exact
        alternating block Gibbs sampler, ``h ~ p(h | v) = Bernoulli(sigmoid(c + W v))`` then
        ``v ~ p(v | h) = Bernoulli(sigmoid(b + W^T h))``, from uniform states; ``seed`` seeds
        the generator it draws from."""
        n_chains = integer(n_chains, "n_chains", 1, 100_000)
        steps = integer(steps, "steps", 0, 10**9)
        seed = integer(seed, "seed", 0, 2**63 - 1)
        if n_chains * max(self.n_visible, self.n_hidden) > MAX_VALUES:
            raise ValueError(
                f"{n_chains:,} chains of {self.describe()} would hold more than {MAX_VALUES:,} "
                "numbers per layer; use fewer chains."
            )
        W, b, c = self.W, self.b_visible, self.b_hidden
        generator = torch.Generator().manual_seed(seed)
        v = torch.bernoulli(
            torch.full((n_chains, self.n_visible), 0.5, dtype=torch.float64), generator=generator
        )
        for _ in range(steps):
            h = torch.bernoulli(torch.sigmoid(torch.addmm(c, v, W.T)), generator=generator)
            v = torch.bernoulli(torch.sigmoid(torch.addmm(b, h, W)), generator=generator)
        return 2.0 * v - 1.0


__all__ = ["RBM", "softplus", "RANDOM_WEIGHT_STD"]
