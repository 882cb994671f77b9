"""Where the posterior comes from: a paper case, a shipped sample image or an upload.

``build_problem`` turns a ``Config`` (plus the decoded image, for image sources, and the
user's prompt, if any) into an ``lsbcore.Problem``. Decoding is plain functions here; the
sidebar caches them.
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
from app.file_names import photo_title
from lsbcore.segmentation.polarity import labels_polarity
from lsbcore.segmentation.starts import photo_starts

ASSETS = Path(__file__).resolve().parent.parent / "assets"
SYNTHETIC = "synthetic_disc_letter"
LUMA = np.array([0.299, 0.587, 0.114])  # BT.601, as lsbcore.load_image


def sample_names() -> tuple[str, ...]:
    """Stems of the shipped sample images (assets/*.png), the default first."""
    names = sorted(p.stem for p in ASSETS.glob("*.png"))
    return tuple(sorted(names, key=lambda n: n != DEFAULT_SAMPLE))


def load_sample(name: str, size: int) -> lsbcore.Photo:
    """A shipped sample in colour and luma, longer side at most ``size``."""
    if name not in sample_names():
        raise lsbcore.ImageError(f"There is no sample image called {name!r}.")
    return lsbcore.load_photo(ASSETS / f"{name}.png", max_side=size)


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


def read_upload(data: bytes, size: int) -> tuple[lsbcore.Photo | None, str | None]:
    """Decode uploaded bytes: ``(photo, None)`` or ``(None, a sentence saying what is wrong)``."""
    try:
        return lsbcore.load_photo(data, max_side=size), None
    except lsbcore.ImageError as err:
        return None, str(err)
    except (ValueError, TypeError) as err:
        return None, f"This file cannot be used as an image ({err})."


def is_uniform(photo: lsbcore.Photo | np.ndarray) -> bool:
    """True when the image has (almost) a single colour: nothing to segment."""
    pixels = photo.rgb if isinstance(photo, lsbcore.Photo) else np.asarray(photo)
    if pixels.size == 0:
        return True
    flat = pixels.reshape(-1, pixels.shape[-1]) if pixels.ndim == 3 else pixels.reshape(-1, 1)
    return float((flat.max(0) - flat.min(0)).max()) < 1e-3


def truth_from_mask(dark_mask: np.ndarray | None, object_is_dark: bool) -> torch.Tensor | None:
    """Ground truth (+1 = object) from the dark-object mask, following the object's polarity."""
    if dark_mask is None:
        return None
    obj = dark_mask if object_is_dark else ~dark_mask
    return torch.from_numpy(np.where(obj, 1.0, -1.0))


def _noisy(photo: lsbcore.Photo, noise: float, seed: int) -> np.ndarray:
    """The photo's pixels (RGB for colour, luma for gray) with Gaussian noise of sd ``noise``
    added on the scale of y = 2I - 1 (so sd noise / 2 on I), clipped to [0, 1]."""
    pixels = photo.rgb if photo.is_colour else photo.luma
    if noise <= 0:
        return pixels
    generator = np.random.default_rng(int(seed) + 7)
    return np.clip(pixels + 0.5 * noise * generator.standard_normal(pixels.shape), 0.0, 1.0)


def data_field(cfg: Config, photo: lsbcore.Photo):
    """The image's field ``alpha`` ``[H, W]``, the polarity used and the fitted model's
    ``DataTerm`` (None for the threshold model), plus the ground truth from synthetic noise."""
    pixels = _noisy(photo, cfg.noise, cfg.seed)
    clean = photo.rgb if photo.is_colour else photo.luma
    if cfg.model == "mixture":
        data = lsbcore.fit_data_term(pixels, mu=cfg.mu, sigma=cfg.sigma, polarity=cfg.polarity)
        truth = None
        if cfg.noise > 0:
            reference = lsbcore.fit_data_term(clean, polarity=data.polarity)
            truth = torch.from_numpy(np.where(reference.alpha >= 0, 1.0, -1.0))
        return torch.from_numpy(data.alpha), data.polarity, data, truth
    luma = pixels if pixels.ndim == 2 else pixels @ LUMA
    polarity = cfg.polarity
    if polarity == "auto":
        polarity = labels_polarity(photo.luma >= 0.5).name
    y = (2.0 * luma - 1.0) * (1.0 if polarity == "bright" else -1.0)
    truth = None
    if cfg.noise > 0:
        clean_y = (2.0 * photo.luma - 1.0) * (1.0 if polarity == "bright" else -1.0)
        truth = torch.from_numpy(np.where(clean_y >= 0, 1.0, -1.0))
    return torch.from_numpy(cfg.mu * y / cfg.sigma**2), polarity, None, truth


def prompted_field(cfg: Config, photo: lsbcore.Photo, prompt: lsbcore.Prompt):
    """``data_field`` for a prompt: colour mixtures of the object and the background fitted to
    the regions it marks (``lsbcore.fit_prompted_data_term``); the data model and object
    choices do not apply. Ground truth only from a known mask (the dark object)."""
    pixels = _noisy(photo, cfg.noise, cfg.seed)
    data = lsbcore.fit_prompted_data_term(pixels, prompt, mu=cfg.mu, sigma=cfg.sigma)
    return torch.from_numpy(data.alpha), None, data, None


def build_problem(
    cfg: Config,
    photo: lsbcore.Photo | None = None,
    dark_mask: np.ndarray | None = None,
    file_name: str | None = None,
    prompt: lsbcore.Prompt | None = None,
) -> lsbcore.Problem:
    """The posterior ``cfg`` describes (``photo`` is required for sample and upload sources;
    an upload's ``file_name`` names the problem, sanitised by ``app.file_names.photo_title``;
    ``prompt``, the user's box and points, replaces the automatic data model)."""
    if cfg.source == "paper":
        return _paper_problem(cfg)
    if photo is None:
        raise ValueError("an image source needs an image.")
    if prompt is not None:
        alpha, polarity, data, truth = prompted_field(cfg, photo, prompt)
    else:
        alpha, polarity, data, truth = data_field(cfg, photo)
    target = lsbcore.IsingPosterior(alpha, cfg.lam, boundary=cfg.boundary)
    if truth is None and dark_mask is not None and dark_mask.shape == photo.luma.shape:
        truth = truth_from_mask(dark_mask, polarity in ("dark", None))  # its object is dark
    return lsbcore.Problem(
        target=target,
        truth=truth,
        x0=photo_starts(alpha, cfg.chains, cfg.start, cfg.seed),
        lam=cfg.lam,
        mu=cfg.mu,
        sigma=cfg.sigma,
        burn_in=cfg.burn_in,
        steps=cfg.steps,
        name=cfg.sample if cfg.source == "sample" else photo_title(file_name),
        data=data,
        polarity=polarity,
    )


def _paper_problem(cfg: Config) -> lsbcore.Problem:
    """The paper's case, with the user's lambda, mu, sigma and boundary where they differ.

    ``paper_case`` draws ``alpha = mu0 * truth + sigma0 * u`` with ``u ~ U(-1, 1)`` per chain;
    other parameters reuse the same ``u`` (so a change of mu or sigma rescales one noise draw
    rather than drawing a new one): ``alpha = mu * truth + sigma * u``.
    """
    problem = lsbcore.paper_case(cfg.case, n=cfg.size, n_chains=cfg.chains, seed=cfg.seed)
    name, lam0, mu0, sigma0, _ = lsbcore.PAPER_CASES[cfg.case]
    problem = replace(problem, burn_in=cfg.burn_in, steps=cfg.steps)
    paper = (cfg.lam, cfg.mu, cfg.sigma, cfg.boundary) == (lam0, mu0, sigma0, "periodic")
    if paper and not cfg.shared_alpha:
        return problem
    truth = problem.truth
    unit = (problem.target.alpha - mu0 * truth) / sigma0
    if cfg.shared_alpha:  # chain 1's noise for every chain: one posterior, R-hat meaningful
        unit = unit[:1]
    alpha = cfg.mu * truth + cfg.sigma * unit
    title = problem.name if paper else f"case {cfg.case} geometry ({name}) with your parameters"
    return replace(
        problem,
        target=lsbcore.IsingPosterior(alpha, cfg.lam, boundary=cfg.boundary),
        lam=cfg.lam,
        mu=cfg.mu,
        sigma=cfg.sigma,
        name=f"{title}, one α for all chains" if cfg.shared_alpha else title,
    )
