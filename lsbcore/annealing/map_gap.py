"""How far an annealing run ended from the exact MAP (the minimum cut, ``lsbcore.exact_map``).

With ``E = -log p~`` and ``E_map`` the energy of the exact maximiser, the relative gap of a state
is ``(E - E_map) / |E_map|``: 0 at the optimum, never negative (up to rounding), and the
fraction of sites that agree with the MAP says where the remaining difference lies. Where
several states tie for the maximum, a chain can sit at gap 0 and still disagree with the one
the cut returns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lsbcore.annealing.anneal import AnnealingResult, energy
from lsbcore.checks import real
from lsbcore.segmentation.map_estimate import exact_map
from lsbcore.targets.pairwise_target import PairwiseTarget


@dataclass(frozen=True)
class MapGap:
    """The best chain of a run against the exact MAP; per-chain arrays are ``[B]``."""

    exact_energy: float  # E_map of the best chain's field
    best_energy: float  # lowest energy recorded by the run
    relative_gap: float  # (best_energy - exact_energy) / |exact_energy|
    agreement: float  # fraction of sites where the best state equals the MAP
    chain: int  # the chain with the smallest gap
    chain_gaps: np.ndarray  # [B] every chain's relative gap (its lowest recorded energy)
    map_state: torch.Tensor  # [B, *shape] the exact MAP of each chain's field

    def within(self, tolerance: float) -> bool:
        """Whether the best chain is within ``tolerance`` (relative) of the exact energy."""
        return self.relative_gap <= tolerance


def relative_gap(e: np.ndarray, e_map: np.ndarray) -> np.ndarray:
    """``(e - e_map) / |e_map|`` elementwise; where ``e_map = 0``, 0 if ``e <= 0`` else inf."""
    e, e_map = np.asarray(e, dtype=np.float64), np.asarray(e_map, dtype=np.float64)
    scale = np.abs(e_map)
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = (e - e_map) / scale
    return np.where(scale > 0, gap, np.where(e <= e_map, 0.0, np.inf))


def map_states(target: PairwiseTarget, n_chains: int = 1) -> torch.Tensor:
    """The exact MAP of every chain's field, ``[n_chains, *shape]`` on the CPU (one field:
    its MAP repeated)."""
    return _per_chain(exact_map(target).cpu(), n_chains)


def _per_chain(x: torch.Tensor, n_chains: int) -> torch.Tensor:
    return x.expand(n_chains, *x.shape[1:]).clone() if x.shape[0] == 1 else x


def compare_with_map(
    result: AnnealingResult, target: PairwiseTarget, map_state: torch.Tensor | None = None
) -> MapGap:
    """``result`` (from ``anneal`` on ``target``) against the exact MAP, computed by a minimum
    cut unless ``map_state`` (``[1 or B, *shape]``, from ``map_states``) is given."""
    if not isinstance(result, AnnealingResult):
        raise ValueError(f"result must be an AnnealingResult, got {type(result).__name__}.")
    n_chains = result.best_state.shape[0]
    if tuple(result.best_state.shape[1:]) != target.shape:
        raise ValueError(
            f"the run has states of shape {tuple(result.best_state.shape[1:])}, the target "
            f"{target.shape}: compare a run with the target it annealed."
        )
    if map_state is None:
        x_map = map_states(target, n_chains)
    else:
        x_map = _per_chain(torch.as_tensor(map_state).cpu().reshape(-1, *target.shape), n_chains)
        if x_map.shape[0] != n_chains:
            raise ValueError(
                f"map_state holds {x_map.shape[0]} states; give one, or one per chain ({n_chains})."
            )
    e_map = energy(target, x_map)
    gaps = relative_gap(result.lowest_energy, e_map)
    b = int(np.argmin(gaps))
    agree = (result.best_state[b] == x_map[b]).double().mean()
    return MapGap(
        exact_energy=float(e_map[b]),
        best_energy=float(result.lowest_energy[b]),
        relative_gap=float(gaps[b]),
        agreement=float(agree),
        chain=b,
        chain_gaps=gaps,
        map_state=x_map,
    )


def time_to_gap(result: AnnealingResult, exact_energy, tolerance: float = 1e-3):
    """The first record at which some chain's lowest energy is within ``tolerance`` (relative)
    of ``exact_energy`` (a number, or ``[B]`` per chain): ``(seconds, steps, sweeps)``, or None
    when the run never got there."""
    tolerance = real(tolerance, "tolerance", 0.0)
    gaps = relative_gap(result.best_energy, np.broadcast_to(exact_energy, result.best_energy.shape))
    reached = np.flatnonzero((gaps <= tolerance).any(axis=1))
    if reached.size == 0:
        return None
    r = int(reached[0])
    return float(result.seconds[r]), int(result.steps[r]), float(result.sweeps[r])
