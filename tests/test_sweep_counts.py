"""Sweeps are counted from what a sampler's step really moves (its ``sites_per_step``), never
from the registry entry, which says only the kind of move (``SamplerSpec.move``): block Gibbs,
the Hamming ball and PAS move k, k and R sites a step, and annealing, parallel tempering and the
exact chain's relaxation in site updates count their sweeps by that (issue 40, item 4).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lsbcore import IsingPosterior, balancing_to_dict, load_balancing, make_balancing
from lsbcore import exact as exact_chain
from lsbcore.annealing import Schedule, anneal
from lsbcore.samplers.interface import steps_per_sweep, sweeps_in
from lsbcore.samplers.registry import MOVES, REGISTRY, make_sampler, refusal, sweep_steps
from lsbcore.tempering import ParallelTempering

TARGET = IsingPosterior(torch.linspace(-1.0, 1.2, 12).view(3, 4), 0.4, "free")
SMALL = IsingPosterior(torch.linspace(-0.8, 1.0, 9).view(3, 3), 0.4, "free")
# the samplers whose step moves several sites, with options that make k differ from the defaults
BLOCKS = {
    "block-gibbs": ({"block_size": 3}, 3),
    "hamming-ball": ({"block_size": 4, "radius": 1}, 4),
    "pas": ({"path_length": 2}, 2),
}


def options_for(name: str) -> dict:
    spec = REGISTRY[name]
    options = {}
    if spec.needs_balancing:
        options["balancing"] = load_balancing(balancing_to_dict(make_balancing("lsb1")))
    if spec.takes_flow:
        options["train_steps"] = 0
    for option in spec.options:
        if option.name == "block_size" and option.default > TARGET.n_sites:
            options["block_size"] = TARGET.n_sites
    return options


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_entry_says_the_kind_of_move_its_sampler_makes(name):
    """``site``: one site a step; ``sweep``: every site; ``block``: several, as many as the
    sampler says. ``sweep_steps`` (before a sampler exists) agrees with the built sampler."""
    spec = REGISTRY[name]
    assert spec.move in MOVES
    if refusal(name, TARGET) is not None:
        pytest.skip(refusal(name, TARGET))
    sampler = make_sampler(name, TARGET, 2, seed=1, backend="torch", **options_for(name))
    sampler.step(2)
    k, n = sampler.sites_per_step, TARGET.n_sites
    assert isinstance(k, int)
    assert {"site": k == 1, "sweep": k == n, "block": 1 <= k <= n}[spec.move]
    if name != "neural-block":  # its tiles vary step to step: one tile counted before any
        assert sweep_steps(name, TARGET, **options_for(name)) == steps_per_sweep(sampler)
    assert steps_per_sweep(sampler) == math.ceil(n / k)
    assert sweeps_in(sampler, 5) == pytest.approx(5 * k / n)


def test_block_gibbs_hamming_ball_and_pas_are_block_moves():
    assert {REGISTRY[name].move for name in BLOCKS} == {"block"}
    assert REGISTRY["checkerboard"].move == "sweep" and REGISTRY["dmala"].move == "sweep"
    assert REGISTRY["gwg"].move == "site" and REGISTRY["barker"].move == "site"


@pytest.mark.parametrize("name", list(BLOCKS))
def test_annealing_counts_the_sweeps_a_block_step_makes(name):
    options, k = BLOCKS[name]
    built = make_sampler(name, TARGET, 1, **options)
    assert built.sites_per_step == k
    per_sweep = sweep_steps(name, TARGET, **options)
    assert per_sweep == math.ceil(TARGET.n_sites / k)
    schedule = Schedule("geometric", 0.5, 4.0, 3, 2 * per_sweep)
    result = anneal(TARGET, name, schedule, n_chains=2, seed=1, record_every=1, **options)
    assert result.steps[-1] == 3 * 2 * per_sweep
    assert np.allclose(result.sweeps, result.steps * k / TARGET.n_sites)
    assert result.sweeps[-1] >= 6  # two sweeps a stage at least, not 2 k / n of one


@pytest.mark.parametrize("name", list(BLOCKS))
def test_parallel_tempering_swaps_after_a_sweep_of_block_steps(name):
    options, k = BLOCKS[name]
    pt = ParallelTempering(TARGET, name, n_chains=2, n_replicas=3, seed=1, **options)
    assert pt.swap_every == math.ceil(TARGET.n_sites / k)
    assert pt.sweeps_per_round == pytest.approx(pt.swap_every * k / TARGET.n_sites)
    assert 1.0 <= pt.sweeps_per_round < 1.0 + k / TARGET.n_sites
    pt.burn_in(2, learn=False)
    for sampler in pt.samplers:
        assert sampler.sites_per_step == k
        assert sampler.sweeps == pytest.approx(2 * pt.sweeps_per_round)


def test_the_exact_relaxation_counts_site_updates_by_what_a_step_moves():
    names = list(BLOCKS)
    options = {name: BLOCKS[name][0] for name in names}
    rows = exact_chain.compare_samplers(SMALL, [*names, "barker", "checkerboard"], steps=5,
                                        options=options)  # fmt: skip
    by_name = {row["name"]: row for row in rows}
    for name in names:
        row, k = by_name[name], BLOCKS[name][1]
        assert row["relaxation_site_updates"] == pytest.approx(k * row["relaxation_time"])
    assert by_name["barker"]["relaxation_site_updates"] == by_name["barker"]["relaxation_time"]
    sweep = by_name["checkerboard"]
    assert sweep["relaxation_site_updates"] == pytest.approx(9 * sweep["relaxation_time"])
    curves = exact_chain.relaxation_along([SMALL], names, options=options)
    for name in names:
        assert curves[name][0] == pytest.approx(by_name[name]["relaxation_site_updates"])
    _, sites = exact_chain.step_law(SMALL, "block-gibbs", block_size=2)
    assert sites == 2
