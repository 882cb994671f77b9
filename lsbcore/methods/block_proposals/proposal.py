"""The block proposal ``q(x_B | c)``: an autoregressive network over the block's sites, given the
motif's coefficients ``c`` (``lsbcore.methods.block_proposals.motif``).

Why autoregressive: a proposal used by Metropolis-Hastings must be sampled *and* evaluated
exactly, and ``q`` must reach every state. An autoregressive model over the ``k^2`` sites
(row-major) gives both, ``log q(x) = sum_i log sigmoid(x_i l_i(x_<i, c))``, and a logit
is never infinite, so ``q > 0`` everywhere. A mixture of factorised Bernoullis is cheaper to
sample but cannot express the strong pairwise couplings of a block inside one component
without many of them; the autoregressive form does with one.

Each logit is a known part plus a learned correction:

    l_i = 2 sum_{S: last(S) = i} c_S prod_{j in S, j != i} x_j   +   MADE_i(x_<i, asinh c),

the first part the exact conditional of ``x_i`` given ``x_<i`` were the later sites absent
(exact for the last site), the second a masked network (Germain et al.'s MADE) that learns
what the later sites change. An untrained network (its correction zero at the start) is
already a sensible proposal; training only raises the acceptance. Coefficients enter the
network through ``asinh``, so fields of a few hundred (clean photos) do not swamp it.

The network computes in its parameters' dtype: float32 to train, float64 in the sampler, so
that ``log q`` of a state is the same number (to 1e-16) in whatever batch it is scored, and the
Metropolis-Hastings test reads one ``q`` forwards and backwards. The sampler's draw sums its own
``log q`` as it goes (``propose``): the same function evaluated in another order, equal to
``log_prob``'s to a relative 1e-14 (1e-15 at ordinary coefficients), below the rounding of the
exact target ratio it is added to.
"""

from __future__ import annotations

import io
import math

import torch
from torch import nn
from torch.nn import functional as F

from lsbcore.checks import integer
from lsbcore.methods.block_proposals.motif import GridMotif
from lsbcore.out_path import write_bytes
from lsbcore.weights_file import load_model

#: Largest weights file read (the shipped ones are tens of kB).
MAX_WEIGHTS_BYTES = 8 << 20
#: Hidden width and depth bounds of the correction network.
MAX_HIDDEN = 512
MAX_DEPTH = 4


def tanh(x: torch.Tensor) -> torch.Tensor:
    """``tanh`` as ``2 sigmoid(2x) - 1``: the same function to 4e-16, three times faster than
    ``torch.tanh`` in float64 on the CPU, where the sampling loop spends most of its time. The
    draw and ``log_prob`` both use it, so ``q`` is one function."""
    return 2.0 * torch.sigmoid(2.0 * x) - 1.0  # out of place: training takes its gradient


class MaskedLinear(nn.Linear):
    """A linear layer whose weight is multiplied by a fixed 0/1 mask (MADE's autoregression)."""

    def __init__(self, n_in: int, n_out: int, mask: torch.Tensor):
        super().__init__(n_in, n_out)
        self.register_buffer("mask", mask.to(torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight * self.mask, self.bias)


class BlockProposal(nn.Module):
    """``q(x_B | c)`` on ``k x k`` blocks (see the module docstring).

    ``hidden`` units per layer, ``depth`` masked hidden layers; ``seed`` sets the initial
    weights. ``info`` carries what training recorded (ranges, steps, loss), saved with it.
    """

    def __init__(self, k: int, hidden: int = 64, depth: int = 2, seed: int = 0):
        super().__init__()
        self.motif = GridMotif(k)
        self.k, n, t = self.motif.k, self.motif.n, self.motif.n_terms
        self.hidden = integer(hidden, "hidden", 1, MAX_HIDDEN)
        self.depth = integer(depth, "depth", 1, MAX_DEPTH)
        self.info: dict = {}
        generator = torch.Generator().manual_seed(integer(seed, "seed", 0, 2**63 - 1))
        # MADE degrees: input site i has degree i + 1, hidden units 0 .. n - 1 in turn (a unit
        # of degree 0 reads the context alone, so the first site's logit is a nonlinear function
        # of the context too), and output i sees the units of degree <= i: logit i reads x_<i only
        d_in = torch.arange(1, n + 1)
        d_hidden = torch.arange(self.hidden) % n
        masks = [d_hidden.unsqueeze(1) >= d_in.unsqueeze(0)]
        masks += [d_hidden.unsqueeze(1) >= d_hidden.unsqueeze(0)] * (self.depth - 1)
        out_mask = d_in.unsqueeze(1) > d_hidden.unsqueeze(0)  # [n, H]
        widths = [n] + [self.hidden] * self.depth
        self.layers = nn.ModuleList(
            MaskedLinear(widths[j], widths[j + 1], masks[j]) for j in range(self.depth)
        )
        self.context = nn.ModuleList(nn.Linear(t, self.hidden) for _ in range(self.depth))
        self.out = MaskedLinear(self.hidden, n, out_mask)
        self.out_context = nn.Linear(t, n)  # the first site's logit reads the context only
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=generator) / math.sqrt(max(1, p.shape[-1])))
            for layer in (self.out, self.out_context):  # the correction starts at zero
                layer.weight.zero_()
                layer.bias.zero_()
        terms = self.motif.terms
        others = torch.where(terms == self.motif.last.unsqueeze(1), n, terms)  # [T, 3]
        self.register_buffer("_others", others, persistent=False)
        self.register_buffer("_last", self.motif.last.clone(), persistent=False)
        self._closing = [torch.nonzero(self.motif.last == i).view(-1) for i in range(n)]
        # hidden units sorted by degree: site i's logit reads only the first ``_reads[i]`` of
        # them (those of degree <= i), and those read only each other, so the sampling loop
        # computes a growing prefix of every layer instead of the whole network k^2 times
        self.register_buffer("_by_degree", torch.argsort(d_hidden, stable=True), persistent=False)
        self._reads = [int((d_hidden <= i).sum()) for i in range(n)]

    # ----------------------------------------------------------------- logits
    def known_logits(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """``2 sum_{last(S) = i} c_S prod_{S - i} x``: the exact last-site conditional's logits,
        ``[N, k^2]`` float64 (``x [N, k^2]``, unset sites 0; ``c [N, T]``)."""
        one = torch.ones_like(x[:, :1])
        rest = torch.cat([x, one], 1)[:, self._others].prod(-1)  # [N, T]
        logits = torch.zeros(x.shape[0], self.motif.n, dtype=torch.float64, device=x.device)
        return logits.index_add_(1, self._last, 2.0 * c * rest)

    def context_terms(self, c: torch.Tensor) -> list[torch.Tensor]:
        """What the context adds to each hidden layer and to the output: computed once per
        proposal, not once per site of the sampling loop."""
        a = torch.asinh(c).to(self.out.weight.dtype)
        return [context(a) for context in self.context] + [self.out_context(a)]

    def correction(self, x: torch.Tensor, c: torch.Tensor, terms=None) -> torch.Tensor:
        """The network's part of the logits, ``[N, k^2]`` float64 (``terms``: the context's
        ``context_terms``, when already computed)."""
        terms = self.context_terms(c) if terms is None else terms
        h = x.to(self.out.weight.dtype)
        for layer, term in zip(self.layers, terms, strict=False):
            h = tanh(layer(h) + term)
        return (self.out(h) + terms[-1]).to(torch.float64)

    def logits(self, x: torch.Tensor, c: torch.Tensor, terms=None) -> torch.Tensor:
        """``l_i(x_<i, c)`` for every site, ``[N, k^2]`` float64."""
        x, c = x.to(torch.float64), c.to(torch.float64)
        return self.known_logits(x, c) + self.correction(x, c, terms)

    # ----------------------------------------------------------------- q
    def log_prob(self, x: torch.Tensor, c: torch.Tensor, terms=None) -> torch.Tensor:
        """``log q(x | c)`` ``[N]`` float64, for block states ``x [N, k^2]`` of +-1 (``terms``:
        the context's ``context_terms``, when already computed)."""
        x = x.to(torch.float64)
        return F.logsigmoid(x * self.logits(x, c, terms)).sum(1)

    def propose(self, c: torch.Tensor, x: torch.Tensor, generator: torch.Generator):
        """What one Metropolis-Hastings test needs: a draw ``y ~ q(. | c)`` and ``log q`` of
        ``y`` and of the current states ``x [N, k^2]``, ``([N, k^2], [N], [N])``. The context
        terms are computed once; ``log q(y)`` is summed as the draw goes, ``log q(x)`` is one
        ``log_prob`` call. The two ways agree to rounding (the module docstring), below that of the
        target ratio itself, so the test reads one ``q`` forwards and backwards."""
        terms = self.context_terms(c)
        y, log_q_y = self._draw(c, terms, generator)
        return y, log_q_y, self.log_prob(x, c, terms)

    def sample(self, c: torch.Tensor, generator: torch.Generator):
        """One block state per row of ``c`` (``[N, T]``) and its ``log q``: ``([N, k^2], [N])``,
        site by site in row-major order, from the generator's uniforms. ``log q`` is scored by
        ``log_prob``, the function the reverse move reads."""
        terms = self.context_terms(c)
        x = self._draw(c, terms, generator)[0]
        return x, self.log_prob(x, c, terms)

    def _draw(self, c: torch.Tensor, terms: list[torch.Tensor], generator: torch.Generator):
        """The draws of ``sample`` and their ``log q``: ``([N, k^2], [N])``, one uniform per site.

        The loop computes what site ``i`` needs and nothing more: the first layer's input is
        updated by one column per site (it is linear in ``x``), only the hidden units of degree
        at most ``i`` (a prefix in ``_by_degree`` order) and row ``i`` of the output layer are
        computed, and the known logit of site ``i`` sums only the terms that close there. The
        layers carry ``g = sigmoid(2 a)`` for ``tanh(a) = 2 g - 1``, the 2 and -1 folded into
        the next layer's weights and bias: one product and one sigmoid per layer and site. The
        logits, and so ``log q``, agree with ``logits`` and ``log_prob`` to rounding."""
        n_rows, n = c.shape[0], self.motif.n
        c = c.to(torch.float64)
        dtype = self.out.weight.dtype
        x = torch.zeros(n_rows, n + 1, dtype=torch.float64, device=c.device)
        x[:, n] = 1.0  # the constant +1 that terms of fewer than three sites read
        u = torch.rand(n_rows, n, generator=generator, dtype=torch.float64, device=c.device)
        order = self._by_degree
        first = self.layers[0]
        w_first = 2.0 * (first.weight * first.mask)[order].T  # [n, H], units by degree
        pre = 2.0 * (first.bias + terms[0])[:, order]  # [N, H]: 2 a of the first layer, x = 0
        inner = []  # 2 (W (2 g - 1) + b + term) = (4 W) g + 2 (b + term - W 1)
        for layer, term in zip(self.layers[1:], terms[1:-1], strict=True):
            w = (layer.weight * layer.mask)[order][:, order]
            inner.append((4.0 * w.T, 2.0 * ((layer.bias + term)[:, order] - w.sum(1))))
        w_out = (self.out.weight * self.out.mask)[:, order]  # [n, H]
        # (2 g - 1) . w_out[i] + out biases = (2 w_out[i]) . g + (out biases - w_out[i] . 1)
        out_bias = self.out.bias + terms[-1] - w_out.sum(1)  # [N, n]
        w_out = 2.0 * w_out
        c2 = 2.0 * c  # the known logits' factor 2, once
        logits = torch.empty(n_rows, n, dtype=torch.float64, device=c.device)
        for i in range(n):
            m = self._reads[i]  # the units site i reads, and all they read
            g = torch.sigmoid(pre[:, :m])
            for weight, bias in inner:
                g = torch.sigmoid_(torch.addmm(bias[:, :m], g, weight[:m, :m]))
            closing = self._closing[i]  # the terms whose last site is i
            rest = x[:, self._others[closing]].prod(-1)  # [N, t_i]
            known = (c2[:, closing] * rest).sum(1)
            learned = g @ w_out[i, :m] + out_bias[:, i]
            logit = torch.add(known, learned.to(torch.float64), out=logits[:, i])
            x[:, i] = torch.where(u[:, i] < torch.sigmoid(logit), 1.0, -1.0)
            pre.addcmul_(x[:, i : i + 1].to(dtype), w_first[i])  # pre is this loop's own
        x = x[:, :n].contiguous()
        return x, F.logsigmoid(x * logits).sum(1)

    def all_log_probs(self, c: torch.Tensor) -> torch.Tensor:
        """``log q`` of every block state (``motif.states``), ``[N, 2^(k^2)]``: the proposal by
        brute force, for exact checks and the KL to the true conditional."""
        states = self.motif.states.to(c.device)
        m = states.shape[0]
        out = torch.empty(c.shape[0], m, dtype=torch.float64, device=c.device)
        rows = max(1, (1 << 20) // m)  # instances scored at once
        for first in range(0, c.shape[0], rows):
            part = c[first : first + rows]
            x = states.repeat(part.shape[0], 1)
            out[first : first + rows] = self.log_prob(x, part.repeat_interleave(m, 0)).view(-1, m)
        return out

    # ----------------------------------------------------------------- files
    def save(self, path) -> None:
        """Write the weights, shape and ``info`` to ``path`` (a torch file of tensors only)."""
        shape = {"k": self.k, "hidden": self.hidden, "depth": self.depth}
        buffer = io.BytesIO()
        torch.save({"shape": shape, "info": self.info, "state": self.state_dict()}, buffer)
        write_bytes(path, buffer.getvalue())  # whole or not at all


def parameter_count(k: int, hidden: int = 64, depth: int = 2, seed: int = 0) -> int:
    """The weights of ``BlockProposal(k, hidden, depth)``, counted without building it: the
    masked layers ``k^2 -> hidden -> ... -> k^2`` and the context's ``T -> hidden`` per layer and
    ``T -> k^2`` (``T`` the motif's terms), each with its bias."""
    motif = GridMotif(k)
    n, t = motif.n, motif.n_terms
    h = integer(hidden, "hidden", 1, MAX_HIDDEN)
    d = integer(depth, "depth", 1, MAX_DEPTH)
    integer(seed, "seed", 0, 2**63 - 1)
    masked = (n + 1) * h + (d - 1) * (h + 1) * h + (h + 1) * n
    return masked + d * (t + 1) * h + (t + 1) * n


def load_proposal(source) -> BlockProposal:
    """A ``BlockProposal`` from a file written by ``save`` (a path or bytes): only tensors and
    plain values are read (``weights_only``), the shape is checked against the file's size
    before the network is built, and every weight must be finite; anything else is refused in
    a sentence (``lsbcore.weights_file.load_model``)."""
    model = load_model(
        source,
        max_bytes=MAX_WEIGHTS_BYTES,
        what="proposal weights",
        kind="a block proposal's weights file",
        build=BlockProposal,
        parameter_count=parameter_count,
    )
    return model.eval().requires_grad_(False)
