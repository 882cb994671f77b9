"""View 7, Segmentation: the posterior marginal, the thresholded mask over the image, and where
the posterior is unsure (binary entropy); the mask downloads as a PNG.

After burn-in the marginal is the running mean of (x + 1)/2 over every post-burn-in record and
chain; during burn-in the mean of the current states stands in for it (and says so).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import streamlit as st
from PIL import Image

from app.views import pixels
from app.widgets import ensure, ensure_in_range
from lsbcore.figures import sampler_label as label

SIDE = 220
POOLED = "all samplers pooled"


@dataclass
class Segmentation:
    observed: np.ndarray | None  # uint8 image
    marginal: np.ndarray  # uint8, P(x = +1) as gray
    overlay: np.ndarray  # uint8 RGB: mask tinted over the image
    uncertainty: np.ndarray  # uint8 RGB: entropy in bits, inferno
    mask: np.ndarray  # bool [H, W]
    accuracy: float | None
    object_fraction: float


def binary_entropy(p: np.ndarray) -> np.ndarray:
    """Entropy in bits of a Bernoulli(p), 0 where p is 0 or 1."""
    p = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)
    q = 1.0 - p
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -(p * np.log2(np.where(p > 0, p, 1.0)) + q * np.log2(np.where(q > 0, q, 1.0)))
    return np.clip(h, 0.0, 1.0)


def mask_png(mask: np.ndarray) -> bytes:
    """The mask as an 8-bit PNG at the working resolution: object 255, background 0."""
    buffer = io.BytesIO()
    Image.fromarray(np.where(np.asarray(mask, dtype=bool), 255, 0).astype(np.uint8)).save(
        buffer, format="PNG"
    )
    return buffer.getvalue()


def segmentation_view(
    marginal: np.ndarray,
    image: np.ndarray | None = None,
    threshold: float = 0.5,
    truth: np.ndarray | None = None,
    side: int = SIDE,
) -> Segmentation | None:
    """Images for a marginal ``[H, W]`` in [0, 1]; ``image`` (grayscale in [0, 1]) underlays the
    mask, ``truth`` (+-1) gives the accuracy. None for an empty marginal."""
    marginal = np.asarray(marginal, dtype=np.float64)
    if marginal.ndim != 2 or marginal.size == 0:
        return None
    factor = pixels.scale_for(marginal.shape, side)
    mask = marginal >= threshold
    underlay = image if image is not None and np.shape(image) == marginal.shape else marginal
    accuracy = None
    if truth is not None and np.shape(truth) == marginal.shape:
        accuracy = float(np.mean(mask == (np.asarray(truth) > 0)))
    return Segmentation(
        observed=None if image is None else pixels.upscale(pixels.gray(image), factor),
        marginal=pixels.upscale(pixels.gray(marginal), factor),
        overlay=pixels.upscale(pixels.overlay(underlay, mask), factor),
        uncertainty=pixels.upscale(
            pixels.colour(binary_entropy(marginal), 0.0, 1.0, "inferno"), factor
        ),
        mask=mask,
        accuracy=accuracy,
        object_fraction=float(mask.mean()),
    )


def snapshot(run, choice: str = POOLED) -> tuple[np.ndarray, str]:
    comparison = run.comparison
    names = comparison.names if choice == POOLED else [choice]
    with run.lock:
        estimates = [comparison.marginals[n] for n in names]
        if all(m.count for m in estimates):
            marginal = np.mean([m.mean() for m in estimates], axis=0)
            return marginal, f"posterior marginal from {estimates[0].count:,} records per chain"
        states = [comparison[n].x.cpu().numpy() for n in names]
    marginal = np.mean([(x + 1) / 2 for x in states], axis=(0, 1))
    return marginal, "mean of the current states (burn-in is still running)"


def render(run) -> None:
    comparison = run.comparison
    options = [POOLED, *comparison.names]
    ensure("seg_sampler", POOLED, lambda v: v in options)
    ensure_in_range("seg_threshold", 0.5, 0.01, 0.99)
    left, right = st.columns(2)
    choice = left.selectbox(
        "Marginal from",
        options,
        format_func=lambda n: n if n == POOLED else label(n),
        key="seg_sampler",
    )
    threshold = right.slider("Threshold on P(x = +1)", 0.01, 0.99, step=0.01, key="seg_threshold")
    marginal, source = snapshot(run, choice)
    image = run.image
    if image is None:  # paper cases: the first chain's alpha stands for the observation
        alpha = run.problem.target.alpha[0].cpu().numpy()
        bound = max(float(np.abs(alpha).max()), 1e-12)
        image = (alpha / bound + 1) / 2
    truth = None if run.problem.truth is None else run.problem.truth.cpu().numpy()
    view = segmentation_view(marginal, image, threshold, truth)
    if view is None:
        st.info("Nothing to segment yet.")
        return
    cols = st.columns(4)
    observed_caption = "observed image" if run.image is not None else "α of chain 1 (scaled)"
    cols[0].image(
        pixels.data_uri(view.observed), caption=observed_caption, width=view.observed.shape[1]
    )
    cols[1].image(
        pixels.data_uri(view.marginal),
        caption="P(x = +1): white = object",
        width=view.marginal.shape[1],
    )
    cols[2].image(
        pixels.data_uri(view.overlay),
        caption=f"mask (P ≥ {threshold:.2f}) over it",
        width=view.overlay.shape[1],
    )
    cols[3].image(
        pixels.data_uri(view.uncertainty),
        caption="uncertainty: entropy, 0–1 bit",
        width=view.uncertainty.shape[1],
    )
    summary = f"From the {source}. Object: {view.object_fraction:.1%} of the pixels."
    if view.accuracy is not None:
        summary += f" Accuracy against the ground truth: {view.accuracy:.1%}."
    st.caption(summary)
    st.download_button(
        "Download mask (PNG)",
        data=mask_png(view.mask),
        file_name="lsb-mask.png",
        mime="image/png",
        on_click="ignore",
        key="download_mask",
    )
