"""The library's edges: numbers checked where they are used. Targets refuse fields whose
log-ratios would overflow (with the bound in the sentence) and sizes beyond the cap, before
allocating; numpy scalars are accepted and booleans refused wherever a number is taken."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
import torch

import lsbcore
from lsbcore import (
    IsingPosterior,
    PairwiseMRF,
    image_problem,
    load_balancing,
    make_sampler,
    paper_case,
)
from lsbcore.balancing.json_io import FORMAT, PROBE_RANGE, VERSION
from lsbcore.targets.base import MAX_LOCAL_FIELD

BOUND = "at most 1e\\+06 is supported"


@pytest.mark.parametrize(
    "build",
    [
        lambda: IsingPosterior(torch.full((4, 4), 1e308, dtype=torch.float64), 1.0),
        lambda: IsingPosterior(torch.full((4, 4), -1e307, dtype=torch.float64), 0.0),
        lambda: IsingPosterior(torch.zeros(4, 4), 1e306),
        lambda: PairwiseMRF(torch.tensor([0.0, 1e307], dtype=torch.float64), torch.zeros(2, 2)),
        lambda: PairwiseMRF(torch.zeros(2), np.array([[0.0, 1e307], [1e307, 0.0]])),
    ],
    ids=["alpha 1e308", "alpha -1e307", "lambda 1e306", "h 1e307", "J 1e307"],
)
def test_fields_that_would_overflow_are_refused_with_the_bound(build):
    with pytest.raises(ValueError, match=BOUND):
        build()


@pytest.mark.parametrize("name", ["barker", "max", "gibbs", "metropolis", "checkerboard"])
def test_a_target_just_inside_the_bound_samples_with_finite_numbers(name):
    lam = MAX_LOCAL_FIELD / 10
    alpha = torch.full((4, 4), MAX_LOCAL_FIELD - 4 * lam - 1.0, dtype=torch.float64)
    alpha[::2] *= -1
    target = IsingPosterior(alpha, lam, "periodic")
    sampler = make_sampler(name, target, 3, seed=0)
    sampler.step(50)
    assert bool(torch.isfinite(sampler.log_p).all())
    assert np.isfinite(sampler.accept_rate)


def test_size_caps_refuse_before_allocating():
    huge = torch.zeros(20000, 20000, dtype=torch.float32)  # 1.6 GB as given; float64 would be 3.2
    with pytest.raises(ValueError, match="alpha holds 400,000,000 numbers; at most"):
        IsingPosterior(huge, 1.0)
    with pytest.raises(ValueError, match="at most 4,200,000 sites"):
        IsingPosterior(torch.zeros(1, 2100, 2100), 1.0)


def test_image_problem_says_what_is_wrong_in_a_sentence():
    image = np.full((6, 6), 0.5)
    with pytest.raises(ValueError, match="n_chains must be an integer between 1 and 10000"):
        image_problem(image, 1.0, 1.0, 1.0, n_chains=-2)
    with pytest.raises(ValueError, match="image must be a numeric array, got str"):
        image_problem("abc", 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="seed must be an integer between 0 and"):
        image_problem(image, 1.0, 1.0, 1.0, seed=True)


def test_numpy_scalars_are_accepted_like_python_numbers():
    case = paper_case(np.int64(2), n=np.int64(6), n_chains=np.int32(3), seed=np.uint8(1))
    reference = paper_case(2, n=6, n_chains=3, seed=1)
    assert torch.equal(case.target.field, reference.target.field)
    target = IsingPosterior(torch.zeros(3, 3), np.float32(0.5))
    assert target.lam == 0.5
    sampler = make_sampler(
        "lsb2", case.target, np.int64(3), seed=np.int64(4), lr=np.float32(0.01), hidden=np.int8(4)
    )
    sampler.step(np.int64(5), learn=True)
    assert sampler.n_steps == 5 and sampler.balancing.hidden == 4
    image = image_problem(np.full((5, 5), 0.5), np.float64(1.0), np.float32(1.0), np.int64(2))
    assert image.target.shape == (5, 5)


@pytest.mark.parametrize("flag", [True, np.bool_(True)])
def test_booleans_are_refused_where_a_number_is_meant(flag):
    with pytest.raises(ValueError, match="case must be one of"):
        paper_case(flag)
    target = paper_case(1, n=4, n_chains=2).target
    with pytest.raises(ValueError, match="n_chains must be an integer"):
        make_sampler("sqrt", target, flag)
    sampler = make_sampler("sqrt", target, 2)
    with pytest.raises(ValueError, match="n must be a non-negative integer"):
        sampler.step(flag)
    with pytest.raises(ValueError, match="lam must be a real number"):
        IsingPosterior(torch.zeros(3, 3), flag)
    with pytest.raises(ValueError, match="hidden must be an integer"):
        make_sampler("lsb2", target, 2, hidden=flag)
    assert lsbcore.checks.integer(np.int16(7), "x") == 7


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: paper_case(True), "case"),
        (lambda: paper_case(1, n=np.bool_(True)), "n"),
        (lambda: image_problem(np.full((4, 4), 0.5), 1.0, True, 1.0), "mu"),
        (lambda: IsingPosterior(torch.zeros(3, 3), np.bool_(False)), "lam"),
        (lambda: make_sampler("sqrt", paper_case(1, n=4, n_chains=2).target, 2, seed=True), "seed"),
        (
            lambda: make_sampler("lsb2", paper_case(1, n=4, n_chains=2).target, 2, hidden="4"),
            "hidden",
        ),
    ],
)
def test_a_boolean_or_a_string_for_a_number_is_a_type_error(call, name):
    with pytest.raises(TypeError, match=f"{name} must be"):
        call()
    with pytest.raises(ValueError):  # still a ValueError, which the app shows as a sentence
        call()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: IsingPosterior(torch.zeros(3, 3), 10**400), "lam must be a finite number"),
        (lambda: image_problem(np.full((4, 4), 0.5), 1.0, 10**400, 1.0), "mu must be finite"),
        (lambda: paper_case(1, n=4, n_chains=2, seed=2**70), "seed must be an integer between"),
        (lambda: paper_case(1, n=10**5000), "n must be an integer .* of about 5000 digits"),
    ],
    ids=["lam 400 digits", "mu 400 digits", "seed 2^70", "n 5000 digits"],
)
def test_huge_integers_are_refused_with_a_short_sentence(call, message):
    with pytest.raises(ValueError, match=message) as err:
        call()
    assert len(str(err.value)) < 200 and "set_int_max_str_digits" not in str(err.value)


def test_a_site_with_too_many_neighbours_is_refused_before_its_tables_exist():
    # a star: one site joined to every other makes n x n neighbour tables (80 GB here)
    n = 100_000
    hub, leaves = np.zeros(n - 1, dtype=np.int64), np.arange(1, n)
    star = scipy.sparse.coo_matrix(
        (np.full(2 * (n - 1), 1e-3), (np.r_[hub, leaves], np.r_[leaves, hub])), shape=(n, n)
    )
    with pytest.raises(ValueError, match="neighbour tables would hold 100,000 sites x 100,000"):
        PairwiseMRF(np.zeros(n), star)


def test_learned_functions_are_checked_over_every_log_ratio_a_target_allows():
    assert PROBE_RANGE >= 2 * MAX_LOCAL_FIELD  # |s_i| = 2 |f_i| <= 2 MAX_LOCAL_FIELD
    hidden = 256  # the widest LSB 2, every parameter at the file's bound
    params = {"hidden": hidden, "w1": [1e4] * hidden, "b1": [-1e4] * hidden}
    params |= {"w2": [1e4] * hidden, "b2": 1e4}
    data = {"format": FORMAT, "version": VERSION, "kind": "lsb2", "parameters": params}
    balancing = load_balancing(data)
    s = torch.linspace(-2 * MAX_LOCAL_FIELD, 2 * MAX_LOCAL_FIELD, 4097, dtype=torch.float64)
    assert bool(torch.isfinite(balancing.log_g(s)).all())  # the lattice's piecewise path
    assert bool(torch.isfinite(balancing.log_g(s[::41])).all())  # the network as written
