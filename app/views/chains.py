"""View 1, Chains: a few chains per sampler side by side, and the running posterior marginal.

White is +1 (object), black is -1 (background). After burn-in the last panel of each row is the
posterior marginal P(x_i = +1) estimated from every chain's post-burn-in states.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import streamlit as st

from app.text import counted
from app.views import pixels
from app.widgets import ensure_in_range
from lsbcore import REGISTRY
from lsbcore.figures import sampler_label as label
from lsbcore.samplers.interface import ChainSampler

ROW_WIDTH = 1000  # on-screen width of one sampler's row, pixels
MAX_SIDE = 160  # on-screen side of one lattice at most
TILE_GAP = 6  # white pixels between two tiles of a row on the page


@dataclass
class ChainPanel:
    name: str
    image: np.ndarray  # uint8 [h, w] or [h, w, 3]: the chains then the marginal, side by side
    caption: str
    # the same tiles one by one, with a short caption each: the page draws them as a row that
    # wraps on a narrow screen (the composite is for reports and measurements)
    tiles: list[np.ndarray] = field(default_factory=list)
    tile_captions: list[str] = field(default_factory=list)


def chain_panels(
    states: dict[str, np.ndarray],
    marginals: dict[str, np.ndarray | None] | None = None,
    n_show: int = 4,
    side: int | None = None,
    notes: dict[str, str] | None = None,
    totals: dict[str, int] | None = None,
) -> list[ChainPanel]:
    """One composite image per sampler: up to ``n_show`` chains ``[B, H, W]`` (+-1), then the
    marginal ``[H, W]`` in [0, 1] when there is one. ``side``: on-screen pixels per lattice
    (default: as large as fits ``ROW_WIDTH``, at most ``MAX_SIDE``). ``totals``: each
    sampler's number of chains, when ``states`` holds only the ones shown."""
    marginals = marginals or {}
    notes = notes or {}
    totals = totals or {}
    panels = []
    for name, x in states.items():
        x = np.asarray(x)
        if x.ndim != 3 or x.shape[0] == 0:
            continue
        k = max(1, min(n_show, x.shape[0]))
        marginal = marginals.get(name)
        tiles_wanted = k + (marginal is not None)
        wanted = side or min(MAX_SIDE, ROW_WIDTH // tiles_wanted)
        factor = pixels.scale_for(x.shape[1:], wanted)
        tiles = [pixels.fit(pixels.spins(x[b]), wanted) for b in range(k)]
        tile_captions = [f"chain {b + 1}" for b in range(k)]
        total = totals.get(name, x.shape[0])
        shown = "chain 1" if k == 1 else f"chains 1–{k}"
        caption = f"{label(name)}: {shown} of {total}"
        if marginal is not None:
            tiles.append(pixels.fit(pixels.gray(marginal), wanted))
            tile_captions.append("P(x=+1)")
            caption += " · last: posterior marginal P(x=+1)"
        if notes.get(name):
            caption += f" · {notes[name]}"
        composite = pixels.hstack(tiles, gap=max(1, factor // 2))
        spaced = [_margin(tile, TILE_GAP) for tile in tiles]
        panels.append(ChainPanel(name, composite, caption, spaced, tile_captions))
    return panels


def _margin(tile: np.ndarray, width: int) -> np.ndarray:
    """``tile`` with a white margin on its right: the page sets tiles edge to edge."""
    pad = [(0, 0), (0, width)] + [(0, 0)] * (tile.ndim - 2)
    return np.pad(tile, pad, constant_values=255)


def _note(name: str, sampler: ChainSampler) -> str:
    """Acceptance (for a sweep: the share of site updates that changed a site) and sweeps."""
    if not sampler.n_steps:
        return "not started"
    rate = "acceptance" if REGISTRY[name].sites_per_step == "one" else "sites changed"
    return f"{rate} {sampler.accept_rate:.2f} · {sampler.sweeps:,.2f} sweeps"


def snapshot(run, n_show: int) -> tuple[dict, dict, dict]:
    """(states [k, H, W] of the first ``n_show`` chains, marginals [H, W] or None, caption
    notes) per sampler, copied."""
    comparison = run.comparison
    with run.lock:
        states = {n: s.x[:n_show].cpu().numpy() for n, s in comparison.samplers.items()}
        marginals = {n: m.mean() if m.count else None for n, m in comparison.marginals.items()}
        notes = {n: _note(n, s) for n, s in comparison.samplers.items()}
    return states, marginals, notes


def render(run) -> None:
    comparison = run.comparison
    n_show = 1
    slider, legend = st.columns([1, 3], vertical_alignment="bottom")  # one row: room for strips
    if run.config.chains > 1:
        high = min(8, run.config.chains)
        ensure_in_range("chains_shown", min(4, high), 1, high)
        n_show = slider.slider("Chains shown per sampler", 1, high, key="chains_shown")
    states, marginals, notes = snapshot(run, n_show)
    totals = {n: s.n_chains for n, s in comparison.samplers.items()}
    panels = chain_panels(states, marginals, n_show, notes=notes, totals=totals)
    counts = {m.count for m in comparison.marginals.values() if m.count}
    if comparison.phase == "burnin":
        legend.caption(
            "White = +1 (object), black = −1 (background). The posterior marginal appears after "
            "burn-in."
        )
    else:
        n = max(counts) if counts else 0
        legend.caption(
            f"White = +1 (object), black = −1. Marginals from {n:,} post-burn-in records "
            f"× {counted(run.config.chains, 'chain')}."
        )
    for panel in panels:
        with st.container(key=f"chainrow_{panel.name}", gap="small"):
            st.markdown(f"**{panel.caption}**")
            st.image(
                [pixels.data_uri(tile) for tile in panel.tiles],
                caption=panel.tile_captions,
                width=panel.tiles[0].shape[1],
            )
