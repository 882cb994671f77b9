"""Locally balanced samplers: propose flipping site ``i`` with ``Q(i|x) = g(t_i) / Z(x)`` (spec 2).

With a balancing ``g`` the Metropolis-Hastings acceptance is ``A = min(1, Z(x) / Z(x'))``, and only
the flipped site's neighbourhood changes ``t``, so ``Z(x')`` is ``Z(x)`` plus a few terms.

Cached state on top of ``Sampler`` (per chain ``b``), and the invariant tying it:

- ``shift [B]``: a per-chain log-scale, so that ``g`` values far beyond float range stay finite;
- ``gn [B, (nb + 1) * bs]``: ``exp(log_g(s) - shift)``, sites laid out in ``nb`` blocks of
  ``bs ~ sqrt(D)`` (zero padding after the last site), then a spare block for rejected writes;
- ``block_sum [B, nb]``: ``gn`` summed per block; ``Z [B]``: ``block_sum`` summed.

``gn`` is recomputed from the exact ``s`` for every changed site, and the sums of every touched
block are re-added from ``gn`` (not nudged by differences), so the sums never drift; ``s`` itself
is resynced from ``x`` every ``resync_every`` steps. Choosing a site is two-level: a block with
probability ``block_sum / Z``, then a site inside it: O(sqrt(D)) work per step, whatever the shape.

This module is the proposal rule and its torch step; ``balanced_backends`` runs the same steps
on the compiled and device backends, and ``balanced_learning`` learns ``g`` (Algorithm 1).
"""

from __future__ import annotations

import math

import torch

from lsbcore.balancing.functions import Balancing
from lsbcore.numerics import LOG_RANGE, MAX_LOG_G
from lsbcore.samplers.balanced.backends import BalancedBackends
from lsbcore.samplers.balanced.common import OPTIMIZERS, take_balancing
from lsbcore.samplers.balanced.learning import BalancedLearning
from lsbcore.samplers.base import Sampler
from lsbcore.samplers.chain_base import StepInfo

__all__ = ["OPTIMIZERS", "LocallyBalancedSampler"]


class LocallyBalancedSampler(BalancedLearning, BalancedBackends, Sampler):
    """Locally balanced single-flip sampler for a fixed or learnable balancing function.

    ``common``: ``seed``, ``device``, ``x0``, ``resync_every``, ``backend`` (see ``Sampler``).

    Options:
        lr: learning rate for learnable functions (default 1e-2).
        optimizer: ``"adam"`` (the authors' code) or ``"sgd"`` (SGD with momentum 0.9, the paper's
            appendix).
        restart_prob: the paper's ``pi``: during learning, each chain restarts from a uniform
            random state with this probability per step (default 1e-8).
    """

    def __init__(
        self,
        target,
        n_chains: int,
        balancing: Balancing,
        lr: float = 1e-2,
        optimizer: str = "adam",
        restart_prob: float = 1e-8,
        objective: str = "exact",
        name: str | None = None,
        **common,
    ):
        take_balancing(self, balancing)  # balancing, learnable, learning_failed, history
        self.name = name or balancing.name
        d = target.n_sites
        self._block = math.isqrt(d - 1) + 1 if d > 1 else 1  # bs = ceil(sqrt(D))
        self._n_blocks = -(-d // self._block)
        self._parameter_writes = 0  # see _write_learned_params
        self._cache_stale = False
        super().__init__(target, n_chains, **common)
        self._torch_without_kernel(common.get("backend", "auto"))
        self.balancing.to(self.device)
        self._ready = True
        self._setup_learning(lr, optimizer, restart_prob, objective)
        self._renormalise()

    # ----------------------------------------------------------------- backend
    def set_backend(self, backend: str) -> None:
        before = self.backend
        super().set_backend(backend)
        try:
            self._torch_without_kernel(backend)
        except ValueError:
            self.backend = before  # a refused switch leaves the sampler as it was
            raise

    def _torch_without_kernel(self, asked: str) -> None:
        """A balancing function the compiled kernels do not know takes torch steps: ``"auto"``
        resolves to torch for it, and ``"compiled"`` asked for is refused."""
        if self.backend != "compiled" or self._kernel_function() is not None:
            return
        if asked == "compiled":
            raise ValueError(
                f"the {self.name!r} sampler has no compiled steps: the compiled kernels know "
                "the fixed functions, LSB 1, LSB 2 and LSB 2', not its balancing function "
                f"{self.balancing.name!r}; use backend='torch' or 'auto' (which runs torch)."
            )
        self.backend = "torch"

    # ----------------------------------------------------------------- cache
    def _padded_width(self) -> int:
        # the blocks, then one spare block whose last column takes rejected writes
        return (self._n_blocks + 1) * self._block

    def _index_table(self, neighbourhood: torch.Tensor) -> torch.Tensor:
        # row 0: the neighbourhood; row 1: the block of each slot (for the block sums)
        return torch.stack([neighbourhood, neighbourhood // self._block], 1)

    def _after_resync(self) -> None:
        if getattr(self, "_ready", False):
            self._renormalise()

    def _replaced(self) -> None:
        super()._replaced()
        self._log_p_learning = None  # the learning objective's log p~ is of the old state

    @torch.no_grad()
    def _renormalise(self, log_g: torch.Tensor | None = None) -> None:
        """Rebuild ``gn``, block sums and ``Z`` from ``s`` with a fresh shift (the chain's max).

        ``log_g`` (``[B, D]``), when given, must be ``balancing.log_g(s)`` for the current state.
        """
        if log_g is None:
            log_g = self.balancing.log_g(self._s[:, : self.n_sites])  # [B, D]
        self._cache_stale = False
        self._shift = log_g.max(1, keepdim=True).values  # [B, 1]
        width = self._n_blocks * self._block
        gn = torch.zeros(self.n_chains, self._width, dtype=torch.float64, device=self.device)
        gn[:, : self.n_sites] = torch.exp(log_g - self._shift)
        self._gn = gn
        self._gn_blocks = gn[:, :width].view(self.n_chains, self._n_blocks, self._block)
        self._gn_rows = gn.view(self.n_chains * (self._n_blocks + 1), self._block)
        self._row_offset = (self._chains * (self._n_blocks + 1)).unsqueeze(1)  # [B, 1]
        self._block_sum = self._gn_blocks.sum(2)  # [B, nb]
        self._Z = self._block_sum.sum(1, keepdim=True)  # [B, 1]

    def _extra_invariant_errors(self) -> list[float]:
        if self._cache_stale:  # after learning the g-cache is rebuilt at the next frozen step
            self._renormalise()
        s = self.target.flip_log_ratios(self.x).reshape(self.n_chains, -1)
        log_g = self.balancing.log_g(s)
        log_z = torch.logsumexp(log_g, 1)
        cached_log_z = (torch.log(self._Z) + self._shift).squeeze(1)
        gn = torch.exp(log_g - self._shift)
        gn_gap = ((self._gn[:, : self.n_sites] - gn).abs() / self._Z).max()
        return [float((cached_log_z - log_z).abs().max()), float(gn_gap)]

    # ----------------------------------------------------------------- proposals
    def _choose_site(self, u: torch.Tensor) -> torch.Tensor:
        """Site ``i ~ gn / Z`` per chain (``[B]``) from uniforms ``u[0], u[1]``: block, then column.

        Each level draws against its own total, so a block is chosen with probability
        ``block_sum / Z`` and a site inside it with ``gn / block_sum``.
        """
        # u < 1 - 2^-52 keeps each level strictly below its total: the search lands on a
        # positive term, never past the end or on padding (see sampler.BELOW_ONE)
        cum_blocks = self._block_sum.cumsum(1)
        block = torch.searchsorted(cum_blocks, u[0] * cum_blocks[:, -1:], right=True)  # [B, 1]
        cum_row = self._gn_rows.index_select(0, (self._row_offset + block).view(-1)).cumsum(1)
        col = torch.searchsorted(cum_row, u[1] * cum_row[:, -1:], right=True)
        return (block * self._block + col).view(-1)

    def proposal_log_probs(self) -> torch.Tensor:
        """``log Q(i | x)`` for every chain and site, ``[B, H, W]`` (for the teaching views)."""
        with torch.no_grad():
            log_g = self.balancing.log_g(self._s[:, : self.n_sites])
            return (log_g - torch.logsumexp(log_g, 1, keepdim=True)).view(self.x.shape)

    def flip_probabilities(self) -> torch.Tensor:
        """``T(x -> x with i flipped) = Q(i|x) A`` for every chain and site, ``[B, H, W]``.

        Computed from the sampler's cached state with the same acceptance as ``step``: exact
        transition probabilities for tests and for the app's slow-motion step. O(B * D) work.
        """
        with torch.no_grad():
            if self._cache_stale:  # learning changed g: the cached g, shift and Z are old
                self._renormalise()
            d = self.n_sites
            index = self._site_index[:, 0]  # [D, K]
            sign, coupling, unique = self._site_values.unbind(1)
            x_nb, s_nb, g_old = self._x[:, index], self._s[:, index], self._gn[:, index]
            s_new = s_nb * sign + coupling * x_nb * x_nb[..., :1]  # [B, D, K]
            g_new = torch.exp(
                (self.balancing.log_g(s_new) - self._shift.unsqueeze(2)).clamp_(max=MAX_LOG_G)
            )
            z = self._Z  # [B, 1]
            z_new = z + ((g_new - g_old) * unique).sum(2)  # [B, D]
            probs = g_old[..., 0] / z * (z / torch.maximum(z, z_new))
            return probs[:, :d].reshape(self.x.shape)

    def _describe_last(self, i, z, z_new, accept) -> StepInfo:
        return StepInfo(
            site=i,
            accept_prob=(z / torch.maximum(z, z_new)).squeeze(1),  # A = Z / max(Z, Z')
            accepted=accept.squeeze(1),
        )

    def _propose(self, i: torch.Tensor):
        """Everything about "flip ``i``": neighbourhood, new values and ``Z(x')`` per chain."""
        index, unique, _, s_old, x_new, s_new = self._flip_neighbourhood(i)
        g_old = self._gn.gather(1, index[:, 0])
        g_new = torch.exp((self.balancing.log_g(s_new) - self._shift).clamp_(max=MAX_LOG_G))
        z_new = self._Z + ((g_new - g_old) * unique).sum(1, keepdim=True)
        return index, s_old, x_new, s_new, g_old, g_new, z_new

    def _commit(self, accept, index, x_new, s_new, g_new) -> None:
        """Write the flip where accepted, then re-add the sums of every touched block."""
        where = self._write(accept, index[:, 0], x_new, s_new)
        self._gn.scatter_(1, where, g_new)
        blocks = index[:, 1]  # [B, K]
        rows = self._gn_blocks.gather(1, blocks.unsqueeze(2).expand(-1, -1, self._block))
        self._block_sum.scatter_(1, blocks, rows.sum(2))
        self._Z = self._block_sum.sum(1, keepdim=True)
        low, high = torch.aminmax(self._Z)
        if not (math.exp(-LOG_RANGE) < float(low) and float(high) < math.exp(LOG_RANGE)):
            self._renormalise()

    def _step(self, u) -> None:
        if self._cache_stale:  # the last learning step changed g everywhere
            self._renormalise()
        i = self._choose_site(u)
        index, _, x_new, s_new, _, g_new, z_new = self._propose(i)
        # A = min(1, Z / Z') = Z / max(Z, Z'): no cancellation, and Z' = inf simply rejects
        accept = u[2] * torch.maximum(self._Z, z_new) < self._Z
        self._last_refs = (i, self._Z, z_new, accept)  # references only: nothing computed here
        self._commit(accept, index, x_new, s_new, g_new)
