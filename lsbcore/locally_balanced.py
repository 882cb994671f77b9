"""Locally balanced samplers: propose flipping site ``i`` with ``Q(i|x) = g(t_i) / Z(x)`` (spec 2).

With a balancing ``g`` the Metropolis-Hastings acceptance is ``A = min(1, Z(x) / Z(x'))``, and only
the flipped site's neighbourhood changes ``t``, so ``Z(x')`` is ``Z(x)`` plus a few terms.

Cached state on top of ``SingleFlipSampler`` (per chain ``b``), and the invariant tying it:

- ``shift [B]``: a per-chain log-scale, so that ``g`` values far beyond float range stay finite;
- ``gn [B, (nb + 1) * bs]``: ``exp(log_g(s) - shift)``, sites laid out in ``nb`` blocks of
  ``bs ~ sqrt(D)`` (zero padding after the last site), then a spare block for rejected writes;
- ``block_sum [B, nb]``: ``gn`` summed per block; ``Z [B]``: ``block_sum`` summed.

``gn`` is recomputed from the exact ``s`` for every changed site, and the sums of every touched
block are re-added from ``gn`` (not nudged by differences), so the sums never drift; ``s`` itself
is resynced from ``x`` every ``resync_every`` steps. Choosing a site is two-level: a block with
probability ``block_sum / Z``, then a site inside it: O(sqrt(D)) work per step, whatever the shape.
"""

from __future__ import annotations

import math
import warnings

import torch

from lsbcore.balancing import Balancing
from lsbcore.history import LearningHistory
from lsbcore.objective import lsb_loss
from lsbcore.sampler import SingleFlipSampler

# Z is kept inside [e^-LOG_RANGE, e^LOG_RANGE] by re-choosing the shift. One step can multiply Z
# by at most 1/u < 2^53 ~ e^37 when accepted, so float64 (e^709) never overflows in between.
LOG_RANGE = 200.0
OPTIMIZERS = ("adam", "sgd")


class LocallyBalancedSampler(SingleFlipSampler):
    """Locally balanced single-flip sampler for a fixed or learnable balancing function.

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
        seed: int = 0,
        device=None,
        x0=None,
        lr: float = 1e-2,
        optimizer: str = "adam",
        restart_prob: float = 1e-8,
        resync_every: int = 2000,
        name: str | None = None,
    ):
        if not isinstance(balancing, Balancing):
            raise ValueError(f"balancing must be a Balancing, got {type(balancing).__name__}.")
        self.name = name or balancing.name
        self.balancing = balancing
        d = target.n_sites
        self._block = math.isqrt(d - 1) + 1 if d > 1 else 1  # bs = ceil(sqrt(D))
        self._n_blocks = -(-d // self._block)
        self.learnable = balancing.learnable
        self.learning_failed = False
        self.history = LearningHistory()
        super().__init__(
            target, n_chains, seed=seed, device=device, x0=x0, resync_every=resync_every
        )
        self.balancing.to(self.device)
        self._ready = True
        self._setup_learning(lr, optimizer, restart_prob)
        self._renormalise()

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

    @torch.no_grad()
    def _renormalise(self) -> None:
        """Rebuild ``gn``, block sums and ``Z`` from ``s`` with a fresh shift (the chain's max)."""
        log_g = self.balancing.log_g(self._s[:, : self.n_sites])  # [B, D]
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
        s = self.target.flip_log_ratios(self.x).reshape(self.n_chains, -1)
        log_g = self.balancing.log_g(s)
        log_z = torch.logsumexp(log_g, 1)
        cached_log_z = (torch.log(self._Z) + self._shift).squeeze(1)
        gn = torch.exp(log_g - self._shift)
        gn_gap = (self._gn[:, : self.n_sites] - gn).abs().max() / self._Z.min()
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
            d = self.n_sites
            index = self._site_index[:, 0]  # [D, K]
            sign, coupling, unique = self._site_values.unbind(1)
            x_nb, s_nb, g_old = self._x[:, index], self._s[:, index], self._gn[:, index]
            s_new = s_nb * sign + coupling * x_nb * x_nb[..., :1]  # [B, D, K]
            g_new = torch.exp(self.balancing.log_g(s_new) - self._shift.unsqueeze(2))
            z = self._Z  # [B, 1]
            z_new = z + ((g_new - g_old) * unique).sum(2)  # [B, D]
            probs = g_old[..., 0] / z * (z / torch.maximum(z, z_new))
            return probs[:, :d].reshape(self.x.shape)

    def _propose(self, i: torch.Tensor):
        """Everything about "flip ``i``": neighbourhood, new values and ``Z(x')`` per chain."""
        index, unique, _, s_old, x_new, s_new = self._flip_neighbourhood(i)
        g_old = self._gn.gather(1, index[:, 0])
        g_new = torch.exp(self.balancing.log_g(s_new) - self._shift)
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

    def _step(self) -> None:
        u = self._uniform(3)
        i = self._choose_site(u)
        index, _, x_new, s_new, _, g_new, z_new = self._propose(i)
        # A = min(1, Z / Z') = Z / max(Z, Z'): no cancellation, and Z' = inf simply rejects
        accept = u[2] * torch.maximum(self._Z, z_new) < self._Z
        self._commit(accept, index, x_new, s_new, g_new)

    # ----------------------------------------------------------------- learning (spec 5)
    def _setup_learning(self, lr, optimizer, restart_prob) -> None:
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr <= 10:
            raise ValueError(f"lr must be a number in (0, 10], got {lr!r}.")
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}.")
        if not isinstance(restart_prob, (int, float)) or not 0 <= restart_prob <= 1:
            raise ValueError(f"restart_prob must be a probability in [0, 1], got {restart_prob!r}.")
        self.lr, self.optimizer_name, self.restart_prob = float(lr), optimizer, float(restart_prob)
        self.eta_raw = torch.zeros((), dtype=torch.float64, device=self.device, requires_grad=True)
        if not self.learnable:
            self._optimizer = None
            return
        params = [*self.balancing.parameters(), self.eta_raw]
        if optimizer == "adam":
            self._optimizer = torch.optim.Adam(params, lr=self.lr)
        else:
            self._optimizer = torch.optim.SGD(params, lr=self.lr, momentum=0.9)

    @property
    def eta(self) -> float:
        return float(torch.nn.functional.softplus(self.eta_raw.detach()))

    def _restart_some_chains(self) -> None:
        """The paper's Q1: with probability ``pi`` a chain restarts from a uniform random state."""
        u = torch.rand(
            self.n_chains, 1, generator=self.generator, dtype=torch.float64, device=self.device
        )
        restart = u < self.restart_prob
        if bool(restart.any()):
            bits = torch.randint(0, 2, self._x.shape, generator=self.generator, device=self.device)
            fresh = (2 * bits - 1).to(torch.float64)
            self._x = torch.where(restart, fresh, self._x)
            self.resync()

    def _learn_step(self) -> None:
        """One burn-in step of Algorithm 1: propose, update (theta, eta), accept with theta0."""
        if self.learning_failed:
            with torch.no_grad():
                self._step()
            return
        if self.restart_prob > 0:
            with torch.no_grad():
                self._restart_some_chains()
        with torch.no_grad():
            u = self._uniform(4)
            i = self._choose_site(u)
            index, s_old, x_new, s_new, g_old, g_new, z_new = self._propose(i)
            accept = u[2] * torch.maximum(self._Z, z_new) < self._Z  # A with theta0
            # x~: one uniformly chosen site flipped (the one-sample rejection estimate)
            j = (u[3] * self.n_sites).long().clamp_(max=self.n_sites - 1).view(-1)
            _, unique_u, _, s_old_u, _, s_new_u = self._flip_neighbourhood(j)
            unique = self._site_values.index_select(0, i)[:, 2]
            log_q0 = (torch.log(g_old[:, :1]) - torch.log(self._Z)).squeeze(1)  # log Q_theta0
            log_p = self.log_p
        loss = lsb_loss(
            self.balancing,
            s=self._s[:, : self.n_sites],
            s_old=s_old,
            s_new=s_new,
            unique=unique,
            s_old_uniform=s_old_u,
            s_new_uniform=s_new_u,
            unique_uniform=unique_u,
            log_p=log_p,
            log_q0=log_q0,
            eta_raw=self.eta_raw,
        )
        self._optimizer.zero_grad(set_to_none=True)
        loss.backward()
        good = [p.detach().clone() for p in self._learned_params()]
        grads_finite = all(
            p.grad is None or bool(torch.isfinite(p.grad).all()) for p in self._learned_params()
        )
        if bool(torch.isfinite(loss)) and grads_finite:
            self._optimizer.step()
        params_finite = all(bool(torch.isfinite(p).all()) for p in self._learned_params())
        if not (bool(torch.isfinite(loss)) and grads_finite and params_finite):
            with torch.no_grad():
                for p, old in zip(self._learned_params(), good, strict=True):
                    p.copy_(old)
            self.learning_failed = True
            warnings.warn(
                f"{self.name}: learning produced a non-finite loss or parameters at step "
                f"{self.n_steps}; it stops learning and keeps its last good balancing function.",
                RuntimeWarning,
                stacklevel=3,
            )
        with torch.no_grad():
            self._commit(accept, index, x_new, s_new, g_new)
            self._renormalise()  # g changed everywhere: rebuild the cache under the new theta
            self.history.record(self.n_steps, float(loss), self.eta, self._weights_or_none())
        self.n_target_evals += self.neighbourhood_size  # the uniformly flipped neighbourhood

    def _learned_params(self):
        return [*self.balancing.parameters(), self.eta_raw]

    def _weights_or_none(self):
        weights = getattr(self.balancing, "weights", None)
        return weights() if weights is not None else None
