"""The RBM's live view: each sampler's current states drawn as small images, one row each.

A state is the RBM's visible layer (``x`` of +-1, ``v = (1 + x) / 2``) laid out on the model's
shape (8 x 8 or 16 x 16 for the digits): on units are drawn dark, like ink on paper, so a
sampler that mixes draws recognisable digits. Every sampler started from the same random states.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from app import presentation, rbm_targets
from app.text import counted, grid_size

TILE_PX = 72  # on-screen side of one state at most
GAP_PX = 6  # white pixels between two states of a row
INK, PAPER, GAP = 20, 245, 255


def digit_strip(states: np.ndarray, shape: tuple[int, int], tile_px: int = TILE_PX) -> np.ndarray:
    """``states [k, n]`` of +-1 as one uint8 image: ``k`` tiles of ``shape`` side by side, each
    pixel a square of ``tile_px // max(shape)`` screen pixels (at least 1), on units dark."""
    states = np.asarray(states)
    height, width = shape
    if states.ndim != 2 or states.shape[1] != height * width:
        raise ValueError(
            f"states must be [k, {height * width}] for a {grid_size(height, width)} layout, got "
            f"{list(states.shape)}."
        )
    scale = max(1, tile_px // max(height, width))
    tiles = []
    for state in states:
        on = state.reshape(height, width) > 0
        tile = np.where(on, INK, PAPER).astype(np.uint8)
        tiles.append(np.kron(tile, np.ones((scale, scale), dtype=np.uint8)))
        tiles.append(np.full((height * scale, GAP_PX), GAP, dtype=np.uint8))
    return np.concatenate(tiles[:-1], axis=1) if tiles else np.zeros((1, 1), np.uint8)


def snapshot(run, shown: int = rbm_targets.DIGITS_SHOWN) -> dict[str, np.ndarray]:
    """The first ``shown`` chains of every sampler now, ``[k, n]`` of +-1."""
    comparison = run.comparison
    with run.lock:  # the worker steps sampler after sampler: read between its chunks
        return {label: comparison.states(label)[:shown].numpy() for label in comparison.labels}


def render(run) -> None:
    from lsbcore.rbm.variants import display_name

    rbm = run.problem.target
    shape = tuple(rbm.shape) if len(rbm.shape) == 2 else (1, rbm.n_visible)
    states = snapshot(run)
    shown = min(rbm_targets.DIGITS_SHOWN, run.config.chains)
    if not presentation.is_on():  # a lecture's sentence says it, and its grid needs the room
        st.caption(
            f"{counted(shown, 'chain')} of {run.config.chains} per sampler, now (step "
            f"{run.n_steps:,}); dark is an on unit. All started from the same random states."
        )
    for label, x in states.items():
        with st.container(horizontal=True, key=f"digitrow_{label}", vertical_alignment="center"):
            st.markdown(f"**{display_name(label)}**", width=110)
            st.image(digit_strip(x, shape), clamp=True)
