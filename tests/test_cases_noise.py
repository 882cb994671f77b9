"""The paper cases' two noise models: the authors' code's (uniform, Table 2's default) and the
paper's text's (Gaussian pixels, alpha = mu y / sigma^2), each checked against its formula."""

from __future__ import annotations

import math

import pytest
import torch

from lsbcore.cases import NOISE_MODELS, paper_case, square_problem
from lsbcore.studies.experiment.cli import main as experiment


def _noise(problem) -> torch.Tensor:
    """``alpha`` of every chain, flattened, with the truth's sign folded out (``alpha * truth``):
    one sample of the per-site noise distribution per chain and site."""
    return (problem.target.alpha * problem.truth).flatten()


def test_the_default_is_the_authors_uniform_noise_on_its_exact_support():
    """Case 2 (mu 3, sigma 3): alpha * truth ~ mu + U(-sigma, sigma) = U(0, 6): never below 0
    (the sign of alpha is always right: why the paper calls it clean), mean 3, var 36 / 12."""
    default = paper_case(2, n=30, n_chains=200, seed=4)
    named = paper_case(2, n=30, n_chains=200, seed=4, noise_model="uniform")
    assert torch.equal(default.target.alpha, named.target.alpha)
    z = _noise(default)
    assert float(z.min()) >= 0.0 and float(z.max()) <= 6.0
    assert float(z.min()) < 0.01 and float(z.max()) > 5.99  # the whole support is used
    se = math.sqrt(3.0 / z.numel())  # std 6 / sqrt(12)
    assert float(z.mean()) == pytest.approx(3.0, abs=5 * se)
    assert float(z.var()) == pytest.approx(3.0, rel=0.02)


def test_the_paper_texts_gaussian_noise_has_its_formulas_mean_spread_and_sign_errors():
    """Case 2 under the text's model: y = 3 truth + 3 e, alpha = 3 y / 9, so alpha * truth =
    1 + e ~ N(mu^2 / sigma^2, (mu / sigma)^2) = N(1, 1): unbounded, and alpha's sign is wrong
    at a site with probability Phi(-1) = 0.1587."""
    problem = paper_case(2, n=30, n_chains=200, seed=4, noise_model="gaussian")
    z = _noise(problem)
    n = z.numel()
    assert float(z.mean()) == pytest.approx(1.0, abs=5 / math.sqrt(n))
    assert float(z.std()) == pytest.approx(1.0, rel=0.01)
    phi = 0.5 * math.erfc(1.0 / math.sqrt(2.0))  # Phi(-1)
    wrong = float((z < 0).double().mean())
    assert wrong == pytest.approx(phi, abs=5 * math.sqrt(phi * (1 - phi) / n))
    assert float(z.min()) < -3.0 and float(z.max()) > 5.0  # beyond the uniform model's [0, 6]


@pytest.mark.parametrize(("mu", "sigma"), [(1.0, 3.0), (3.0, 1.5)])
def test_the_gaussian_models_moments_follow_mu_and_sigma(mu, sigma):
    """alpha * truth ~ N(mu^2 / sigma^2, mu^2 / sigma^2) at any (mu, sigma), lambda aside."""
    problem = square_problem(0.5, mu, sigma, n=20, n_chains=300, seed=1, noise_model="gaussian")
    z = _noise(problem)
    mean, std = mu**2 / sigma**2, mu / sigma
    assert float(z.mean()) == pytest.approx(mean, abs=5 * std / math.sqrt(z.numel()))
    assert float(z.std()) == pytest.approx(std, rel=0.01)
    assert problem.target.lam == 0.5 and problem.truth is not None


def test_an_unknown_noise_model_or_a_zero_sigma_under_the_gaussian_one_is_refused():
    with pytest.raises(ValueError, match="noise_model must be one of"):
        paper_case(1, n=6, n_chains=2, noise_model="laplace")
    with pytest.raises(ValueError, match="sigma must be > 0 under the gaussian"):
        square_problem(0.0, 1.0, 0.0, n=6, n_chains=2, noise_model="gaussian")
    assert NOISE_MODELS == ("uniform", "gaussian")


def test_the_experiment_command_draws_the_chosen_noise_and_records_it(tmp_path):
    """``--noise-model gaussian`` reaches the problem (different alphas, so different chains)
    and results.json's config says which model made them."""
    import json

    configs = {}
    for model in NOISE_MODELS:
        out = tmp_path / model
        code = experiment(
            ["--case", "2", "--size", "6", "--chains", "2", "--steps", "40", "--burn-in", "10",
             "--samplers", "barker", "--noise-model", model, "--quiet", "--out", str(out)]
        )  # fmt: skip
        assert code == 0
        configs[model] = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert [configs[m]["config"]["noise_model"] for m in NOISE_MODELS] == list(NOISE_MODELS)
    ess = [configs[m]["samplers"]["barker"]["ess_paper_mean"] for m in NOISE_MODELS]
    assert ess[0] != ess[1]


def test_the_noise_model_flag_is_refused_for_an_image(tmp_path, capsys):
    from PIL import Image

    path = tmp_path / "a.png"
    Image.new("L", (8, 8), 128).save(path)
    with pytest.raises(SystemExit):
        experiment(
            ["--image", str(path), "--lam", "1", "--mu", "1", "--sigma", "1",
             "--noise-model", "gaussian", "--out", str(tmp_path / "o")]
        )  # fmt: skip
    assert "--noise-model applies to --case problems" in capsys.readouterr().err
