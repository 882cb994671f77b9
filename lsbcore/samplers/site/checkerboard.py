"""Checkerboard (two-colour) block Gibbs: every site of one colour resampled at once.

A proper colouring of the target's graph (``Target.colouring``: the checkerboard on a bipartite
lattice, a greedy colouring on any other graph) makes the sites of one colour independent given
the others, so updating them all from their conditionals

    P(flip x_i | x_-i) = t_i / (1 + t_i) = sigmoid(s_i)

is one exact Gibbs block update. One step is a sweep: every colour in turn, each site updated
once. It reuses the base's caches (``x``, ``s``) and their invariant; a flip updates its
neighbours' log-ratios through the target's tables, as a single flip does.
"""

from __future__ import annotations

import numpy as np
import torch

from lsbcore.samplers.base import Sampler


class CheckerboardGibbsSampler(Sampler):
    """Block Gibbs over the colours of a proper colouring; one step is one sweep."""

    name = "checkerboard"

    def __init__(self, target, n_chains: int, **common):
        super().__init__(target, n_chains, **common)
        colour = target.colouring()
        self.n_colours = int(colour.max()) + 1
        order = torch.argsort(colour, stable=True)  # sites by colour, then index
        self._order = order.numpy().astype(np.int64)
        self._classes = [
            c.to(self.device) for c in order.split(torch.bincount(colour).tolist())
        ]  # one index tensor per colour
        self.sites_per_step = self.n_sites
        self.uniforms_per_step = self.n_sites  # one per site per sweep, read u[t, b, site]
        self._flipped = torch.zeros(n_chains, dtype=torch.float64, device=self.device)
        self._sweeps = None  # the device kernels' tables, built on first use

    @property
    def evals_per_step(self) -> int:
        return self.n_sites  # one conditional per site per sweep

    def _step_uniforms(self, u_t: torch.Tensor) -> torch.Tensor:
        return u_t  # [B, D]: site i reads column i

    def _step(self, u: torch.Tensor) -> None:
        d = self.n_sites
        flipped = torch.zeros(self.n_chains, dtype=torch.float64, device=self.device)
        for sites in self._classes:
            x_old, s_old = self._x[:, :d], self._s[:, :d]
            flip = u[:, sites] < torch.sigmoid(s_old[:, sites])  # [B, n_c]
            x_new = x_old.clone()
            x_new[:, sites] = torch.where(flip, -x_old[:, sites], x_old[:, sites])
            s_new = self.target.update_ratios(x_old, x_new, s_old)
            self._x[:, :d], self._s[:, :d] = x_new, s_new
            flipped += flip.sum(1)
        self._n_accepted += flipped.long().unsqueeze(1)
        self._flipped = flipped
        self._stats_resync()

    def _fill_trace(self, trace: torch.Tensor, t: int) -> None:
        trace[t, :, :3] = self._stats.cpu()
        trace[t, :, 3] = self._flipped.cpu()
        trace[t, :, 4] = -1.0

    def _has_kernel(self, learn: bool = False) -> bool:
        return not learn

    def _compiled_steps(self, m: int, u, trace) -> None:
        from lsbcore.backends import kernels, threads

        flipped = np.zeros(self.n_chains)
        chains, tables = self._kernel_chains(trace), self._kernel_tables()
        # a sweep is O(D) per chain: groups of chains sweep on all cores at once
        groups = threads.chain_groups(self.n_chains, self.n_sites)
        calls = [
            (m, threads.chains_of(chains, g), tables, self._order, u[:, g], flipped[g])
            for g in groups
        ]
        threads.run_grouped(kernels.checkerboard_steps, groups, *calls)
        self._flipped = torch.from_numpy(flipped)

    def _has_device_kernel(self) -> bool:
        return True

    def _device_steps(self, m: int, u: torch.Tensor, trace) -> None:
        from lsbcore.backends.device.checkerboard import BlockSweeps

        if self._sweeps is None or self._sweeps[0] is not self.target:  # tables of this target
            sweeps = BlockSweeps(
                self.target.neighbourhood, self.target.coupling, self.target.colouring(),
                self.n_chains, self.device,
            )  # fmt: skip
            self._sweeps = (self.target, sweeps)
        truth = self._truth_values if self._tracking else torch.zeros_like(self._x[0])
        change = self._sweeps[1].run(self._x, self._s, u, truth)  # [m, B, 4], on the device
        flipped = change[:, :, 0]
        self._n_accepted += flipped.sum(0).long().unsqueeze(1)
        self._flipped = flipped[-1]
        if self._tracking:  # statistics after every sweep: one cumulative sum per chunk
            stats = self._stats + change[:, :, 1:].cumsum(0)  # [m, B, 3]
            self._stats = stats[-1].clone()
            if trace is not None:
                trace[:, :, :3] = stats.cpu()
        if trace is not None:
            trace[:, :, 3] = flipped.cpu()
            trace[:, :, 4] = -1.0
