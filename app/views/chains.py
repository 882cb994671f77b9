"""View 1, Chains: a few chains per sampler side by side, and the running posterior marginal.

White is +1 (object), black is -1 (background). After burn-in the last panel of each row is the
posterior marginal P(x_i = +1) estimated from every chain's post-burn-in states.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from app.page_state import CHAINS_SHOWN, ensure_in_range
from app.text import counted
from app.views import pixels
from lsbcore import REGISTRY
from lsbcore.samplers.interface import ChainSampler
from lsbcore.studies.figures import sampler_label as label

ROW_WIDTH = 1000  # on-screen width of one sampler's row, pixels
MAX_SIDE = 160  # on-screen side of one lattice at most


@dataclass
class ChainPanel:
    """One sampler's row: up to a few chains, then the marginal.

    ``tiles`` are sent as they are: a lattice no larger than its on-screen size at one pixel
    per site (the browser blows it up, pixelated: a redraw then encodes and sends a few hundred
    bytes per tile, not a 160-pixel PNG), a larger one (a photo's) reduced to ``width`` by area
    averaging. ``image`` is the whole row at screen size, for reports and measurements."""

    name: str
    caption: str
    tiles: list[np.ndarray]  # uint8 [h, w]
    tile_captions: list[str]
    width: int  # on-screen width of one tile, pixels
    gap: int = 1  # pixels between tiles in ``image``

    @property
    def image(self) -> np.ndarray:
        """uint8 [h, w] or [h, w, 3]: the tiles at screen size side by side."""
        return pixels.hstack([pixels.fit(t, self.width) for t in self.tiles], gap=self.gap)


def chain_panels(
    states: dict[str, np.ndarray],
    marginals: dict[str, np.ndarray | None] | None = None,
    n_show: int = 4,
    side: int | None = None,
    notes: dict[str, str] | None = None,
    totals: dict[str, int] | None = None,
) -> list[ChainPanel]:
    """One row per sampler: up to ``n_show`` chains ``[B, H, W]`` (+-1), then the marginal
    ``[H, W]`` in [0, 1] when there is one. ``side``: on-screen pixels per lattice (default: as
    large as fits ``ROW_WIDTH``, at most ``MAX_SIDE``). ``totals``: each sampler's number of
    chains, when ``states`` holds only the ones shown."""
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
        wanted = side or min(MAX_SIDE, ROW_WIDTH // (k + (marginal is not None)))
        lattice = x.shape[1:]
        tiles = [_sent(pixels.spins(x[b]), wanted) for b in range(k)]
        width = tiles[0].shape[1] * (
            1 if max(lattice) > wanted else pixels.scale_for(lattice, wanted)
        )
        tile_captions = [f"chain {b + 1}" for b in range(k)]
        total = totals.get(name, x.shape[0])
        which = "chain 1" if k == 1 else f"chains 1–{k}"
        caption = f"{label(name)}: {which} of {total}"
        if marginal is not None:
            tiles.append(_sent(pixels.gray(marginal), wanted))
            tile_captions.append("P(x=+1)")
            caption += " · last: posterior marginal P(x=+1)"
        if notes.get(name):
            caption += f" · {notes[name]}"
        gap = max(1, pixels.scale_for(lattice, wanted) // 2)
        panels.append(ChainPanel(name, caption, tiles, tile_captions, width, gap))
    return panels


def _sent(image: np.ndarray, side: int) -> np.ndarray:
    """A tile as sent: as it is when the browser blows it up to ``side``, reduced by area
    averaging when it is larger."""
    return pixels.shrink(image, side) if max(image.shape[:2]) > side else image


def _note(name: str, sampler: ChainSampler) -> str:
    """Acceptance (for a sweep: the share of site updates that changed a site) and sweeps."""
    if not sampler.n_steps:
        return "not started"
    rate = "acceptance" if REGISTRY[name].move == "site" else "sites changed"
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


def controls(run) -> None:
    """The slider of chains shown per sampler, drawn outside the live part (a widget redrawn
    five times a second costs the browser more than the chain images do)."""
    if run.config.chains > 1:
        high = min(8, run.config.chains)
        ensure_in_range(CHAINS_SHOWN.key, min(4, high), 1, high)
        st.slider("Chains shown per sampler", 1, high, key=CHAINS_SHOWN.key, width=300)


def render(run) -> None:
    """The live part: the legend and one row of tiles per sampler."""
    comparison = run.comparison
    n_show = CHAINS_SHOWN.get() if run.config.chains > 1 else 1
    states, marginals, notes = snapshot(run, n_show)
    totals = {n: s.n_chains for n, s in comparison.samplers.items()}
    panels = chain_panels(states, marginals, n_show, notes=notes, totals=totals)
    counts = {m.count for m in comparison.marginals.values() if m.count}
    if comparison.phase == "burnin":
        st.caption(
            "White = +1 (object), black = −1 (background). The posterior marginal appears after "
            "burn-in."
        )
    else:
        n = max(counts) if counts else 0
        st.caption(
            f"White = +1 (object), black = −1. Marginals from {n:,} post-burn-in records "
            f"× {counted(run.config.chains, 'chain')}."
        )
    for panel in panels:
        with st.container(key=f"chainrow_{panel.name}", gap="small"):
            st.markdown(f"**{panel.caption}**")
            st.image(
                [pixels.data_uri(tile) for tile in panel.tiles],
                caption=panel.tile_captions,
                width=panel.width,
            )
