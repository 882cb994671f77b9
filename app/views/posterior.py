"""The posterior at a glance: the observed image, the data term α, and the ground truth."""

from __future__ import annotations

import numpy as np
import streamlit as st

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
    out = []
    if image is not None:
        out.append((pixels.upscale(pixels.gray(image), factor), "observed image"))
    which = "α of chain 1" if per_chain else "α"
    out.append((pixels.upscale(pixels.diverging(alpha), factor), f"{which}: blue < 0 < red"))
    if truth is not None:
        out.append((pixels.upscale(pixels.spins(truth), factor), "ground truth (white: object)"))
    return out


def render(run) -> None:
    target = run.problem.target
    alpha = target.alpha[0].cpu().numpy()
    truth = None if run.problem.truth is None else run.problem.truth.cpu().numpy()
    images = posterior_images(alpha, run.image, truth, per_chain=target.batch > 1)
    h, w = target.shape
    bound = float(target.alpha.abs().max())
    own = " (each chain has its own noisy α)" if target.batch > 1 else ""
    st.caption(
        f"**{run.problem.name}** · {h}×{w} sites · λ = {target.lam:g} · |α| ≤ {bound:.2g}{own} · "
        f"{target.boundary} boundary · {run.config.chains} chains per sampler"
    )
    cols = st.columns(3)
    for col, (image, caption) in zip(cols, images, strict=False):
        col.image(pixels.data_uri(image), caption=caption, width=image.shape[1])
