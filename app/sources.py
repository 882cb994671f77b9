"""Where the posterior comes from: a paper case, a shipped sample image or an upload.

``build_problem`` turns a ``Config`` (plus the decoded image, for image sources) into an
``lsbcore.Problem``. Decoding is plain functions here; the sidebar caches them.
"""

from __future__ import annotations

import importlib.util
import io
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from PIL import Image

import lsbcore
from app.config import DEFAULT_SAMPLE, Config

ASSETS = Path(__file__).resolve().parent.parent / "assets"
SYNTHETIC = "synthetic_disc_letter"


def sample_names() -> tuple[str, ...]:
    """Stems of the shipped sample images (assets/*.png), the default first."""
    names = sorted(p.stem for p in ASSETS.glob("*.png"))
    return tuple(sorted(names, key=lambda n: n != DEFAULT_SAMPLE))


def load_sample(name: str, size: int) -> np.ndarray:
    """A shipped sample as a grayscale array in [0, 1], longer side at most ``size``."""
    if name not in sample_names():
        raise lsbcore.ImageError(f"There is no sample image called {name!r}.")
    return lsbcore.load_image(ASSETS / f"{name}.png", max_side=size)


def sample_dark_mask(name: str, size: int) -> np.ndarray | None:
    """Where the dark object truly is, for samples that know it (the synthetic one), else None.

    The mask goes through the same decoder and box downscale as the image, then is thresholded
    at one half, so it lines up with the working resolution pixel for pixel.
    """
    if name != SYNTHETIC:
        return None
    spec = importlib.util.spec_from_file_location("_lsb_assets", ASSETS / "make_assets.py")
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _, mask = module.make_synthetic()
    buffer = io.BytesIO()
    Image.fromarray(mask.astype(np.uint8) * 255).save(buffer, format="PNG")
    return lsbcore.load_image(buffer.getvalue(), max_side=size) >= 0.5


def read_upload(data: bytes, size: int) -> tuple[np.ndarray | None, str | None]:
    """Decode uploaded bytes: ``(image, None)`` or ``(None, a sentence saying what is wrong)``."""
    try:
        return lsbcore.load_image(data, max_side=size), None
    except lsbcore.ImageError as err:
        return None, str(err)
    except (ValueError, TypeError) as err:
        return None, f"This file cannot be used as an image ({err})."


def is_uniform(image: np.ndarray) -> bool:
    """True when the image has (almost) a single gray level: nothing to segment."""
    return image.size == 0 or float(image.max() - image.min()) < 1e-3


def truth_from_mask(dark_mask: np.ndarray | None, invert: bool) -> torch.Tensor | None:
    """Ground truth (+1 = object) from the dark-object mask, following "object is dark"."""
    if dark_mask is None:
        return None
    obj = dark_mask if invert else ~dark_mask
    return torch.from_numpy(np.where(obj, 1.0, -1.0))


def build_problem(
    cfg: Config, image: np.ndarray | None = None, dark_mask: np.ndarray | None = None
) -> lsbcore.Problem:
    """The posterior ``cfg`` describes (``image`` is required for sample and upload sources)."""
    if cfg.source == "paper":
        return _paper_problem(cfg)
    if image is None:
        raise ValueError("an image source needs an image.")
    problem = lsbcore.image_problem(
        image,
        cfg.lam,
        cfg.mu,
        cfg.sigma,
        n_chains=cfg.chains,
        invert=cfg.invert,
        noise=cfg.noise,
        boundary=cfg.boundary,
        seed=cfg.seed,
        burn_in=cfg.burn_in,
        steps=cfg.steps,
    )
    if problem.truth is None and dark_mask is not None and dark_mask.shape == image.shape:
        problem = replace(problem, truth=truth_from_mask(dark_mask, cfg.invert))
    name = cfg.sample if cfg.source == "sample" else "uploaded image"
    return replace(problem, name=name)


def _paper_problem(cfg: Config) -> lsbcore.Problem:
    """The paper's case, with the user's lambda, mu, sigma and boundary where they differ.

    ``paper_case`` draws ``alpha = mu0 * truth + sigma0 * u`` with ``u ~ U(-1, 1)`` per chain;
    other parameters reuse the same ``u`` (so a change of mu or sigma rescales one noise draw
    rather than drawing a new one): ``alpha = mu * truth + sigma * u``.
    """
    problem = lsbcore.paper_case(cfg.case, n=cfg.size, n_chains=cfg.chains, seed=cfg.seed)
    name, lam0, mu0, sigma0, _ = lsbcore.PAPER_CASES[cfg.case]
    problem = replace(problem, burn_in=cfg.burn_in, steps=cfg.steps)
    if (cfg.lam, cfg.mu, cfg.sigma, cfg.boundary) == (lam0, mu0, sigma0, "periodic"):
        return problem
    truth = problem.truth
    unit = (problem.target.alpha - mu0 * truth) / sigma0
    alpha = cfg.mu * truth + cfg.sigma * unit
    target = lsbcore.IsingPosterior(alpha, cfg.lam, boundary=cfg.boundary)
    return replace(
        problem,
        target=target,
        lam=cfg.lam,
        mu=cfg.mu,
        sigma=cfg.sigma,
        name=f"case {cfg.case} geometry ({name}) with your parameters",
    )
