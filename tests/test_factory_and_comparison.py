"""make_sampler, the common sampler interface, Comparison, and the problem builders."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import lsbcore
from lsbcore import (
    DESCRIPTIONS,
    PAPER_CASES,
    SAMPLERS,
    Comparison,
    IsingPosterior,
    image_problem,
    load_balancing,
    make_sampler,
    paper_case,
    square_truth,
    uniform_start,
)
from lsbcore.balancing.json_io import balancing_to_dict
from lsbcore.samplers.registry import APP_SAMPLERS, REGISTRY

pytestmark = pytest.mark.usefixtures("single_thread")

# the dashboard's samplers (pairwise kernels); the samplers on any target: test_every_pair.py
KERNEL_SAMPLERS = tuple(name for name in SAMPLERS if not REGISTRY[name].batched_only)
RUNNABLE = [name for name in KERNEL_SAMPLERS if name != "learned"]


def small_target(shape=(4, 4), boundary="free", lam=0.5, seed=0):
    generator = torch.Generator().manual_seed(seed)
    alpha = torch.randn(*shape, generator=generator, dtype=torch.float64)
    return IsingPosterior(alpha, lam, boundary)


def frozen_lsb1():
    sampler = make_sampler("lsb1", small_target(), 4, seed=3)
    sampler.step(10, learn=True)
    return load_balancing(balancing_to_dict(sampler.balancing))


def build(name, target, n_chains, **kwargs):
    if name == "learned":
        kwargs.setdefault("balancing", frozen_lsb1())
    return make_sampler(name, target, n_chains, **kwargs)


# ------------------------------------------------------------------------------ factory
def test_every_sampler_is_listed_and_described():
    assert SAMPLERS == (
        "barker",
        "sqrt",
        "min",
        "max",
        "lsb1",
        "lsb2",
        "gibbs",
        "metropolis",
        "learned",
        "checkerboard",
        "block-gibbs",
        "hamming-ball",
        "flsb1",
        "flsb2",
        "gwg",
        "pas",
        "dmala",
        "lsb2-monotone",
        "bit-flip-mh",
        "dhmc",
        "neural-block",
        "flow-exact",
        "flow-latent",
    )
    # LSB 2' runs the pairwise sampler's torch steps, off the Ising page (app=False)
    assert KERNEL_SAMPLERS == (*SAMPLERS[:10], "lsb2-monotone")
    # the flow samplers: on the Ising page, their flow trained there in the background
    assert APP_SAMPLERS == (*SAMPLERS[:10], "flow-exact", "flow-latent")
    assert set(DESCRIPTIONS) == set(SAMPLERS)
    assert "Gibbs-with-Gradients" in DESCRIPTIONS["sqrt"]  # spec 2: say so, do not duplicate


def test_unknown_sampler_is_refused_listing_the_choices():
    with pytest.raises(ValueError, match="unknown sampler 'mala'") as info:
        make_sampler("mala", small_target(), 2)
    for name in SAMPLERS:
        assert name in str(info.value)


def test_device_none_picks_cpu_without_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for name in ("sqrt", "gibbs"):
        assert make_sampler(name, small_target(), 2, device=None).device == torch.device("cpu")
        assert make_sampler(name, small_target(), 2, device="cpu").device == torch.device("cpu")


def test_auto_picks_the_cpu_even_with_a_gpu_until_device_kernels_are_measured(monkeypatch):
    """A GPU runs the torch steps, slower than the compiled CPU steps: "auto" must not pick it
    (issue 14: auto never picks a path slower than the CPU)."""
    from lsbcore import backends
    from lsbcore.backends import resolve_backend
    from lsbcore.backends.device import unavailable_reason

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert backends.AUTO_PICKS_CUDA is False
    for device in (None, "auto"):
        assert backends.resolve_device(device) == torch.device("cpu")
    assert backends.resolve_device("cuda") == torch.device("cuda")  # an explicit choice stays one
    cuda = torch.device("cuda")
    assert resolve_backend("auto", cuda) == "torch"  # chosen explicitly: not the device kernels
    monkeypatch.setattr(backends, "AUTO_PICKS_CUDA", True)  # once measured faster, auto picks it
    assert backends.resolve_device("auto") == cuda
    kernels = unavailable_reason(cuda) is None  # Triton installed
    assert resolve_backend("auto", cuda) == ("device" if kernels else "torch")


def test_cuda_without_a_gpu_is_refused_clearly(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="no CUDA GPU is available"):
        make_sampler("sqrt", small_target(), 2, device="cuda")
    with pytest.raises(ValueError, match="no CUDA GPU is available"):
        Comparison(["sqrt"], small_target(), 2, device="cuda")


@pytest.mark.parametrize("device", ["tpu", "mps", 3.5, "cpu:x"])
def test_unknown_devices_are_refused(device):
    with pytest.raises(ValueError, match="device must be"):
        make_sampler("gibbs", small_target(), 2, device=device)


@pytest.mark.parametrize("name", KERNEL_SAMPLERS)
def test_start_state_is_validated(name):
    target = small_target((3, 4))
    with pytest.raises(ValueError, match=r"x0 must have shape \[2, 3, 4\] or \[3, 4\]"):
        build(name, target, 2, x0=torch.ones(2, 4, 3))
    with pytest.raises(ValueError, match=r"x0 must have shape"):
        build(name, target, 2, x0=torch.ones(3, 3, 4))
    for bad in (0.0, 2.0, math.nan):
        x0 = torch.ones(2, 3, 4)
        x0[1, 2, 3] = bad
        with pytest.raises(ValueError, match="x0 must contain only \\+1 and -1"):
            build(name, target, 2, x0=x0)
    shared = -torch.ones(3, 4)
    shared[0, 0] = 1
    sampler = build(name, target, 2, x0=shared)  # one [H, W] start for every chain
    assert torch.equal(sampler.x, shared.expand(2, 3, 4).double())


@pytest.mark.parametrize("n_chains", [0, -1, 1.5, True, "2", 100_001])
def test_chain_count_is_validated(n_chains):
    with pytest.raises(ValueError, match="n_chains must be an integer between 1 and 100000"):
        make_sampler("sqrt", small_target(), n_chains)


def test_chain_count_must_match_per_chain_alpha():
    target = IsingPosterior(torch.zeros(3, 4, 4), 0.5)
    with pytest.raises(ValueError, match="holds 3 alpha images but n_chains is 2"):
        make_sampler("gibbs", target, 2)
    assert make_sampler("gibbs", target, 3).x.shape == (3, 4, 4)


@pytest.mark.parametrize("seed", [-1, 1.5, True, "0", None])
def test_seed_is_validated(seed):
    with pytest.raises(ValueError, match="seed must be an integer between 0 and"):
        make_sampler("metropolis", small_target(), 2, seed=seed)


@pytest.mark.parametrize("name", ["gibbs", "metropolis"])
@pytest.mark.parametrize("option", [{"lr": 0.1}, {"hidden": 5}, {"optimizer": "sgd"}])
def test_baselines_refuse_learning_options(name, option):
    with pytest.raises(ValueError, match=f"the '{name}' sampler takes no options"):
        make_sampler(name, small_target(), 2, **option)
    make_sampler(name, small_target(), 2, resync_every=10)  # shared by every sampler


def test_samplers_refuse_options_their_registry_entry_does_not_list():
    with pytest.raises(ValueError, match=r"the 'sqrt' sampler takes no options"):
        make_sampler("sqrt", small_target(), 2, temperature=2.0)
    with pytest.raises(ValueError, match=r"the 'max' sampler takes no options, got \['lr'\]"):
        make_sampler("max", small_target(), 2, lr=0.1)  # a fixed function does not learn
    with pytest.raises(ValueError, match=r"unknown options for 'lsb1': \['hidden'\]"):
        make_sampler("lsb1", small_target(), 2, hidden=4)  # only LSB 2 has a network
    with pytest.raises(ValueError, match="balancing= is only for the 'learned' sampler"):
        make_sampler("lsb1", small_target(), 2, balancing=frozen_lsb1())


def test_learned_sampler_needs_a_balancing_function():
    with pytest.raises(ValueError, match="the 'learned' sampler needs balancing="):
        make_sampler("learned", small_target(), 2)
    with pytest.raises(ValueError, match="the 'learned' sampler needs balancing="):
        make_sampler("learned", small_target(), 2, balancing={"kind": "lsb1"})


@pytest.mark.parametrize("resync_every", [0, -5, 2.5, 10**9 + 1])
def test_resync_interval_is_validated(resync_every):
    with pytest.raises(ValueError, match="resync_every must be an integer"):
        make_sampler("sqrt", small_target(), 2, resync_every=resync_every)


def test_target_must_be_an_lsbcore_target():
    with pytest.raises(ValueError, match="target must be an lsbcore target"):
        make_sampler("gibbs", torch.zeros(3, 3), 2)


# ------------------------------------------------------------------------------ interface
@pytest.mark.parametrize("name", KERNEL_SAMPLERS)
def test_samplers_share_one_interface(name):
    target = small_target((3, 5), "periodic")
    sampler = build(name, target, 6, seed=1)
    assert sampler.device == torch.device("cpu")
    x = sampler.x
    assert x.shape == (6, 3, 5) and x.dtype == torch.float64
    assert bool(((x == 1) | (x == -1)).all())
    assert torch.equal(x, uniform_start((3, 5), 6, seed=1))  # the default start
    assert sampler.n_steps == 0 and math.isnan(sampler.accept_rate)
    torch.testing.assert_close(sampler.log_p, target.log_prob(x))
    sampler.step(0)
    assert sampler.n_steps == 0
    accepted = 0
    for _ in range(40):
        before = sampler.x.clone()
        sampler.step(1)
        changed = (sampler.x != before).reshape(6, -1).sum(1)
        assert bool((changed <= sampler.sites_per_step).all())
        accepted += int(changed.sum())
    assert sampler.n_steps == 40
    assert sampler.n_site_updates == 40 * sampler.sites_per_step
    assert sampler.sweeps == pytest.approx(40 * sampler.sites_per_step / 15)
    assert 0.0 <= sampler.accept_rate <= 1.0
    updates = 40 * sampler.sites_per_step * 6
    assert sampler.accept_rate == pytest.approx(accepted / updates, abs=1e-15)
    torch.testing.assert_close(sampler.log_p, target.log_prob(sampler.x))
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="n must be a non-negative integer"):
            sampler.step(bad)


@pytest.mark.parametrize("name", KERNEL_SAMPLERS)
@pytest.mark.parametrize(
    ("shape", "boundary", "k"),
    [((4, 4), "free", 5), ((4, 4), "periodic", 5), ((2, 3), "free", 4), ((2, 2), "periodic", 3)],
)
def test_target_evaluations_are_counted_exactly(name, shape, boundary, k):
    """One evaluation = one site's log-ratio s_i. Construction evaluates all H*W sites; a step
    evaluates the flipped site's neighbourhood (the site and its distinct neighbours:
    ``neighbourhood_size``, 5 inside a 4-neighbour lattice); a resync re-evaluates all H*W."""
    d = shape[0] * shape[1]
    sampler = build(name, small_target(shape, boundary), 3, resync_every=7)
    assert sampler.neighbourhood_size == k
    if sampler.sites_per_step > 1:  # a sweep evaluates every site's conditional once
        k = d
    assert sampler.n_target_evals == d
    sampler.step(30)
    assert sampler.n_target_evals == d + 30 * k + (30 // 7) * d
    sampler.step(5)  # 35 = 5 * 7: one more resync
    assert sampler.n_target_evals == d + 35 * k + 5 * d


# ------------------------------------------------------------------------------ Comparison
def test_comparison_starts_every_sampler_from_the_same_state():
    target = small_target((5, 5))
    names = ["sqrt", "lsb1", "gibbs", "max"]
    default = Comparison(names, target, 4, seed=9)
    expected = uniform_start((5, 5), 4, seed=9)
    for name in names:
        assert torch.equal(default[name].x, expected)
    x0 = uniform_start((5, 5), 4, seed=1)
    given = Comparison(names, target, 4, x0=x0)
    assert given.names == names
    for name in names:
        assert torch.equal(given[name].x, x0)


def test_comparison_steps_every_sampler_and_learns_only_the_learnable_ones():
    target = small_target((4, 4))
    balancing = frozen_lsb1()
    c = Comparison(
        ["sqrt", "lsb1", "lsb2", "gibbs", "learned"],
        target,
        3,
        seed=2,
        balancing=balancing,
        lr=0.05,
    )
    start = {
        name: [p.detach().clone() for p in c[name].balancing.parameters()]
        for name in ("lsb1", "lsb2", "learned")
    }
    c.step(12, learn=True)
    assert c.n_steps == 12
    assert all(c[name].n_steps == 12 for name in c.names)
    for name in ("lsb1", "lsb2"):
        assert c[name].lr == 0.05
        now = list(c[name].balancing.parameters())
        assert any(not torch.equal(a, b.detach()) for a, b in zip(start[name], now, strict=True))
        assert len(c[name].history) == 12
    for a, b in zip(start["learned"], c["learned"].balancing.parameters(), strict=True):
        assert torch.equal(a, b.detach())  # a loaded function stays frozen
    c.step(5)
    assert all(c[name].n_steps == 17 for name in c.names)


def test_comparison_records_traces_every_thin_steps_with_phases_and_marginals():
    target = small_target((4, 4))
    truth = torch.where(target.alpha[0] > 0, 1.0, -1.0).double()
    c = Comparison(["sqrt", "gibbs"], target, 3, seed=1, thin=5, truth=truth)
    c.step(7)
    c.step(5)  # chunking does not move the record points
    assert c.marginals["sqrt"].count == 0  # nothing accumulates during burn-in
    c.start_mixing()
    mixing_states = []
    for n in (3, 5):  # to steps 15 and 20, where records fall
        c.step(n)
        mixing_states.append(c["sqrt"].x.clone())
    arrays = c.traces["sqrt"].arrays()
    np.testing.assert_array_equal(arrays["step"], [0, 5, 10, 15, 20])
    np.testing.assert_array_equal(arrays["phase"], [0, 0, 0, 1, 1])
    assert arrays["magnetisation"].shape == (5, 3) and "accuracy" in arrays
    np.testing.assert_allclose(arrays["magnetisation"][-1], c["sqrt"].x.sum((1, 2)).numpy())
    assert arrays["target_evals"][-1] == c["sqrt"].n_target_evals
    assert c.marginals["sqrt"].count == 2 and c.marginals["gibbs"].count == 2
    expected = sum((x + 1) / 2 for x in mixing_states) / 2
    np.testing.assert_allclose(c.marginals["sqrt"].per_chain(), expected.numpy())


def test_comparison_without_thin_records_nothing():
    c = Comparison(["sqrt"], small_target(), 2, thin=0)
    c.step(10)
    assert c.traces == {}


def test_learning_after_mixing_starts_is_refused_and_functions_are_frozen():
    c = Comparison(["lsb1", "sqrt"], small_target(), 2, seed=0)
    c.step(3, learn=True)
    c.start_mixing()
    assert not any(p.requires_grad for p in c["lsb1"].balancing.parameters())
    with pytest.raises(ValueError, match="learning is for burn-in"):
        c.step(1, learn=True)
    c.step(4)
    assert c["lsb1"].n_steps == 7


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["sqrt", "nope"], r"unknown sampler\(s\) \['nope'\]"),
        (["sqrt", "gibbs", "sqrt"], "each sampler may appear once"),
        ([], "names must list at least one sampler"),
    ],
)
def test_comparison_refuses_bad_names(names, message):
    with pytest.raises(ValueError, match=message):
        Comparison(names, small_target(), 2)


@pytest.mark.parametrize("thin", [-1, 2.5, True])
def test_comparison_refuses_bad_thin(thin):
    with pytest.raises(ValueError, match="thin must be a non-negative integer"):
        Comparison(["sqrt"], small_target(), 2, thin=thin)


# ------------------------------------------------------------------------------ paper cases
SPEC_TABLE = {  # case: (lambda, mu, sigma, burn-in paper, burn-in authors' script)
    1: (0.0, 1.0, 3.0, 2000, 2000),
    2: (0.0, 3.0, 3.0, 2000, 800),
    3: (1.0, 1.0, 3.0, 2000, 2000),
    4: (1.0, 3.0, 3.0, 2000, 800),
}


@pytest.mark.parametrize("case", [1, 2, 3, 4])
def test_paper_cases_follow_the_spec_table(case):
    lam, mu, sigma, burn_paper, burn_script = SPEC_TABLE[case]
    problem = paper_case(case)
    assert set(PAPER_CASES) == {1, 2, 3, 4}
    assert (problem.lam, problem.mu, problem.sigma) == (lam, mu, sigma)
    assert problem.burn_in in (burn_paper, burn_script)
    assert problem.steps == 30_000
    target = problem.target
    assert target.boundary == "periodic" and target.shape == (30, 30) and target.lam == lam
    assert target.alpha.shape == (30, 30, 30)  # one noisy image per chain
    assert torch.equal(problem.truth, square_truth(30))
    # uniform noise within [-sigma, sigma] around mu * truth (not Gaussian: variance sigma^2/3)
    noise = target.alpha - mu * problem.truth
    assert noise.abs().max() <= sigma
    assert noise.min() < -0.99 * sigma and noise.max() > 0.99 * sigma
    assert abs(noise.mean().item()) < 0.02 * sigma
    assert noise.var().item() / sigma**2 == pytest.approx(1 / 3, abs=0.01)
    for b in range(1, 30):  # every chain has its own image
        assert not torch.equal(target.alpha[b], target.alpha[0])
    # one shared uniform random start
    x0 = problem.x0
    assert x0.shape == (30, 30, 30) and bool(((x0 == 1) | (x0 == -1)).all())
    assert all(torch.equal(x0[b], x0[0]) for b in range(30))
    assert abs(x0[0].mean().item()) < 0.15


def test_square_truth_has_a_border_band_of_n_over_4():
    for n in (3, 8, 10, 30, 31):
        truth = square_truth(n)
        band = n // 4
        inside = torch.zeros(n, n, dtype=torch.bool)
        inside[band : n - band, band : n - band] = True
        assert torch.equal(truth, torch.where(inside, 1.0, -1.0).double())
    truth = square_truth(30)
    assert int((truth == 1).sum()) == 16 * 16  # rows and columns 7..22


def test_paper_cases_are_seeded():
    a, b, c = (
        paper_case(3, n=8, n_chains=4, seed=1),
        paper_case(3, n=8, n_chains=4, seed=1),
        (paper_case(3, n=8, n_chains=4, seed=2)),
    )
    assert torch.equal(a.target.alpha, b.target.alpha) and torch.equal(a.x0, b.x0)
    assert not torch.equal(a.target.alpha, c.target.alpha) and not torch.equal(a.x0, c.x0)
    assert a.target.alpha.shape == (4, 8, 8)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"case": 0}, "case must be one of"),
        ({"case": 5}, "case must be one of"),
        ({"case": "1"}, "case must be one of"),
        ({"case": None}, "case must be one of"),
        ({"case": 1, "n": 2}, "n must be an integer between 3 and 1024"),
        ({"case": 1, "n": 1025}, "n must be an integer between 3 and 1024"),
        ({"case": 1, "n": 30.0}, "n must be an integer between 3 and 1024"),
        ({"case": 1, "n": True}, "n must be an integer between 3 and 1024"),
        ({"case": 1, "n_chains": 0}, "n_chains must be an integer"),
    ],
)
def test_paper_case_refuses_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        paper_case(**kwargs)


# ------------------------------------------------------------------------------ images
def gray(shape=(5, 7), seed=0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=generator, dtype=torch.float64)


def test_image_problem_alpha_is_mu_y_over_sigma_squared():
    image = gray()
    problem = image_problem(image, lam=0.8, mu=2.0, sigma=0.5, n_chains=3)
    y = 2 * image - 1
    torch.testing.assert_close(problem.target.alpha[0], 2.0 * y / 0.25, rtol=1e-14, atol=0)
    assert problem.target.batch == 1 and problem.target.lam == 0.8
    assert problem.target.boundary == "free"
    assert problem.truth is None  # no synthetic noise: no ground truth
    assert problem.x0.shape == (3, 5, 7) and bool(((problem.x0 == 1) | (problem.x0 == -1)).all())
    assert not torch.equal(problem.x0[0], problem.x0[1])  # its own start per chain
    inverted = image_problem(image, lam=0.8, mu=2.0, sigma=0.5, invert=True)
    torch.testing.assert_close(inverted.target.alpha[0], 2.0 * (1 - 2 * image) / 0.25)
    periodic = image_problem(image, lam=0.8, mu=2.0, sigma=0.5, boundary="periodic")
    assert periodic.target.boundary == "periodic"


@pytest.mark.parametrize("invert", [False, True])
def test_image_problem_with_noise_has_the_clean_thresholded_truth(invert):
    image = gray((40, 50), seed=3)
    mu, sigma, noise = 1.5, 0.8, 0.3
    problem = image_problem(image, lam=1.0, mu=mu, sigma=sigma, noise=noise, invert=invert, seed=4)
    clean = (1 - 2 * image) if invert else (2 * image - 1)
    assert torch.equal(problem.truth, torch.where(clean >= 0, 1.0, -1.0).double())
    y = problem.target.alpha[0] * sigma**2 / mu
    residual = y - clean
    assert residual.std().item() == pytest.approx(noise, rel=0.1)
    assert abs(residual.mean().item()) < 0.05
    again = image_problem(image, lam=1.0, mu=mu, sigma=sigma, noise=noise, invert=invert, seed=4)
    assert torch.equal(again.target.alpha, problem.target.alpha)  # seeded


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"image": torch.rand(2, 3, 3)}, "image must be a non-empty 2-D array"),
        ({"image": torch.zeros(0, 3)}, "image must be a non-empty 2-D array"),
        ({"image": torch.full((3, 3), 1.5)}, r"image values must be finite and within \[0, 1\]"),
        ({"image": torch.full((3, 3), -0.1)}, r"image values must be finite and within \[0, 1\]"),
        ({"image": torch.full((3, 3), math.nan)}, "image values must be finite"),
        ({"mu": math.nan}, "mu must be a real number"),
        ({"mu": math.inf}, "mu must be finite"),
        ({"mu": True}, "mu must be a real number"),
        ({"mu": "1"}, "mu must be a real number"),
        ({"sigma": 0.0}, "sigma must be > 0"),
        ({"sigma": -1.0}, "sigma must be a real number >= 0"),
        ({"noise": -0.1}, "noise must be a real number >= 0"),
        ({"noise": math.inf}, "noise must be finite"),
    ],
)
def test_image_problem_refuses_bad_arguments(args, message):
    kwargs = {"image": torch.rand(3, 3), "lam": 1.0, "mu": 1.0, "sigma": 0.5, **args}
    with pytest.raises(ValueError, match=message):
        image_problem(**kwargs)


@pytest.mark.parametrize("name", ["barker", "max", "gibbs", "lsb2"])
@pytest.mark.parametrize("boundary", ["free", "periodic"])
def test_log_p_from_cached_ratios_equals_the_targets_log_prob(name, boundary):
    generator = torch.Generator().manual_seed(3)
    alpha = torch.randn(5, 7, 7, generator=generator, dtype=torch.float64) * 2
    target = lsbcore.IsingPosterior(alpha, 0.8, boundary=boundary)
    sampler = lsbcore.make_sampler(name, target, 5, seed=1)
    for _ in range(3):
        sampler.step(700)
        exact = target.log_prob(sampler.x)
        assert torch.allclose(sampler.log_p, exact, rtol=0, atol=1e-9 * (1 + exact.abs().max()))


@pytest.mark.parametrize("name", ["barker", "sqrt", "max", "gibbs", "metropolis", "lsb1"])
def test_last_proposal_names_the_proposed_site_and_the_decision(name):
    case = lsbcore.paper_case(3, n=8, n_chains=6, seed=2)
    sampler = lsbcore.make_sampler(name, case.target, 6, seed=4, x0=case.x0)
    assert sampler.last_proposal is None
    for learn in ([False] * 20) + ([True] * 5 if sampler.learnable else []):
        before = sampler.x.clone()
        t = sampler.flip_probabilities().reshape(6, -1)
        q = torch.exp(sampler.proposal_log_probs()).reshape(6, -1)
        sampler.step(1, learn=learn)
        last = sampler.last_proposal
        changed = (sampler.x != before).reshape(6, -1)
        for b in range(6):
            site = int(last["site"][b])
            assert changed[b].sum() == int(last["accepted"][b])
            if last["accepted"][b]:
                assert changed[b, site]
            if not learn:  # frozen: A at the proposed site is T / Q of the exact matrix
                assert float(last["accept_prob"][b]) == pytest.approx(
                    float(t[b, site] / q[b, site])
                )


@pytest.mark.parametrize("thin", [1, 3])
def test_block_sampler_marginals_average_its_states_at_the_kept_steps(thin):
    """A sweep moves many sites, so its marginals come from the states themselves: they equal
    the mean of each site's conditional P(x_i = +1 | x_-i) (Rao-Blackwellised) over the kept
    steps of the same sampler run alone."""
    target = small_target((6, 5), "free")
    run = Comparison(["checkerboard"], target, 3, seed=4, thin=thin)
    run.step(4)
    run.start_mixing()
    run.step(20)
    alone = make_sampler("checkerboard", target, 3, seed=4)
    alone.step(4)
    total, kept = torch.zeros(3, 6, 5, dtype=torch.float64), 0
    for step in range(5, 25):
        alone.step(1)
        if step % thin == 0:
            total += torch.sigmoid(-alone.x * target.flip_log_ratios(alone.x))
            kept += 1
    assert torch.equal(run["checkerboard"].x, alone.x)
    np.testing.assert_allclose(run.marginals["checkerboard"].per_chain(), (total / kept).numpy())


def test_the_running_acceptance_is_undefined_before_the_first_step():
    """No curve starts at an acceptance of 0 that no step produced (the record at step 0)."""
    case = paper_case(3, n=8, n_chains=3)
    run = Comparison(["barker", "lsb2"], case.target, 3, x0=case.x0, thin=1)
    run.step(4, learn=True)
    for name in run.names:
        rate = run.traces[name].arrays()["accept_rate"]
        assert np.isnan(rate[0]) and np.isfinite(rate[1:]).all()
        assert rate[-1] == pytest.approx(run[name].accept_rate)


def test_a_sampler_added_later_is_stepped_traced_and_can_leave_again():
    target = IsingPosterior(torch.linspace(-1, 1, 36).reshape(6, 6), 0.4)
    comparison = Comparison(["barker"], target, 3, seed=1, thin=1)
    comparison.step(5)
    late = make_sampler("gibbs", target, 3, seed=2)
    comparison.add("gibbs", late)
    comparison.step(4)
    assert comparison.names == ["barker", "gibbs"]
    assert late.n_steps == 4  # its own steps, from when it joined
    assert len(comparison.traces["gibbs"]) == 5  # step 0 here, then every step
    comparison.start_mixing()
    comparison.step(2)
    assert comparison.marginals["gibbs"].count > 0
    with pytest.raises(ValueError, match="already"):
        comparison.add("gibbs", late)
    with pytest.raises(ValueError, match="runs 2 chains"):
        comparison.add("metropolis", make_sampler("metropolis", target, 2, seed=2))
    comparison.remove("gibbs")
    assert comparison.names == ["barker"] and "gibbs" not in comparison.traces
    with pytest.raises(ValueError, match="at least one"):
        comparison.remove("barker")


def test_a_late_sampler_takes_the_steps_it_missed_alone_with_a_burn_in_of_its_own():
    """Each sampler counts its own steps and phase: one added late is stepped alone (the others
    wait), burns in on its own first steps, and its trace and marginal follow its own count."""
    target = IsingPosterior(torch.linspace(-1, 1, 36).reshape(6, 6), 0.4)
    comparison = Comparison(["barker"], target, 3, seed=1, thin=1)
    comparison.step(6, learn=True)
    comparison.start_mixing()
    comparison.step(4)
    comparison.add("gibbs", make_sampler("gibbs", target, 3, seed=2), phase="burnin")
    assert comparison.sampler_steps == {"barker": 10, "gibbs": 0}
    assert comparison.sampler_phases == {"barker": "mixing", "gibbs": "burnin"}
    comparison.step(6, learn=True, names=["gibbs"])  # learning: its burn-in, not barker's
    assert comparison.sampler_steps == {"barker": 10, "gibbs": 6} and comparison.n_steps == 10
    assert comparison["barker"].n_steps == 10  # the others waited
    assert comparison.marginals["gibbs"].count == 0  # a burn-in feeds no marginal
    comparison.start_mixing(["gibbs"])
    comparison.step(4, names=["gibbs"])
    arrays = comparison.traces["gibbs"].arrays()
    assert arrays["step"].tolist() == list(range(11))  # its own steps, from its start
    assert arrays["phase"].tolist() == [0] * 7 + [1] * 4
    assert comparison.marginals["gibbs"].count == comparison.marginals["barker"].count > 0
    comparison.step(1)  # level again: side by side
    assert comparison.sampler_steps == {"barker": 11, "gibbs": 11} and comparison.n_steps == 11
    with pytest.raises(ValueError, match="learning is for burn-in"):
        comparison.step(1, learn=True, names=["gibbs"])
    with pytest.raises(ValueError, match="not in the comparison"):
        comparison.step(1, names=["metropolis"])
