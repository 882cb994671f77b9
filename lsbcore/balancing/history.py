"""A bounded record of learning during burn-in: loss, eta and (LSB 1) the softmax weights.

Keeps at most ``max_points`` entries: when full it drops every other entry and doubles the
stride, so a run of any length gives an evenly spaced history the app can plot.
"""

from __future__ import annotations

import numpy as np


class LearningHistory:
    def __init__(self, max_points: int = 1000):
        if max_points < 2:
            raise ValueError(f"max_points must be at least 2, got {max_points}.")
        self.max_points = max_points
        self.stride = 1
        self._rows: list[tuple] = []

    def wants(self, step: int) -> bool:
        """Whether ``record`` would keep this step (saves computing what it would drop)."""
        return step % self.stride == 0

    def record(self, step: int, loss: float, eta: float, weights=None) -> None:
        if not self.wants(step):
            return
        w = tuple(float(v) for v in weights) if weights is not None else ()
        self._rows.append((int(step), float(loss), float(eta), w))
        if len(self._rows) > self.max_points:
            self.stride *= 2
            self._rows = [r for r in self._rows if r[0] % self.stride == 0]

    def __len__(self) -> int:
        return len(self._rows)

    def arrays(self) -> dict[str, np.ndarray]:
        """``step``, ``loss``, ``eta`` ``[T]`` and ``weights`` ``[T, 4]`` (empty for LSB 2)."""
        steps = np.array([r[0] for r in self._rows], dtype=np.int64)
        weights = [r[3] for r in self._rows if r[3]]
        return {
            "step": steps,
            "loss": np.array([r[1] for r in self._rows], dtype=np.float64),
            "eta": np.array([r[2] for r in self._rows], dtype=np.float64),
            "weights": np.array(weights, dtype=np.float64).reshape(
                len(weights), -1 if weights else 0
            ),
        }
