"""Shared helpers for the statistical tests: exact enumeration of small Ising posteriors.

State codes: a state ``x`` of an ``H x W`` lattice is the integer whose bit ``i`` is set when
site ``i`` (row-major, ``i = r * W + c``) is +1. Flipping site ``i`` is ``code ^ (1 << i)``.

The helpers are exposed through the ``exact`` fixture (a namespace of functions), so test files
do not import from conftest.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import device_mode  # noqa: F401  (first: Triton reads its interpreter switch on import)
import numpy as np
import pytest
import torch

from lsbcore import exact as exact_chain

# Monte Carlo threshold for total-variation checks (spec section 9).
#
# With N independent draws from p over K states, E|p^_k - p_k| <= sqrt(2 / pi) sqrt(p_k / N)
# (normal approximation of the binomial), so
#     E[TV] = 1/2 sum_k E|p^_k - p_k| <= 0.40 sum_k sqrt(p_k) / sqrt(N) <= 0.40 sqrt(K / N),
# the last step by Cauchy-Schwarz (equality for uniform p): the spec's noise floor. We use the
# middle, exact form 0.40 sqrt(K_eff / N) with K_eff = (sum_k sqrt(p_k))^2 <= K: for a peaked
# posterior it is tighter (more power), for a flat one it is the spec's floor. TV hardly
# fluctuates around its mean (one draw moves it by at most 1/N; McDiarmid gives
# P(TV > E[TV] + eps) <= exp(-2 eps^2 N), e^-20 for eps = 0.01 at N = 1e5). Our draws are
# thinned states of B independent chains, so N_eff = N / tau with tau the integrated
# autocorrelation time of the thinned series; TV_SAFETY = 3 allows tau up to 9. A sampler
# without (or with an inverted) Metropolis-Hastings correction sits at TV >= 0.15 (measured;
# computed exactly in test_exactness.py::test_the_tv_check_would_catch_a_missing_mh_correction),
# while the thresholds used here are 0.02-0.07.
TV_SAFETY = 3.0


def all_states(height: int, width: int) -> torch.Tensor:
    """Every state of the lattice, ``[2^D, H, W]`` float64, row ``k`` being state code ``k``."""
    return exact_chain.all_states(height * width).view(-1, height, width)


def exact_posterior(target, chain: int = 0) -> np.ndarray:
    """Normalised posterior over all ``2^D`` states of any target (the field of ``chain`` if
    there is one per chain); state code ``k`` as in ``all_states``."""
    return exact_chain.exact_distribution(target.chain(chain))


def histogram(sampler, burn_in: int, thin: int, draws: int, chains=None) -> np.ndarray:
    """Counts of visited state codes: ``burn_in`` steps, then ``draws`` states ``thin`` apart."""
    k = 2**sampler.n_sites
    counts = np.zeros(k)
    sampler.step(burn_in)
    for _ in range(draws):
        sampler.step(thin)
        x = sampler.x if chains is None else sampler.x[chains]
        counts += np.bincount(exact_chain.state_codes(x).numpy(), minlength=k)
    return counts


def tv(p: np.ndarray, q: np.ndarray) -> float:
    """Total-variation distance between two distributions (``q`` may be counts)."""
    q = np.asarray(q, dtype=np.float64)
    return 0.5 * float(np.abs(np.asarray(p) - q / q.sum()).sum())


def tv_threshold(p: np.ndarray, n_draws: int) -> float:
    """``TV_SAFETY`` times the noise floor ``0.4 sqrt(K_eff / N)`` (derivation above)."""
    k_eff = float(np.sqrt(np.clip(p, 0.0, None)).sum()) ** 2
    return TV_SAFETY * 0.4 * math.sqrt(k_eff / n_draws)


def random_alpha(shape, scale: float = 0.5, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64) * scale


@pytest.fixture(scope="module")
def single_thread():
    """Run a module's tests with one intra-op thread, restoring the setting afterwards.

    The samplers work on many tiny tensors; with several OpenMP threads on a busy 2-core machine
    each small op pays a thread hand-off (measured 10x slower), and nothing here is large enough
    to gain from a second thread.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def exact():
    return SimpleNamespace(
        all_states=all_states,
        state_codes=exact_chain.state_codes,
        exact_posterior=exact_posterior,
        histogram=histogram,
        tv=tv,
        tv_threshold=tv_threshold,
        transition_matrix=exact_chain.flip_matrix,
        random_alpha=random_alpha,
    )


def default_backend(monkeypatch, backend: str) -> None:
    """Samplers built with ``backend="auto"`` (the default) run on ``backend`` in this test."""
    from lsbcore import backends
    from lsbcore.samplers import base

    def resolve(requested, device):
        return backends.resolve_backend(backend if requested == "auto" else requested, device)

    monkeypatch.setattr(base, "resolve_backend", resolve)


@pytest.fixture(params=["compiled", "torch"])
def backend(request, monkeypatch):
    """Run a test on both backends: the compiled CPU kernels and the torch steps (what CUDA
    runs). Test files that default to the torch path set that in an autouse fixture."""
    default_backend(monkeypatch, request.param)
    return request.param


@pytest.fixture(autouse=True)
def no_held_groups():
    """The app's warm-up (run by any app test in this process) holds the learning kernels to one
    chain group until their twins are compiled (``threads.hold_groups``): no other test runs
    under that hold."""
    from lsbcore.backends import threads

    threads.hold_groups(None)


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels():
    """Compile (or load) the kernels once, before any test measures or times anything. The app
    tests' warm-ups start no twin child (``warmup.TWINS_IN_CHILD``; tests/test_twin_warmup.py
    turns it on where it tests it)."""
    from lsbcore.samplers import warmup

    warmup.TWINS_IN_CHILD = False
    warmup.compile_kernels()


# Test files that start browsers, Streamlit servers or Dask clusters, or measure time: make test
# runs them one at a time after the rest, which runs on both cores (pytest -n 2), so that
# neither a second browser nor a second cluster competes with them for the machine. Every
# test_browser*.py file is one of them (``is_serial``); the others are listed here.
SERIAL_FILES = {
    "test_experiment.py",
    "test_load.py",
    "test_random_use.py",
    "test_rbm_cells.py",
    "test_sweep_cli.py",
    "test_sweep_driver.py",
}


def is_serial(name: str) -> bool:
    """Whether the test file ``name`` runs alone (``SERIAL_FILES``, or a browser test)."""
    return name in SERIAL_FILES or name.startswith("test_browser")


def pytest_ignore_collect(collection_path, config):
    """``-m serial`` (make test's second run) selects the files in SERIAL_FILES only: the others
    are not even imported (their imports took 11 of the 16 s its collection took). A file named
    on the command line is always collected."""
    if config.getoption("markexpr", "").strip() != "serial":
        return None
    name = collection_path.name
    if name.startswith("test_") and name.endswith(".py") and not is_serial(name):
        return True
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        if is_serial(item.path.name):
            item.add_marker(pytest.mark.serial)
