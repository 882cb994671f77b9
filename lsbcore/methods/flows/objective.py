"""The training objective of the flow-augmented model: the paper's eq. 6.

The paper makes the latent target ``p~(z)`` (eq. 5) close to ``N(0, I)`` by minimising
``KL(N || p~_z)`` over the dequantiser and the latent flow. By the change of variables this is

    L = E_{v ~ r} [log r(v) - log q(v)] = KL(r(v) || q(v) / Z) - log Z,

with ``r`` the latent flow's density and ``q(v) = p~(x) q(w | x) exp(-sum w)`` the embedding of
the target (``lsbcore.methods.flows.model``). ``-L`` is a lower bound on ``log Z`` (an ELBO): the
training curve shows it rising towards ``log Z``, and a bound that stops rising is a flow that
stopped learning.

Two gradient estimators of the same objective:

- ``"pathwise"`` (the paper's): differentiate ``log r(v) - log q(v)`` through ``v = T(z)``.
  ``q(v)`` jumps where ``v`` crosses an orthant (``p~(x)`` and the context of ``q(w | x)``
  change), and a pathwise gradient sees none of those jumps: the latent flow learns the shape
  inside orthants but not how much mass each orthant should hold.
- ``"score"`` (the default): the entropy term ``E[log r(v)]`` pathwise (smooth), and the
  cross term ``E_r[log q(v)]`` by the score function, ``E_r[(log q(v) - b) d log r(v)]``, with a
  leave-one-out baseline ``b``: unbiased, jumps included. The dequantiser's gradient is
  ``-E_r[d log q(w | x)]`` either way (``v`` does not depend on it).

States of zero mass (``log p~ = -inf``, hard constraints) would make ``L`` infinite; training
floors them at ``ZERO_MASS_FLOOR`` below the batch's least positive state, a signal to avoid
them. The samplers stay exact regardless: they reject such states by their exact ratio.
"""

from __future__ import annotations

import torch

from lsbcore.methods.flows.model import FlowModel, log_normal, split

ESTIMATORS = ("score", "pathwise")
#: How far below the batch's least positive-mass state a zero-mass state is scored in training.
ZERO_MASS_FLOOR = 50.0


def floored(log_p: torch.Tensor) -> torch.Tensor:
    """``log_p`` with ``-inf`` replaced by the least finite value minus ``ZERO_MASS_FLOOR``; a
    batch with no state of positive mass (common at the start on a target with hard zeros, where
    most states have none) is scored ``-ZERO_MASS_FLOOR`` throughout: no signal between its
    states, but a finite loss, so that the entropy term keeps spreading the flow until draws
    land in the support. NaN (a broken target) is left as it is: training stops on it."""
    finite = torch.isfinite(log_p)
    if bool(finite.all()):
        return log_p
    zero = torch.isneginf(log_p)
    if not bool(finite.any()):
        return torch.where(zero, torch.full_like(log_p, -ZERO_MASS_FLOOR), log_p)
    floor = log_p[finite].min() - ZERO_MASS_FLOOR
    return torch.where(zero, floor, log_p)


def flow_loss(model: FlowModel, log_prob, batch: int, generator, estimator: str = "score"):
    """One estimate of the objective and the surrogate to differentiate: ``(loss, surrogate)``.

    ``loss`` (a float tensor, no graph) is the estimate of ``L`` over ``batch`` draws;
    ``surrogate.backward()`` gives the chosen estimator's gradient. ``log_prob`` maps float64
    states ``[B, n]`` to ``log p~`` ``[B]``.
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}.")
    z = model.normal(batch, generator)
    v, ladj, _ = model.generate(z)
    x, w = split(v)
    with torch.no_grad():
        log_p = floored(log_prob(x.double())).to(model.dtype)
    if estimator == "pathwise":
        log_q = log_p + model.log_q(w, x) - w.sum(-1)
        values = log_normal(z) - ladj - log_q  # log r(v) - log q(v)
        return values.detach().mean(), values.mean()
    v_fixed = v.detach()
    w_fixed = w.detach()
    log_q_w = model.log_q(w_fixed, x)  # the dequantiser's term: its gradient
    log_q = (log_p + log_q_w - w_fixed.sum(-1)).detach()
    entropy_term = (log_normal(z) - ladj).mean()  # E[log r(v)], pathwise
    if batch > 1:  # leave-one-out baseline
        baseline = (log_q.sum() - log_q) / (batch - 1)
    else:
        baseline = torch.zeros_like(log_q)
    score = ((log_q - baseline) * model.log_r(v_fixed)).mean()
    surrogate = entropy_term - score - log_q_w.mean()
    loss = (log_normal(z) - ladj).detach() - log_q
    return loss.mean(), surrogate
