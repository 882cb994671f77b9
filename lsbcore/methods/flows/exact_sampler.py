"""The flow as a proposal, exact by pseudo-marginal Metropolis-Hastings: ``flow-exact``.

Each step draws, for every chain, a state from the trained flow, ``x' = sign(T(z))`` with
``z ~ N(0, I)`` (``lsbcore.methods.flows.model``), and accepts it with

    A = min(1, p~(x') r^(x) / (p~(x) r^(x'))),

an independence sampler whose proposal mass ``r(x)`` (an integral over ``x``'s orthant) is
replaced by an unbiased importance estimate ``r^`` with ``K`` draws (``FlowModel.propose``), which
travels with the state: a chain keeps the estimate its state was accepted with (the standard
pseudo-marginal chain).

Why this is exact whatever the flow: on the extended space ``(x, w_1..K)`` with target
``p(x) prod_k q(w_k | x)``, whose marginal in ``x`` is ``p``, drawing ``(x', w'_1)`` from the
flow and ``w'_2..K`` from the dequantiser (in a uniformly random order) is an independence
proposal of density ``prod_k q(w'_k | x') r^(x')``; its Metropolis-Hastings ratio is the one
above, the current state's ``r^`` being the one computed from its own ``w``. A poor flow lowers
the acceptance, never the exactness.

Why the estimate is kept, not redrawn: redrawing the current state's ``w`` from the dequantiser
before each proposal is also exact (a Gibbs step on the extended space), and was done here
before; but the dequantiser's draws are a poor importance proposal for the flow's own ``w``. On
the 16 x 16 denoising digit (1,000 training steps) ``log r^`` from dequantiser draws had a mean
of -242 and a standard deviation of 1,132 nats, against 36 +- 14 with the flow's own ``w``: the
redrawn estimate made every current state look far more probable than the flow thinks, and no
proposal was accepted (0 of 38,400; kept: 2.4%). For the same reason ``K = 1`` (the flow's own
``w`` alone) is the default. ``python -m lsbcore.studies.flows.diagnose`` measures it.

Evaluations (``docs/method.md``): one ``log p~`` per chain per step (the proposal's); the
flow's passes are not target evaluations and are timed with the rest.
"""

from __future__ import annotations

import torch

from lsbcore.methods.flows.model import FlowModel
from lsbcore.methods.flows.train import trained_flow
from lsbcore.samplers.batched import BatchedSampler
from lsbcore.samplers.chain_base import StepInfo

#: Importance draws per estimate: bounds of the option.
MAX_DRAWS = 64
MAX_TRAIN_STEPS = 20_000
#: The largest target the flow samplers take: the issue's Ising posteriors up to 32 x 32.
MAX_FLOW_SITES = 1024


def flow_for(target, flow, train_steps: int, seed: int, device) -> FlowModel:
    """The given flow checked against ``target``, or one trained ``train_steps`` steps on it."""
    if flow is None:
        return trained_flow(target, train_steps, seed=seed, device=device)
    if not isinstance(flow, FlowModel):
        raise ValueError(f"flow must be a FlowModel, got {type(flow).__name__}.")
    if flow.n_sites != target.n_sites:
        raise ValueError(f"the flow is for {flow.n_sites} sites; the target has {target.n_sites}.")
    return flow


class FlowExactSampler(BatchedSampler):
    """Pseudo-marginal independence Metropolis-Hastings with the flow as proposal.

    ``flow``: a trained ``FlowModel`` (else one is trained ``train_steps`` steps here, seeded by
    ``seed``); ``importance`` is ``K``. Caches per chain, beyond the base's ``x`` and
    ``log p~(x)``: ``log r^(x)``, the estimate the state came with (from the dequantiser's draws
    for a state the flow did not propose: a start, ``set_state``).
    """

    name = "flow-exact"
    uses_ratios = False
    sites_per_step = 1  # every site is proposed: set to n_sites in __init__

    def __init__(self, target, n_chains: int, train_steps: int = 1000, importance: int = 1,
                 flow: FlowModel | None = None, x0=None, **common):  # fmt: skip
        super().__init__(target, n_chains, x0=x0, **common)
        self.flow = flow_for(target, flow, train_steps, self.seed, self.device)
        self.flow = self.flow.to(self.device)  # shared with its training: not frozen here
        self.importance = int(importance)
        self.sites_per_step = self.n_sites
        self._n_moves = torch.zeros(self.n_chains, dtype=torch.int64, device=self.device)
        if x0 is None:
            self._start_from_flow()
        else:
            self._log_r = self._estimate(self._x).double()

    @torch.no_grad()
    def _start_from_flow(self) -> None:
        """Start each chain at one of the flow's draws (the paper's start), keeping the
        target's own start where a draw has zero mass. Why: an independence sampler leaves a
        state only for one of higher ``p~ / r``, and a uniform random state, to which a
        trained flow gives almost no mass, has so high a ratio that no draw is ever accepted
        (measured: 0 of 128,000 proposals on the 8 x 8 digit)."""
        x, log_r = self.flow.propose(self.n_chains, self.importance, self.generator)
        x = x.to(self._x)
        keep = torch.isfinite(self.target.log_prob(x))
        self._x = torch.where(keep.unsqueeze(1), x, self._x)
        self.resync()
        self._log_r = torch.where(keep, log_r.double(), self._estimate(self._x).double())

    @torch.no_grad()
    def _estimate(self, x: torch.Tensor) -> torch.Tensor:
        """``log r^(x)`` from the dequantiser's draws: for a state the flow did not propose."""
        return self.flow.log_r_estimate(x.to(self.flow.dtype), self.importance, self.generator)

    def set_state(self, x) -> None:
        """Put the chains at ``x``, each with an estimate from the dequantiser's draws."""
        super().set_state(x)
        self._log_r = self._estimate(self._x).double()

    @property
    def evals_per_step(self) -> int:
        return 1

    @torch.no_grad()
    def _step(self) -> None:
        x_new, log_r_new = self.flow.propose(self.n_chains, self.importance, self.generator)
        x_new, log_r_new = x_new.double(), log_r_new.double()
        log_ratio = self.target.log_prob(x_new) - self._log_p
        log_alpha = log_ratio - log_r_new + self._log_r
        log_alpha = torch.where(torch.isnan(log_alpha), -torch.inf, log_alpha)
        accept = torch.log(self._uniforms(self.n_chains)) < log_alpha
        self._move(x_new, accept, log_ratio)
        self._log_r = torch.where(accept, log_r_new, self._log_r)
        self._n_moves += accept
        self._last = StepInfo(accept_prob=log_alpha.clamp(max=0.0).exp(), accepted=accept)

    @property
    def move_rate(self) -> float:
        """Proposals accepted over proposals made, over all chains and steps so far."""
        if self.n_steps == 0:
            return float("nan")
        return int(self._n_moves.sum()) / (self.n_steps * self.n_chains)


def flow_refusal(target) -> str | None:
    """Why the flow samplers cannot run on ``target``, in a sentence; None when they can."""
    if target.n_sites < 2:
        return "the flow samplers need a target of at least 2 sites."
    if target.n_sites > MAX_FLOW_SITES:
        return (
            f"the flow samplers are for targets of at most {MAX_FLOW_SITES:,} sites (32 x 32); "
            f"this one has {target.n_sites:,}: a flow's training and each of its steps grow "
            "with the sites (lower the working resolution to 32 px to try them on a photo)."
        )
    if target.batch != 1:
        return "a flow is trained on one target: give one parameter set, not one per chain."
    return None
