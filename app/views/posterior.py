"""The posterior at a glance: the observed image, the data term α, and the ground truth."""

from __future__ import annotations

import numpy as np
import streamlit as st

from app.text import counted, grid_size
from app.views import pixels

SIDE = 140


def posterior_images(
    alpha: np.ndarray,
    image: np.ndarray | None = None,
    truth: np.ndarray | None = None,
    side: int = SIDE,
    per_chain: bool = False,
) -> list[tuple[np.ndarray, str]]:
    """(uint8 image, caption) pairs: observed image (if any), α (blue < 0 < red), truth."""
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.ndim != 2 or alpha.size == 0:
        return []
    factor = pixels.scale_for(alpha.shape, side)
    shrunk = max(alpha.shape) > side
    out = []
    if image is not None:
        observed = pixels.colour_image(image)
        if max(observed.shape[:2]) > side:
            observed, factor = pixels.shrink(observed, side), 1
        out.append((pixels.upscale(observed, factor), "observed image"))
    which = "α of chain 1" if per_chain else "α"
    field = pixels.diverging(alpha)
    field = pixels.shrink(field, side) if shrunk else pixels.upscale(field, factor)
    out.append((field, f"{which}: blue < 0 < red"))
    if truth is not None:
        spins = pixels.spins(truth)
        spins = pixels.shrink(spins, side) if shrunk else pixels.upscale(spins, factor)
        out.append((spins, "ground truth (white: object)"))
    return out


def polarity_text(problem, asked: str) -> str:
    """Which class is the object, and why: the user's choice or the automatic one's reason."""
    which = f"the {problem.polarity}er class" if problem.polarity else "?"
    model = (
        "a two-class mixture fitted to the image"
        if problem.data is not None
        else "the mid-grey threshold"
    )
    if asked != "auto":
        return f"Object: {which} (your choice), under {model}."
    reason = getattr(getattr(problem.data, "auto_polarity", None), "reason", None)
    reason = reason or (
        "the class that touches the image border less" if problem.data is None else ""
    )
    return f"Object: {which}, picked automatically ({reason}), under {model}."


def render(run) -> None:
    target = run.problem.target
    alpha = target.alpha[0].cpu().numpy()
    truth = None if run.problem.truth is None else run.problem.truth.cpu().numpy()
    photo = run.photo
    observed = None if photo is None else (photo.rgb if photo.is_colour else photo.luma)
    images = posterior_images(alpha, observed, truth, per_chain=target.batch > 1)
    h, w = target.shape
    bound = float(target.alpha.abs().max())
    own = " (each chain has its own noisy α)" if target.batch > 1 else ""
    st.caption(
        f"**{run.problem.name}** · {grid_size(h, w)} sites (width × height) · "
        f"λ = {target.lam:g} · |α| ≤ {bound:.2g}{own} · {target.boundary} boundary · "
        f"{counted(run.config.chains, 'chain')} per sampler"
    )
    problem = run.problem
    if problem.polarity is not None:
        st.caption(polarity_text(problem, run.config.polarity))
    cols = st.columns(3)
    for col, (image, caption) in zip(cols, images, strict=False):
        col.image(pixels.data_uri(image), caption=caption, width=image.shape[1])
