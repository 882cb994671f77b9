"""A minimal sampler on the batched base, for tests of targets and of the base itself."""

from __future__ import annotations

import torch

from lsbcore.samplers.batched import BatchedSampler
from lsbcore.samplers.chain_base import StepInfo


class UniformMetropolis(BatchedSampler):
    """The smallest sampler on the batched base: a uniform site, flipped with min(1, t)."""

    name = "test-metropolis"

    def _step(self):
        i = (self._uniforms(self.n_chains) * self.n_sites).long()
        s_i = self._s[self._chains, i]
        accept = torch.log(self._uniforms(self.n_chains)) < s_i
        self._last = StepInfo(site=i, accepted=accept)
        self._move(self._flip_sites(i), accept, s_i)
