"""What a compiled kernel receives: a few named structures of arrays, not dozens of arguments.

numba compiles named tuples of arrays as plain structs, so passing one costs nothing and a
kernel unpacks the fields it needs. All arrays are zero-copy numpy views of the sampler's own
CPU tensors: the kernels work in place.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Tables(NamedTuple):
    """The target's flip tables, each ``[D, K]`` (see ``lsbcore.targets.base``): slot ``k`` of
    site ``i`` is neighbour ``neighbours[i, k]``; ``sign`` (-1 for the site itself) applies to
    its ``x`` and ``s`` on a flip, ``coupling`` adds ``coupling * x_j * x_i`` to its ``s``, and
    ``unique`` says whether the slot counts in sums (padding slots repeat the site)."""

    neighbours: np.ndarray
    sign: np.ndarray
    coupling: np.ndarray
    unique: np.ndarray


class Chains(NamedTuple):
    """What every kernel updates, per chain ``b``: states ``x`` and log-ratios ``s``
    ``[B, width]``, ``n_accepted [B, 1]`` (sites changed), ``stats [B, 3]`` (log p~,
    magnetisation, x . truth; kept when ``track``) with ``truth [width]``, and ``trace
    [n or 0, B, 5]``, which receives the statistics, the sites changed and the proposed site
    (-1 for a block move) after each step."""

    x: np.ndarray
    s: np.ndarray
    n_accepted: np.ndarray
    stats: np.ndarray
    truth: np.ndarray
    track: bool
    trace: np.ndarray


class FactorTables(NamedTuple):
    """A factor graph's tables for the compiled steps (``targets.factor_moves``): each factor's
    ``scopes`` and bit ``place`` values ``[F, K]`` (padding: place 0), its table's ``offsets``
    ``[F]`` into the flat ``finite`` and ``zero`` parts, each variable's factors (``first [n +
    1]``, ``factors``), and each variable's neighbourhood (``near_first [n + 1]``, ``near``,
    itself first) with the ``slot`` there of each scope variable of each of its factors."""

    scopes: np.ndarray
    place: np.ndarray
    offsets: np.ndarray
    finite: np.ndarray
    zero: np.ndarray
    first: np.ndarray
    factors: np.ndarray
    near_first: np.ndarray
    near: np.ndarray
    slot: np.ndarray


class FactorChains(NamedTuple):
    """What the factor-graph steps update, per chain: states ``x [B, n]``, ``log_p [B]``,
    ``n_accepted [B]``, the flip log-ratios ``s [B, n]`` and the two parts they come from (the
    change of the finite part ``d_finite`` and of the zero-mass count ``d_zeros``, ``[B, n]``)."""

    x: np.ndarray
    log_p: np.ndarray
    n_accepted: np.ndarray
    s: np.ndarray
    d_finite: np.ndarray
    d_zeros: np.ndarray


KIND_MIXTURE = 4  # Function.kind of LSB 1's mixture (0-3: the fixed functions)
KIND_NETWORK = 5  # Function.kind of LSB 2's network
KIND_MONOTONE = 6  # Function.kind of LSB 2' (a monotone min-max network; batched samplers only)


class Function(NamedTuple):
    """A balancing function for ``kernels.log_g``: ``kind`` 0-3 the fixed functions (order of
    ``FIXED``), 4 a mixture with log-weights ``log_w`` (LSB 1), 5 LSB 2's network in its
    piecewise-linear form (``breakpoints``, ``slope``, ``intercept``), 6 LSB 2' with ``phi``'s
    pieces (``breakpoints`` their starts, the first ``-inf``; each piece's ``slope`` and
    ``intercept``: ``MonotoneBalancing.pieces``). Numpy arrays for the
    compiled kernels; device tensors for ``device.balanced``, which reads the same fields."""

    kind: int
    log_w: np.ndarray
    breakpoints: np.ndarray
    slope: np.ndarray
    intercept: np.ndarray


class ProposalCache(NamedTuple):
    """A locally balanced sampler's cache (see ``samplers.locally_balanced``): ``gn [B, (nb +
    1) * bs]`` the scaled g values in blocks, ``block_sum [B, nb]``, ``z [B, 1]`` their total,
    ``shift [B, 1]`` each chain's log-scale."""

    gn: np.ndarray
    block_sum: np.ndarray
    z: np.ndarray
    shift: np.ndarray


class Learner(NamedTuple):
    """The learning rule's state: ``params`` (flat: the function's parameters, then
    ``eta_raw``), the optimiser's ``opt_state [2, P + 1]`` and ``opt_kind`` (0 Adam, 1 SGD with
    momentum), the learning rate ``lr``, ``log_p [B]``, log p~ of the chains kept between
    steps (the objective needs it), and ``authors_field``: the target's field ``[1 or B, D]``
    when the objective computes log p~(x') as the authors' code does, else ``[0, D]``."""

    params: np.ndarray
    opt_state: np.ndarray
    opt_kind: int
    lr: float
    log_p: np.ndarray
    authors_field: np.ndarray


class LearningOut(NamedTuple):
    """What learning steps report: ``losses [n]``, ``weights [n, 5]`` (LSB 1's softmax weights
    and eta) and ``last [B, 4]`` (the last step's site, 1, Z'/Z, decision)."""

    losses: np.ndarray
    weights: np.ndarray
    last: np.ndarray


class MixtureCache(NamedTuple):
    """LSB 1's component cache: ``comps [B, 4, D]`` (each fixed g, scaled), ``shift`` and
    ``sums [B, 4]`` (each component's log-scale and total)."""

    comps: np.ndarray
    shift: np.ndarray
    sums: np.ndarray


class NetworkCache(NamedTuple):
    """LSB 2's per-site inputs: ``u = sigmoid(s) - 1/2``, ``scale`` and ``small`` ``[B, D]``
    (see ``learning_kernels.network_caches``) and each chain's scale ``top [B]``."""

    u: np.ndarray
    scale: np.ndarray
    small: np.ndarray
    top: np.ndarray


class NetworkLattice(NamedTuple):
    """Work rows for LSB 2's terms at a tile of ``T`` sites of a chain (``network_terms.
    network_scratch`` of ``T``): ``rows [9, T]``, ``piece [2, T]`` and the exponent bits
    ``powers [2, T]``."""

    rows: np.ndarray
    piece: np.ndarray
    powers: np.ndarray


class Pieces(NamedTuple):
    """LSB 2's network in piecewise-linear form: ``breakpoints``, per-piece ``slope`` and
    ``intercept``, and ``active [pieces, H]`` (which hidden units are on in each piece)."""

    breakpoints: np.ndarray
    slope: np.ndarray
    intercept: np.ndarray
    active: np.ndarray
