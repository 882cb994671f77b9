"""Which protocol produced a table of paper ESS values: the published one or the authors' code.

Two protocols run the paper's four cases (spec 6):

- ``"spec"``, as published: burn-in 2000 for every case, then the mixing phase; the paper ESS
  is computed on the mixing phase only, with the lag window ``L = 500``; every sampler steps
  once per iteration.
- ``"authors"``, what the authors' released scripts do (``runner.sh`` / ``eval.sh`` of
  emsansone/LSB, ``2DIsing/``): burn-in 2000/800/2000/800 for cases 1-4; the ESS series starts
  after iteration 1000/400/1000/400 (half-way through burn-in, so it includes the second half of
  burn-in) with ``L = 500/400/500/100``; LSB 2 is stepped twice per burn-in iteration.

Iterations, not steps, index the ESS series: under ``"authors"`` LSB 2's burn-in iteration ``i``
ends at its step ``2 i``, and its series keeps one record per iteration, as the authors' runner
stores one magnetisation per iteration. ``ess_series`` applies this to a recorded trace.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from lsbcore.cases import PAPER_CASES
from lsbcore.diagnostics.mixing import PAPER_MAX_LAG
from lsbcore.diagnostics.trace import PHASES

__all__ = ["AUTHORS_CASES", "PROTOCOLS", "Protocol", "ess_series", "resolve_protocol"]

PROTOCOLS = ("spec", "authors")
# case: (burn-in, lag window L) of the authors' runner.sh / eval.sh; the ESS opens half-way
AUTHORS_CASES = {1: (2000, 500), 2: (800, 400), 3: (2000, 500), 4: (800, 100)}
#: Sampler -> steps per burn-in iteration under "authors" (their runner steps LSB 2 twice).
AUTHORS_BURNIN_STEPS = {"lsb2": 2}


@dataclass(frozen=True)
class Protocol:
    """The resolved numbers of one protocol for one problem.

    ``ess_from_step``: the ESS series holds the states after iterations ``ess_from_step + 1``
    onwards (``burn_in``: the mixing phase only). ``max_lag``: the requested window ``L``
    (clipped later by ``lsbcore.studies.results.effective_max_lag`` on short series).
    ``burnin_steps``: steps per burn-in iteration of the samplers that take more than one.
    ``burn_in_source``: ``"protocol"`` or ``"--burn-in"`` (an explicit value overrides).
    """

    name: str
    burn_in: int
    ess_from_step: int
    max_lag: int
    burnin_steps: dict
    burn_in_source: str = "protocol"

    def steps_per_burnin_iteration(self, sampler: str) -> int:
        return int(self.burnin_steps.get(sampler, 1))

    def as_config(self) -> dict:
        out = asdict(self)
        out["protocol"] = out.pop("name")
        return out


def resolve_protocol(name: str, case: int | None, burn_in: int | None = None) -> Protocol:
    """The protocol ``name`` for paper case ``case`` (``None``: an image, only ``"spec"``).

    An explicit ``burn_in`` overrides the protocol's; under ``"authors"`` the ESS then still
    opens half-way through burn-in (``burn_in // 2``, the authors' ratio in all four cases).
    """
    if name not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {name!r}.")
    if case is not None and case not in PAPER_CASES:
        raise ValueError(f"case must be one of {sorted(PAPER_CASES)}, got {case!r}.")
    if burn_in is not None and (isinstance(burn_in, bool) or not isinstance(burn_in, int)):
        raise ValueError(f"burn_in must be an integer, got {burn_in!r}.")
    if burn_in is not None and burn_in < 0:
        raise ValueError(f"burn_in must be >= 0, got {burn_in!r}.")
    source = "protocol" if burn_in is None else "--burn-in"
    if name == "spec":
        default = PAPER_CASES[case][4] if case is not None else 0
        chosen = default if burn_in is None else burn_in
        return Protocol("spec", chosen, chosen, PAPER_MAX_LAG, {}, source)
    if case is None:
        raise ValueError("the 'authors' protocol is defined for the paper's cases only.")
    default, lag = AUTHORS_CASES[case]
    chosen = default if burn_in is None else burn_in
    return Protocol("authors", chosen, chosen // 2, lag, dict(AUTHORS_BURNIN_STEPS), source)


def ess_series(
    trace, burn_in: int, ess_from_step: int, burnin_steps: int = 1, field: str = "magnetisation"
) -> np.ndarray:
    """The per-chain series ``[B, T]`` (float64) the paper ESS is computed on.

    ``trace`` records steps (``Trace`` / ``ArrayTrace``); burn-in took ``burnin_steps`` steps per
    iteration for ``burn_in`` iterations, mixing one step per iteration. Keeps the records at
    the end of an iteration ``i > ess_from_step``. With ``ess_from_step == burn_in`` and one
    step per iteration this is exactly ``trace.mixing_series(field)``.
    """
    if burnin_steps < 1:
        raise ValueError(f"burnin_steps must be >= 1, got {burnin_steps!r}.")
    if not 0 <= ess_from_step <= burn_in:
        raise ValueError(f"ess_from_step must be in [0, burn_in={burn_in}], got {ess_from_step}.")
    arrs = trace.arrays()
    step = arrs["step"]
    burning = arrs["phase"] == PHASES.index("burnin")
    # burn-in: iteration i ends at step k i; mixing: one step per iteration after k * burn_in
    at_boundary = np.where(burning, step % burnin_steps == 0, True)
    iteration = np.where(burning, step // burnin_steps, step - (burnin_steps - 1) * burn_in)
    keep = at_boundary & (iteration > ess_from_step)
    return arrs[field][keep].T.astype(np.float64)
