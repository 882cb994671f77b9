"""The full transition matrix ``P[x, y]`` of a sampler on a tiny target (every state enumerated).

One sampler is built with one chain per state and asked for its own one-step law, so the
matrix is the sampler's, not a re-derivation: single-site samplers answer
``flip_probabilities()`` (``T(x -> x with i flipped)``, the numbers ``step()`` uses), samplers
that move many sites ``transition_probabilities()`` (``[B, 2^n]``: the law of the next state).
The checkerboard sweep has neither; its matrix is the product of its colour-block updates.
Any target works (``lsbcore.targets.base.Target``); a state of zero probability is never
visited, so its row stays put (a sampler cannot start there).

Rows and columns are state codes (``lsbcore.exact.states``); ``v P`` is the law one step on.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from scipy import sparse

from lsbcore.balancing.functions import Balancing
from lsbcore.exact.states import all_states, check_target
from lsbcore.samplers.balanced.batched import balanced_builder
from lsbcore.samplers.interface import MultiSiteSampler
from lsbcore.samplers.registry import REGISTRY, make_sampler, refusal

#: Samplers whose balancing function is learned: their matrix is that of a frozen ``g``.
LEARNED_NAMES = ("lsb1", "lsb2", "lsb2-monotone", "learned", "flsb1", "flsb2")
#: Learned samplers on gradient-approximated ratios: frozen, they stay on those ratios.
GRADIENT_RATIOS = ("flsb1", "flsb2")
#: Rows of a dense matrix built or checked at a time (512 rows of 4,096 states: 16 MB).
ROW_CHUNK = 512


def flip_matrix(flip_probs: torch.Tensor) -> np.ndarray:
    """``P [2^n, 2^n]`` from single-flip probabilities ``[2^n, n]`` (row ``k``: state code ``k``).

    ``P[k, k ^ (1 << i)] = flip_probs[k, i]``; the diagonal holds the rest (a rejection or a
    site left as it was), which may round to -1e-16 where every move is taken.
    """
    return flip_csr(flip_probs).toarray()


def flip_csr(flip_probs: torch.Tensor, alive: np.ndarray | None = None) -> sparse.csr_matrix:
    """``flip_matrix`` as CSR: ``n + 1`` entries a row of ``2^n``, never the dense square.

    ``alive`` (``[2^n]`` bool): rows of the states of positive mass; every other row is the
    identity (a state of zero mass is never left), whatever its ``flip_probs`` say.
    """
    fp = flip_probs.reshape(flip_probs.shape[0], -1).double().cpu().numpy()
    n_states, n = fp.shape
    if n_states != 2**n:
        raise ValueError(f"flip_probs must have one row per state (2^{n}), got {n_states}.")
    codes = np.arange(n_states)
    stay = 1.0 - fp.sum(1)
    if alive is not None:
        fp = np.where(alive[:, None], fp, 0.0)
        stay = np.where(alive, stay, 1.0)
    cols = np.concatenate([codes[:, None] ^ (1 << np.arange(n)), codes[:, None]], axis=1)
    values = np.concatenate([fp, stay[:, None]], axis=1)
    order = np.argsort(cols, axis=1)  # CSR rows with their columns sorted
    cols = np.take_along_axis(cols, order, axis=1)
    values = np.take_along_axis(values, order, axis=1)
    indptr = np.arange(0, n_states * (n + 1) + 1, n + 1)
    return sparse.csr_matrix((values.ravel(), cols.ravel(), indptr), shape=(n_states, n_states))


def transition_matrix(
    target, name: str, balancing: Balancing | None = None, **options
) -> np.ndarray:
    """The matrix of the registry's sampler ``name`` on ``target`` (at most 12 sites).

    ``balancing``: for ``lsb1``/``lsb2``/``learned``, the learned function to freeze (a copy is
    taken: the caller's function keeps learning); without it ``lsb1``/``lsb2`` use their
    starting function (LSB 2's from seed 0). A frozen ``g`` makes an ordinary locally balanced
    chain (spec 4). ``options``: the sampler's registry options (``block_size``, ...).
    """
    return step_law(target, name, balancing, **options)[0]


def step_law(
    target, name: str, balancing: Balancing | None = None, sparse_form: bool = False, **options
) -> tuple:
    """``transition_matrix``'s ``P`` and the sites one step moves per chain: the
    ``sites_per_step`` of the sampler that gave ``P`` (to count a step in site updates).

    ``sparse_form``: a single-site sampler's ``P`` as CSR (``n + 1`` entries a row), built
    without the dense square: 134 MB a matrix on 12 sites. The others' come dense as ever.
    """
    n = check_target(target)
    if name not in REGISTRY:
        raise ValueError(f"unknown sampler {name!r}; choose one of: {', '.join(REGISTRY)}.")
    if balancing is not None and name not in LEARNED_NAMES:
        raise ValueError(f"balancing= is only for {LEARNED_NAMES}, not {name!r}.")
    if name == "learned" and balancing is None:
        raise ValueError("the 'learned' sampler needs balancing= (a Balancing).")
    if REGISTRY[name].takes_flow:
        raise ValueError(
            f"{name} has no finite transition matrix: its step draws continuous variables (the "
            "flow's latent point and the dequantiser's draws) and its law is an integral over "
            "them; its law is checked by runs against enumeration (lsbcore.studies.flows.bias)."
        )
    if REGISTRY[name].auxiliary:
        raise ValueError(
            f"{name} has no transition matrix over x: its chain carries a continuous auxiliary "
            "state (dHMC's theta) on which the next x depends; its law is checked by runs "
            "against enumeration (tests/test_baseline_samplers.py)."
        )
    reason = refusal(name, target)
    if reason is not None:
        raise ValueError(reason)
    states = all_states(n)
    alive = torch.isfinite(target.log_prob(states))  # states of positive probability
    x0 = states[alive].view(-1, *target.shape)  # the sampler wants the layout
    common = dict(seed=0, device="cpu", x0=x0, backend="torch", **options)
    if balancing is not None:
        frozen = copy.deepcopy(balancing).cpu()
        if name in GRADIENT_RATIOS:
            build = balanced_builder("learned", "gradient")
            sampler = build(target, len(x0), balancing=frozen, **common)
        else:
            sampler = make_sampler("learned", target, len(x0), balancing=frozen, **common)
    else:
        sampler = make_sampler(name, target, len(x0), **common)
    if name == "checkerboard":  # built for its count: its law is the product of its colours
        return sweep_matrix(target), sampler.sites_per_step
    if isinstance(sampler, MultiSiteSampler):
        p = np.eye(len(states))  # a state of zero mass is never left (never entered either)
        p[alive.numpy()] = sampler.transition_probabilities().double().cpu().numpy()
        return p, sampler.sites_per_step
    fp = torch.zeros(len(states), n, dtype=torch.float64)
    fp[alive] = sampler.flip_probabilities().reshape(len(x0), n).double().cpu()
    law = flip_csr(fp, alive.numpy())
    return (law if sparse_form else law.toarray()), sampler.sites_per_step


def block_update_matrix(target, sites: list[int]) -> sparse.csr_matrix:
    """One Gibbs block update of ``sites`` (no two of them neighbours), sparse ``[2^n, 2^n]``.

    ``P(x -> y) = prod_{i in sites} p(y_i | x_-i)`` for ``y`` equal to ``x`` off ``sites``: the
    sites are independent given the rest, so each conditional reads ``x`` itself, and
    ``log p(y_i | x_-i) = logsigmoid(y_i * 2 f_i(x))`` (the target's conditional log-odds).
    """
    n = check_target(target)
    states = all_states(n)
    log_odds = target.conditional_log_odds(states)  # [N, n]
    codes = np.arange(len(states))
    choices = np.arange(2 ** len(sites))  # every assignment of the block, bit k -> sites[k]
    spread = np.zeros(len(choices), dtype=np.int64)  # the assignment's bits at the sites' places
    log_w = torch.zeros(len(states), len(choices), dtype=torch.float64)  # [N, A]
    for k, i in enumerate(sites):  # at most 12 sites
        bit = (choices >> k) & 1
        spread |= bit << i
        y = torch.as_tensor(2.0 * bit - 1.0)  # [A]
        log_w += torch.nn.functional.logsigmoid(y[None, :] * log_odds[:, i : i + 1])
    mask = sum(1 << i for i in sites)
    cols = (codes[:, None] & ~mask) | spread[None, :]
    rows = np.broadcast_to(codes[:, None], cols.shape)
    values = torch.exp(log_w).numpy()
    return sparse.csr_matrix((values.ravel(), (rows.ravel(), cols.ravel())), (len(codes),) * 2)


def sweep_matrix(target) -> np.ndarray:
    """The checkerboard sampler's step: the colours of ``target.colouring()`` in turn, each a
    block update, so ``P = B_0 B_1 ... B_{C-1}`` (row vectors: colour 0 acts first)."""
    check_target(target)
    colour = target.colouring()
    blocks = [
        block_update_matrix(target, torch.nonzero(colour == c).view(-1).tolist())
        for c in range(int(colour.max()) + 1)
    ]
    n_states = blocks[0].shape[0]
    p = np.empty((n_states, n_states))
    for start in range(0, n_states, ROW_CHUNK):  # by rows: the sparse product of all rows
        rows = blocks[0][start : start + ROW_CHUNK]  # would hold every entry (16.7 M on 12
        for block in blocks[1:]:  # sites) on top of the dense answer
            rows = rows @ block
        p[start : start + ROW_CHUNK] = rows.toarray()
    return p
