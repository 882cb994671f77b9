"""Block Gibbs on the device, one launch per colour of a sweep (``kernels.checkerboard_steps``).

The CPU kernel visits the sites of colour ``c`` one by one; none of them are neighbours, so each
flips with probability ``sigmoid(s_i)`` read against ``u[t, b, i]`` whatever the others did, and
a site ``j`` of another colour receives ``s_j += coupling_ij x_j x_i`` from each flipped
neighbour ``i``, in increasing ``i`` (the CPU's visiting order). The kernel computes every site's
new value from the *old* state alone (pull, not push): site ``j`` re-evaluates its colour-``c``
neighbours' flip decisions (the same comparison on the same numbers) and adds their terms in
increasing ``i``. So no site is written by two programs (no atomics, no races), and ``x``, ``s``
and the flip counts are bitwise those of the CPU kernel (its products with +-1 are exact, and
launches turn off ``a * b + c`` contraction as numba does). The flip comparison reads ``exp``
from another library (numpy in the interpreter, libdevice on CUDA): a decision could differ
only for a uniform within an ulp of its probability. The state is double-buffered: a launch
reads one copy and writes the other.

The statistics (log p~, magnetisation, overlap) change by per-site terms summed per program into
``partial [steps, colours, B, tiles, 4]`` and added up once per chunk: the magnetisation, the
overlap and the counts are integers (exact in any order); log p~ is summed in another order than
the CPU's, so it agrees within rounding (1e-12 relative), not bitwise.
"""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from lsbcore.backends.device import next_power_of_2

# elements (chains x sites) one program handles: at 256, 4 warps hold 2 each and ptxas reports
# no register spills for sm_90 (1,024: 504 bytes spilled; 4,096: 6.6 kB); the tests widen it
MAX_TILE = 256


def pull_tables(neighbourhood: np.ndarray, coupling: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For every site ``j``, the sites ``i`` whose flip changes ``s_j`` with the coupling
    ``coupling[i, k]`` read from ``i``'s row (as the CPU flip does), sorted by ``i``: ``[D, K']``
    each, unused slots repeating ``j`` with coupling 0."""
    n, k = neighbourhood.shape
    source = np.repeat(np.arange(n), k)
    target = neighbourhood.reshape(-1)
    weight = coupling.reshape(-1)
    real = target != source  # the site itself and its padding slots
    source, target, weight = source[real], target[real], weight[real]
    order = np.lexsort((source, target))  # by target, then by source
    source, target, weight = source[order], target[order], weight[order]
    counts = np.bincount(target, minlength=n)
    width = max(1, int(counts.max()) if counts.size else 1)
    slot = np.arange(target.size) - np.repeat(np.cumsum(counts) - counts, counts)
    sites = np.repeat(np.arange(n)[:, None], width, 1)
    weights = np.zeros((n, width))
    sites[target, slot] = source
    weights[target, slot] = weight
    return sites.astype(np.int32), weights


@triton.jit
def _flips(u, s):
    # as the CPU kernel: u < 1 / (1 + exp(-s)), the Gibbs probability sigmoid(s_i)
    return u < 1.0 / (1.0 + tl.exp(-s))


@triton.jit(do_not_specialize=("c",))  # per-launch values: one compile (__init__)
def colour_update_kernel(
    x_in, s_in, x_out, s_out, u, colour, pull_site, pull_coupling, truth, partial,
    c, n_chains, n_sites, width, n_tiles,
    PULL: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """One colour ``c`` of one sweep for a tile of chains x sites. ``x, s [B, width]``,
    ``u [B, n_sites]`` (this sweep's uniforms), ``pull_* [n_sites, PULL]``, ``partial [B, n_tiles,
    4]`` (this launch's slice): sites flipped, change of log p~, of sum x, of x . truth."""
    rows = (tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)).to(tl.int64)  # [BLOCK_B]
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)  # [BLOCK_D]
    row_ok = rows < n_chains
    col_ok = cols < n_sites
    ok = row_ok[:, None] & col_ok[None, :]  # [BLOCK_B, BLOCK_D]
    at = rows[:, None] * width + cols[None, :]
    x = tl.load(x_in + at, mask=ok, other=1.0)
    s = tl.load(s_in + at, mask=ok, other=0.0)
    u_own = tl.load(u + rows[:, None] * n_sites + cols[None, :], mask=ok, other=1.0)
    mine = tl.load(colour + cols, mask=col_ok, other=-1) == c  # [BLOCK_D]
    flip = ok & mine[None, :] & _flips(u_own, s)
    # s_j += coupling_ij x_j x_i for each flipped colour-c neighbour i, in increasing i
    s_new = s
    for k in tl.static_range(PULL):
        i = tl.load(pull_site + cols * PULL + k, mask=col_ok, other=0)  # [BLOCK_D]
        w = tl.load(pull_coupling + cols * PULL + k, mask=col_ok, other=0.0)
        theirs = tl.load(colour + i, mask=col_ok, other=-1) == c
        at_i = rows[:, None] * width + i[None, :]
        x_i = tl.load(x_in + at_i, mask=ok, other=1.0)
        s_i = tl.load(s_in + at_i, mask=ok, other=0.0)
        u_i = tl.load(u + rows[:, None] * n_sites + i[None, :], mask=ok, other=1.0)
        pulled = ok & theirs[None, :] & _flips(u_i, s_i)
        s_new = tl.where(pulled, s_new + w[None, :] * x * x_i, s_new)
    s_new = tl.where(flip, -s, s_new)  # s_i -> -s_i (a colour-c site has no colour-c neighbour)
    tl.store(x_out + at, tl.where(flip, -x, x), mask=ok)
    tl.store(s_out + at, s_new, mask=ok)
    # the statistics as write_flip changes them: log p~ gains s_i, sum x and x . truth lose 2 x_i
    t = tl.load(truth + cols, mask=col_ok, other=0.0)
    counted = tl.where(flip, 1.0, 0.0)
    out = partial + (rows * n_tiles + tl.program_id(1)) * 4
    tl.store(out, tl.sum(counted, 1), mask=row_ok)
    tl.store(out + 1, tl.sum(tl.where(flip, s, 0.0), 1), mask=row_ok)
    tl.store(out + 2, tl.sum(counted * -2.0 * x, 1), mask=row_ok)
    tl.store(out + 3, tl.sum(counted * -2.0 * x * t[None, :], 1), mask=row_ok)


class BlockSweeps:
    """The device tables of one target's colouring, and the launches of a chunk of sweeps."""

    def __init__(self, neighbourhood, coupling, colour, n_chains: int, device: torch.device):
        sites, weights = pull_tables(neighbourhood.cpu().numpy(), coupling.cpu().numpy())
        self.pull_site = torch.from_numpy(sites).to(device)
        self.pull_coupling = torch.from_numpy(weights).to(device)
        self.colour = colour.to(device=device, dtype=torch.int32).contiguous()
        self.n_colours = int(colour.max()) + 1
        self.n_sites = int(colour.numel())
        self.n_chains = n_chains
        self.block_d = min(next_power_of_2(self.n_sites), MAX_TILE)
        self.block_b = min(next_power_of_2(n_chains), max(1, MAX_TILE // self.block_d))
        self.grid = (triton.cdiv(n_chains, self.block_b), triton.cdiv(self.n_sites, self.block_d))

    def run(self, x: torch.Tensor, s: torch.Tensor, u: torch.Tensor, truth: torch.Tensor):
        """``m`` sweeps of every chain in place on ``x, s [B, width]`` from ``u [m, B, D]``.
        Returns the per-sweep changes ``[m, B, 4]``: sites flipped, log p~, sum x, x . truth."""
        m = u.shape[0]
        tiles = self.grid[1]
        partial = torch.zeros(m, self.n_colours, self.n_chains, tiles, 4, dtype=torch.float64,
                              device=x.device)  # fmt: skip
        buffers = [(x, s), (x.clone(), s.clone())]  # spare columns copied too
        now = 0
        for t in range(m):
            for c in range(self.n_colours):
                (x_in, s_in), (x_out, s_out) = buffers[now], buffers[1 - now]
                colour_update_kernel[self.grid](
                    x_in, s_in, x_out, s_out, u[t], self.colour, self.pull_site,
                    self.pull_coupling, truth, partial[t, c], c, self.n_chains, self.n_sites,
                    x.shape[1], tiles,
                    PULL=self.pull_site.shape[1], BLOCK_B=self.block_b, BLOCK_D=self.block_d,
                    enable_fp_fusion=False,  # numba's rounding (no a * b + c contraction)
                )  # fmt: skip
                now = 1 - now
        if now:  # the last colour wrote the spare copy
            x.copy_(buffers[1][0])
            s.copy_(buffers[1][1])
        return partial.sum((1, 3))
