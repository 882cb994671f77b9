"""The two networks of the paper's Table 3, as the product generates them.

The paper samples two 100-variable networks of the 2006 UAI competition ("near-deterministic
dependencies"); their files are not shipped. The competition's grids are named by their share of
deterministic nodes (``50-10-x``, ``75-10-x``, ``90-10-x`` for 10 x 10), so MN 1 and MN 2 here
are 10 x 10 grid networks (``lsbcore.targets.grid_network``) with half and three quarters of
their tables near-deterministic. Which competition files the paper used is not said: these are
networks of the same kind, not the same networks.
"""

from __future__ import annotations

from dataclasses import dataclass

from lsbcore.targets.factor_graph import FactorGraph
from lsbcore.targets.grid_network import grid_network


@dataclass(frozen=True)
class NetworkPreset:
    """A named grid network: ``grid_network(side, determinism, seed, epsilon)``."""

    name: str
    label: str
    side: int
    determinism: float
    seed: int
    epsilon: float = 1e-3

    def build(self, epsilon: float | None = None) -> FactorGraph:
        """The network; ``epsilon`` overrides the preset's (0: hard zeros)."""
        eps = self.epsilon if epsilon is None else epsilon
        return grid_network(self.side, self.determinism, seed=self.seed, epsilon=eps)

    def describe(self) -> str:
        return (
            f"{self.label}: a {self.side} x {self.side} grid network, "
            f"{self.determinism:.0%} of its tables near-deterministic (epsilon {self.epsilon:g})"
        )


PRESETS = {
    "mn1": NetworkPreset("mn1", "MN 1", side=10, determinism=0.5, seed=1),
    "mn2": NetworkPreset("mn2", "MN 2", side=10, determinism=0.75, seed=2),
}


def preset(name: str, epsilon: float | None = None) -> FactorGraph:
    """The network of preset ``name`` (``"mn1"`` or ``"mn2"``)."""
    if name not in PRESETS:
        raise ValueError(f"unknown network {name!r}; choose one of {', '.join(PRESETS)}.")
    return PRESETS[name].build(epsilon)


__all__ = ["NetworkPreset", "PRESETS", "preset"]
