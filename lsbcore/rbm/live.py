"""Several RBM samplers from one shared start, with the MMD to the ground truth as they go.

``RBMComparison`` is what the dashboard and the experiment command drive on an RBM: a
``lsbcore.Comparison`` of the paper's variants (``variants.VARIANTS``, configured samplers keyed
by their labels) on one RBM, from one start and one seed. What it adds is what only an RBM run
has, and why it is a subclass: the ground-truth samples, and ``record`` appending one
checkpoint per variant (steps, target evaluations per chain, ``docs/method.md`` section 9, the
sampler's own wall time and ``log10 MMD`` of its chains against the truth) in place of the
traces and marginals a pairwise run records. It runs without traces (``thin=0``), so ``step``
only advances the samplers (no host reads) and the app can call it as often as it redraws.
"""

from __future__ import annotations

import math

import torch

from lsbcore.checks import integer
from lsbcore.comparison import Comparison
from lsbcore.diagnostics.mmd import as_spins, hamming_kernel, log_mmd
from lsbcore.rbm.ground_truth import TRUTH_STEPS, ground_truth, noise_floor
from lsbcore.rbm.variants import LABELS, VARIANTS
from lsbcore.samplers.base import uniform_start
from lsbcore.targets.rbm import RBM

__all__ = ["CURVE_FIELDS", "RBMComparison"]

CURVE_FIELDS = ("step", "evals", "seconds", "log_mmd")


class RBMComparison(Comparison):
    """``labels`` (from ``variants.LABELS``) on ``rbm``, ``n_chains`` chains each, all from one
    uniform random start drawn from ``seed``.

    Args:
        truth: ground-truth samples ``[N, n]`` (0/1 or +-1) for the MMD; default
            ``ground_truth(rbm, steps=truth_steps)``. (``Comparison``'s own ``truth``, an image
            for the accuracy trace, has no meaning on an RBM: this one takes its place.)
        truth_steps: sweeps of exact block Gibbs behind the default truth and the noise floor
            (``ground_truth.TRUTH_STEPS``; ``affordable_steps(rbm)`` for a large model).
        x0: the shared start ``[n_chains, n]`` of +-1 (default: uniform from ``seed``).
        options: each goes to the samplers whose registry entry lists it (``lr``,
            ``optimizer``, ``hidden``, ...), as ``lsbcore.Comparison`` does; a variant's own
            options (a block size) win.
    """

    def __init__(
        self, rbm, labels, n_chains: int, seed: int = 0, device=None, truth=None, x0=None,
        truth_steps: int = TRUTH_STEPS, **options,
    ):  # fmt: skip
        if not isinstance(rbm, RBM):
            raise ValueError(f"rbm must be an lsbcore RBM, got {type(rbm).__name__}.")
        labels = list(labels)
        if not labels:
            raise ValueError("labels must list at least one sampler.")
        unknown = [label for label in labels if label not in LABELS]
        if unknown:
            raise ValueError(f"unknown RBM sampler(s) {unknown}; choose from: {', '.join(LABELS)}.")
        if len(set(labels)) != len(labels):
            raise ValueError(f"each sampler may appear once, got {labels}.")
        n_chains = integer(n_chains, "n_chains", 1, 100_000)
        seed = integer(seed, "seed", 0, 2**62)
        truth_steps = integer(truth_steps, "truth_steps", 0, 10**9)
        truth_given = truth is not None
        truth = as_spins(truth, "truth") if truth_given else ground_truth(rbm, steps=truth_steps)
        if truth.shape[1] != rbm.n_visible:
            raise ValueError(
                f"truth must have one column per visible unit ({rbm.n_visible}), got "
                f"{truth.shape[1]}."
            )
        if x0 is None:
            x0 = uniform_start(rbm.shape, n_chains, seed)
        else:
            x0 = as_spins(torch.as_tensor(x0).reshape(n_chains, -1), "x0").view(
                n_chains, *rbm.shape
            )
        super().__init__(
            [VARIANTS[label] for label in labels], rbm, n_chains, seed=seed, device=device,
            x0=x0, **options,
        )  # fmt: skip
        self.rbm, self.seed, self.x0, self.truth_steps = rbm, seed, x0, truth_steps
        self.truth = truth
        self._truth_self = float(hamming_kernel(truth, truth).mean())  # once
        self._floor: float | None = None
        self._curves = {label: {f: [] for f in CURVE_FIELDS} for label in labels}
        self._burnin_end: int | None = None

    @property
    def labels(self) -> list[str]:
        """The variants' labels, in the comparison's order (its ``names``)."""
        return self.names

    # ----------------------------------------------------------------- running
    def start_mixing(self, names=None) -> None:
        """End burn-in: freeze every learned balancing function (the variants burn in
        together, so the first call ends it for all of them)."""
        if self.phase == "mixing":
            return
        self._burnin_end = self.n_steps
        super().start_mixing()

    @property
    def burnin_steps(self) -> int | None:
        """Steps taken before ``start_mixing`` (None while in burn-in)."""
        return self._burnin_end

    # ----------------------------------------------------------------- measuring
    def states(self, label: str) -> torch.Tensor:
        """``[n_chains, n]`` float64 +-1 on the CPU: the chains of ``label`` now (a copy)."""
        return self.samplers[label].x.detach().reshape(self.n_chains, -1).to("cpu").clone()

    def log_mmd(self, label: str) -> float:
        """``log10 MMD`` of ``label``'s chains now against the ground truth."""
        return log_mmd(self.states(label), self.truth, self._truth_self)

    def record(self, force: bool = False) -> None:
        """Append a checkpoint (step, evaluations, seconds, log-MMD) for every label (in place of
        ``Comparison``'s traces and marginals; every call records, ``force`` or not)."""
        for label, sampler in self.samplers.items():
            curve = self._curves[label]
            curve["step"].append(int(sampler.n_steps))
            curve["evals"].append(int(sampler.n_target_evals))
            curve["seconds"].append(float(sampler.wall_seconds))
            curve["log_mmd"].append(self.log_mmd(label))

    @property
    def n_records(self) -> int:
        """Checkpoints recorded so far (the curves change only when this does)."""
        return len(self._curves[self.labels[0]]["step"])

    def curve(self, label: str) -> dict[str, list]:
        """The checkpoints of ``label`` so far: lists ``step``, ``evals`` (per chain),
        ``seconds`` (the sampler's own wall time), ``log_mmd`` (log10)."""
        if label not in self._curves:
            raise ValueError(f"{label!r} is not in this comparison; it has: {self.labels}.")
        return {k: list(v) for k, v in self._curves[label].items()}

    def hop_distance(self, label: str) -> float:
        """Mean Hamming distance a chain moved per step so far (NaN before any step)."""
        sampler = self.samplers[label]
        steps = sampler.n_steps * sampler.n_chains
        return float(sampler.n_accepted) / steps if steps else math.nan

    @property
    def noise_floor(self) -> float:
        """``log10 MMD`` of ``n_chains`` exact samples against the truth (the mean of 8
        independent draws; computed once)."""
        if self._floor is None:
            self._floor = noise_floor(
                self.rbm, self.n_chains, draws=8, steps=self.truth_steps, truth=self.truth
            )
        return self._floor
