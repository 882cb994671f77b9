"""Block proposals: what the learned proposal of ``neural-block`` does on this posterior.

The current state of one chain is cut into ``k x k`` tiles (the tiling's first offset, tiles
whose top-left corner is at a multiple of ``k``). For a tile the user picks, the network's
proposal ``q(x_B | context)`` stands beside the exact block conditional ``p(x_B | x_-B)``
(enumerated by ``GridMotif.exact_log_probs``): the likeliest block states of either, both
probabilities, ``KL(p || q)`` and the expected acceptance of one proposal from the current
state, ``a(x) = sum_y min(q(y), p(y) q(x) / p(x))``. Over every tile of the state, the histogram
of ``KL(p || q)`` for the trained and the untrained network says how good the proposal is on
*this* image.

Everything but ``render_run`` and ``render_live`` is a function of plain data (a target, a
state, tensors), tested without a browser; bad inputs raise ``ValueError`` with a sentence.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import streamlit as st
import torch

from app import charts, page_state, presentation, view_params
from app.page_state import (
    BP_COL,
    BP_K,
    BP_PICK,
    BP_ROW,
    BP_SAMPLER,
    BP_WEIGHTS,
    ensure,
    ensure_in_range,
)
from app.text import grid_size, plain
from app.views import block_source, pixels
from lsbcore.methods.block_proposals.motif import BLOCK_SIDES, GridMotif
from lsbcore.methods.block_proposals.pairwise_context import PairwiseBlocks
from lsbcore.methods.block_proposals.proposal import BlockProposal
from lsbcore.methods.block_proposals.proposal import load_proposal as read_proposal
from lsbcore.methods.block_proposals.sampler import (
    block_context,
    grid_refusal,
    shipped_proposal,
    weights_file,
)
from lsbcore.methods.block_proposals.tiling import Blocks, Tiling, grid_shape, interaction_pairs
from lsbcore.number_text import number_text

#: The networks the view compares (the sampler's third choice, "exact", is p itself).
WEIGHTS = view_params.BLOCK_WEIGHTS
#: Tiles narrower than this on screen (px) are not outlined: on a large lattice the outlines
#: would cover the state (232 x 232 tiles of a 464 px photo drew a solid blue square).
MIN_OUTLINED_TILE_PX = 6.0
#: Block states shown for a tile (the likeliest of p and of q together).
TOP_STATES = 8
#: The histogram's tiles: every tile up to this many per block size, else as many spread
#: evenly over the lattice (a second or two of scoring per network on two cores). Exact p costs
#: 2^(k^2) terms per tile, and on a factor graph one exact ratio per block state, hence fewer.
HISTOGRAM_TILES = {2: 16_384, 3: 1_024, 4: 256}
FACTOR_HISTOGRAM_TILES = {2: 4_096, 3: 256, 4: 8}
#: Tiles whose KL is enumerated exactly: at most this many block states scored by the network
#: in all (k = 2: 16,384 tiles; k = 3: 512; k = 4: 4). Beyond it the KL of each tile is
#: estimated from ``KL_DRAWS`` exact draws of its p (unbiased, seeded).
EXACT_HISTOGRAM_STATES = 1 << 18
KL_DRAWS = 256
#: Site values held at once while a factor graph's block states are scored (float64: 32 MiB).
EXACT_RATIO_VALUES = 1 << 22
KL_SEED = 0
#: The smallest KL the histogram separates (nats); smaller ones fall in its first bin.
KL_FLOOR = 1e-6
log = logging.getLogger(__name__)
NOT_TRAINED = (
    "The trained proposal for {k} x {k} blocks is not in this copy yet ({file}): train it with "
    "python -m lsbcore.studies.block_proposals.train --block-size {k}, or choose the untrained "
    "network."
)


# ----------------------------------------------------------------------------- inputs
def check_choice(k, weights) -> tuple[int, str]:
    """``(k, weights)`` as given by a person, validated: a sentence when either is not one of
    the choices."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or int(k) not in BLOCK_SIDES:
        raise ValueError(
            f"The block size must be one of {', '.join(map(str, BLOCK_SIDES))}, not {k!r}."
        )
    if weights not in WEIGHTS:
        raise ValueError(f"The weights must be {' or '.join(WEIGHTS)}, not {weights!r}.")
    return int(k), str(weights)


_LOADED: dict[tuple, BlockProposal] = {}


def load_proposal(k: int, weights: str) -> tuple[BlockProposal | None, str]:
    """The proposal for ``k x k`` blocks and ``weights``, or None and the sentence why not (the
    trained weights are not shipped yet). Loaded once per file version."""
    k, weights = check_choice(k, weights)
    version = None
    if weights == "trained":
        path = weights_file(k)
        if not path.is_file():
            return None, NOT_TRAINED.format(k=k, file=f"assets/{path.name}")
        stat = path.stat()
        version = (stat.st_mtime_ns, stat.st_size)
    key = (k, weights, version)
    if key not in _LOADED:
        try:
            _LOADED[key] = (
                read_proposal(weights_file(k)) if version else shipped_proposal(k, weights)
            )
        except ValueError as err:  # a damaged file: its sentence
            return None, f"The {weights} proposal for {k} x {k} blocks cannot be read: {err}"
        if _LOADED[key].k != k:
            found = _LOADED.pop(key).k
            return None, (
                f"The {weights} proposal file for {k} x {k} blocks holds a proposal for {found} x "
                f"{found} blocks."
            )
    return _LOADED[key], ""


def chain_target(target):
    """The target of the first chain (a per-chain field reduced to chain 1's)."""
    return target.chain(0) if getattr(target, "batch", 1) > 1 else target


# ----------------------------------------------------------------------------- the tiling
@dataclass(frozen=True)
class Layout:
    """The tiles of ``x`` (the tiling's first offset): ``rows x cols`` tiles of ``k x k``,
    ``blocks`` (row-major: tile ``(r, c)`` is ``r * cols + c``) and each tile's context
    ``c [T, n_terms]`` (read from the sites outside the tile)."""

    k: int
    shape: tuple[int, int]
    rows: int
    cols: int
    blocks: Blocks
    c: torch.Tensor
    x: torch.Tensor  # [H * W] float64, +-1
    context: object = None  # the target's block context (coefficients, exact ratios)

    def tile(self, row: int, col: int) -> int:
        """The index of tile ``(row, col)`` (1-based, as the page shows them)."""
        for name, value, count in (("row", row, self.rows), ("column", col, self.cols)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"The tile {name} must be a whole number, not {value!r}.")
            if not 1 <= value <= count:
                raise ValueError(
                    f"Tile {name} {value} is outside 1–{count}: the {grid_size(*self.shape)} "
                    f"lattice has {self.rows} rows and {self.cols} columns of "
                    f"{grid_size(self.k, self.k)} tiles."
                )
        return (int(row) - 1) * self.cols + int(col) - 1


def layout(target, x, k: int) -> Layout:
    """The tiles of the state ``x`` (``[H, W]`` or flat, +-1) of ``target`` and their contexts;
    a sentence when the target is not a grid the blocks fit or ``x`` is not one of its states."""
    k, _ = check_choice(k, "untrained")
    target = chain_target(target)
    refusal = grid_refusal(target, k)
    if refusal:
        raise ValueError(refusal)
    shape = grid_shape(target, k)
    x = torch.as_tensor(np.asarray(x), dtype=torch.float64).reshape(-1)
    if x.numel() != shape[0] * shape[1]:
        raise ValueError(
            f"The state has {x.numel():,} sites; the {grid_size(*shape)} lattice has "
            f"{shape[0] * shape[1]:,}."
        )
    if not bool(((x == 1) | (x == -1)).all()):
        raise ValueError("The state must hold only +1 and −1.")
    motif = GridMotif(k)
    tiling = Tiling(shape, k, interaction_pairs(target))
    blocks = tiling.blocks(0)
    context = block_context(target, motif, tiling)
    c = torch.zeros(len(blocks.tops), motif.n_terms, dtype=torch.float64)
    with torch.no_grad():  # a colour's tiles at once: no interaction joins two of them
        for colour in range(blocks.n_colours):
            keep = blocks.colour == colour
            c[keep] = context.coefficients(x.unsqueeze(0), blocks.of_colour(colour))[0]
    rows, cols = (shape[0] // k), (shape[1] // k)
    return Layout(k, shape, rows, cols, blocks, c, x, context)


# ----------------------------------------------------------------------------- the numbers
def exact_log_probs(lay: Layout, tiles) -> torch.Tensor:
    """``log p(x_B = states[m] | x_-B)`` of the tiles ``tiles`` (indices), ``[len, 2^(k^2)]``.

    On a pairwise lattice the motif's coefficients hold the whole conditional
    (``GridMotif.exact_log_probs``). On a factor graph they stand in for a table's zeros by a
    finite gap, so there every block state is scored by the target's own exact ratio (a zero of
    a table is a zero here) and normalised."""
    motif = GridMotif(lay.k)
    tiles = torch.as_tensor(tiles, dtype=torch.long).reshape(-1)
    if lay.context is None or isinstance(lay.context, PairwiseBlocks):
        return motif.exact_log_probs(lay.c[tiles])
    states = motif.states
    m, n = len(states), lay.x.numel()
    out = torch.empty(len(tiles), m, dtype=torch.float64)
    chunk = max(1, EXACT_RATIO_VALUES // max(1, n))  # block states scored at once
    with torch.no_grad():
        for row, t in enumerate(tiles.tolist()):
            one = Blocks(lay.blocks.tops[t : t + 1], lay.blocks.sites[t : t + 1],
                         lay.blocks.colour[t : t + 1])  # fmt: skip
            log_ratio = torch.empty(m, dtype=torch.float64)
            for first in range(0, m, chunk):  # the block states on the chain axis
                y = states[first : first + chunk].unsqueeze(1)  # [m', 1, k^2]
                x = lay.x.expand(len(y), -1)
                c = lay.c[t].expand(len(y), 1, -1)
                log_ratio[first : first + chunk] = lay.context.log_ratios(x, one, y, c)[:, 0]
            out[row] = torch.log_softmax(log_ratio, 0)
    return out


def kl_divergence(log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """``KL(p || q) = sum_y p(y) (log p(y) - log q(y))`` per row, in nats (``[N, M]`` -> ``[N]``),
    a state of zero probability under p adding nothing."""
    p = log_p.exp()
    terms = torch.where(p > 0, p * (log_p - log_q), torch.zeros_like(p))
    return terms.sum(-1).clamp(min=0.0)


def expected_acceptance(log_p: torch.Tensor, log_q: torch.Tensor, current) -> torch.Tensor:
    """The probability that one proposal ``y ~ q`` from the state ``current`` (a code, per row)
    is accepted: ``sum_y min(q(y), p(y) q(x) / p(x))``, in log space (``[N, M]`` -> ``[N]``)."""
    current = torch.as_tensor(current, dtype=torch.long, device=log_p.device).reshape(-1, 1)
    log_w = (log_q - log_p).gather(-1, current)  # log q(x) - log p(x)
    return torch.logsumexp(torch.minimum(log_q, log_p + log_w), -1).exp().clamp(max=1.0)


@dataclass(frozen=True)
class TileReport:
    """One tile: the exact conditional and the proposal over its ``2^(k^2)`` states
    (``log_p``, ``log_q``, code order of ``GridMotif.states``), the code of its current state,
    ``KL(p || q)``, the expected acceptance and the states shown (codes, likeliest first)."""

    row: int
    col: int
    k: int
    log_p: np.ndarray
    log_q: np.ndarray
    current: int
    kl: float
    acceptance: float
    shown: list[int]

    def state(self, code: int) -> np.ndarray:
        """Block state ``code`` as a ``k x k`` array of +-1."""
        bits = (int(code) >> np.arange(self.k * self.k)) & 1
        return (2 * bits - 1).reshape(self.k, self.k)


def tile_report(
    lay: Layout, proposal: BlockProposal, row: int, col: int, top: int = TOP_STATES
) -> TileReport:
    """``p`` and ``q`` on tile ``(row, col)`` (1-based) of the layout's state, enumerated."""
    if not isinstance(proposal, BlockProposal) or proposal.k != lay.k:
        raise ValueError(f"The proposal must be a BlockProposal for {lay.k} x {lay.k} blocks.")
    t = lay.tile(row, col)
    motif = proposal.motif
    c = lay.c[t : t + 1]
    with torch.no_grad():
        log_p = exact_log_probs(lay, [t])
        log_q = proposal.all_log_probs(c)
    current = int(motif.codes(lay.x[lay.blocks.sites[t]]))
    kl = float(kl_divergence(log_p, log_q)[0])
    acceptance = float(expected_acceptance(log_p, log_q, current)[0])
    log_p, log_q = log_p[0].numpy(), log_q[0].numpy()
    half = max(1, top // 2)
    by_p, by_q = np.argsort(-log_p, kind="stable"), np.argsort(-log_q, kind="stable")
    by_either = np.argsort(-np.maximum(log_p, log_q), kind="stable")[:top]
    shown: list[int] = []
    for code in [*by_p[:half], *by_q[:half], *by_either]:  # the likeliest of each, then of either
        if int(code) not in shown and len(shown) < top:
            shown.append(int(code))
    if current not in shown:  # the state the move starts from, always in view
        shown.append(current)
    shown.sort(key=lambda m: (-max(log_p[m], log_q[m]), m))
    return TileReport(int(row), int(col), lay.k, log_p, log_q, current, kl, acceptance, shown)


def histogram_tiles(lay: Layout) -> torch.Tensor:
    """The tiles the histogram scores: all of them, or ``HISTOGRAM_TILES[k]`` spread evenly
    (``FACTOR_HISTOGRAM_TILES`` on a factor graph)."""
    n_tiles = lay.c.shape[0]
    pairwise = lay.context is None or isinstance(lay.context, PairwiseBlocks)
    most = (HISTOGRAM_TILES if pairwise else FACTOR_HISTOGRAM_TILES)[lay.k]
    if n_tiles <= most:
        return torch.arange(n_tiles)
    return torch.linspace(0, n_tiles - 1, most, dtype=torch.float64).round().long().unique()


def tile_kls(lay: Layout, proposal: BlockProposal, tiles=None) -> tuple[np.ndarray, bool]:
    """``KL(p || q)`` of the tiles ``tiles`` (indices; every tile by default), nats, and
    whether it is exact: by enumeration while ``len(tiles) 2^(k^2)`` stays within
    ``EXACT_HISTOGRAM_STATES``, else estimated from ``KL_DRAWS`` exact draws of each tile's p
    (seeded: the same state gives the same numbers)."""
    if proposal.k != lay.k:
        raise ValueError(f"The proposal must be a BlockProposal for {lay.k} x {lay.k} blocks.")
    motif = proposal.motif
    tiles = torch.arange(lay.c.shape[0]) if tiles is None else torch.as_tensor(tiles).long()
    n_tiles = len(tiles)
    if n_tiles == 0:
        return np.zeros(0), True
    c = lay.c[tiles]
    with torch.no_grad():
        log_p = exact_log_probs(lay, tiles)  # [T, M]
        if n_tiles * motif.n_states <= EXACT_HISTOGRAM_STATES:
            return kl_divergence(log_p, proposal.all_log_probs(c)).numpy(), True
        generator = torch.Generator().manual_seed(KL_SEED)
        draws = torch.multinomial(log_p.exp(), KL_DRAWS, replacement=True, generator=generator)
        states = motif.states[draws]  # [T, D, k^2]
        c = c.repeat_interleave(KL_DRAWS, 0)
        log_q = proposal.log_prob(states.reshape(-1, motif.n), c).view(n_tiles, KL_DRAWS)
        kl = (log_p.gather(1, draws) - log_q).mean(1)
    return kl.clamp(min=0.0).numpy(), False


def state_hash(x, k: int, weights: str) -> tuple[str, int, str]:
    """The cache key of a state and a choice: the digest of the state's bytes, ``k``, weights."""
    data = np.ascontiguousarray(np.asarray(x, dtype=np.int8)).tobytes()
    return hashlib.sha1(data).hexdigest(), int(k), str(weights)


# ----------------------------------------------------------------------------- figures
def state_figure(x: np.ndarray, lay: Layout, chosen: tuple[int, int] | None) -> go.Figure:
    """The state as an image (+1 white) with the tiles outlined, the chosen one in red; one
    clickable point at each tile's centre carries the tile's (row, column)."""
    height, width = lay.shape
    k = lay.k
    image = np.asarray(x, dtype=np.float64).reshape(height, width)
    fig = go.Figure(
        go.Heatmap(
            z=(image > 0).astype(np.int8),
            colorscale=[[0, "black"], [1, "white"]],
            showscale=False,
            hoverinfo="skip",
            zmin=0,
            zmax=1,
        )
    )
    side = 420
    tile_px = side / max(lay.rows, lay.cols)  # about how wide a tile is drawn
    if tile_px >= MIN_OUTLINED_TILE_PX:  # outlines only where they leave the state visible
        lx, ly = [], []  # every tile edge as one line trace (None separates the segments)
        for r in range(lay.rows + 1):
            y = r * k - 0.5
            lx += [-0.5, lay.cols * k - 0.5, None]
            ly += [y, y, None]
        for col in range(lay.cols + 1):
            xv = col * k - 0.5
            lx += [xv, xv, None]
            ly += [-0.5, lay.rows * k - 0.5, None]
        fig.add_trace(
            go.Scatter(
                x=lx, y=ly, mode="lines", line={"color": "#3b82f6", "width": 1}, hoverinfo="skip"
            )
        )
    rr, cc = np.meshgrid(np.arange(lay.rows), np.arange(lay.cols), indexing="ij")
    fig.add_trace(
        go.Scatter(
            x=(cc * k + (k - 1) / 2).ravel(),
            y=(rr * k + (k - 1) / 2).ravel(),
            mode="markers",
            # a tile's size on screen; nearly transparent where tiles are small (still clickable)
            marker={"symbol": "square", "size": float(np.clip(0.8 * tile_px, 2.0, 10.0)),
                    "color": "#3b82f6",
                    "opacity": 0.15 if tile_px >= MIN_OUTLINED_TILE_PX else 0.01},
            customdata=np.stack([rr.ravel() + 1, cc.ravel() + 1], 1),
            hovertemplate="tile row %{customdata[0]}, column %{customdata[1]}<extra></extra>",
            name="tiles",
        )
    )  # fmt: skip
    if chosen is not None:
        r, col = chosen
        fig.add_shape(
            type="rect",
            x0=(col - 1) * k - 0.5,
            x1=col * k - 0.5,
            y0=(r - 1) * k - 0.5,
            y1=r * k - 0.5,
            line={"color": "#ef4444", "width": 3},
        )
    fig.update_layout(
        showlegend=False,
        height=side,
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        clickmode="event+select",
        dragmode=False,
        hovermode="closest",
    )
    fig.update_xaxes(visible=False, range=[-0.5, width - 0.5], constrain="domain")
    fig.update_yaxes(visible=False, range=[height - 0.5, -0.5], scaleanchor="x", constrain="domain")
    return fig


def probability_figure(report: TileReport) -> go.Figure:
    """The shown states' exact probability and proposal probability, side by side bars."""
    labels = [
        f"{i + 1}" + (" (now)" if m == report.current else "") for i, m in enumerate(report.shown)
    ]
    p = np.exp(report.log_p[report.shown])
    q = np.exp(report.log_q[report.shown])
    fig = go.Figure(
        [
            go.Bar(x=labels, y=p, name="exact p(x_B | rest)", marker_color="#111827"),
            go.Bar(x=labels, y=q, name="proposal q(x_B | context)", marker_color="#f59e0b"),
        ]
    )
    fig.update_layout(
        barmode="group",
        height=300,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        legend={"orientation": "h", "y": 1.15},
        yaxis_title="probability",
        xaxis_title="block state (thumbnails above, same order)",
    )
    return fig


def kl_histogram(kls: dict[str, np.ndarray]) -> go.Figure:
    """``KL(p || q)`` over tiles per network, on a log scale (values below ``KL_FLOOR`` in the
    first bin)."""
    fig = go.Figure()
    colours = {"trained": "#16a34a", "untrained": "#9ca3af"}
    values = [v for v in kls.values() if len(v)]
    low = np.log10(KL_FLOOR)
    high = max([np.log10(max(KL_FLOOR, float(v.max()))) for v in values] + [low + 1])
    for name, kl in kls.items():
        fig.add_trace(
            go.Histogram(
                x=np.log10(np.maximum(kl, KL_FLOOR)),
                name=f"{name} ({len(kl):,} tiles)",
                marker_color=colours.get(name),
                opacity=0.7,
                xbins={"start": low, "end": high + 0.25, "size": 0.25},
            )
        )
    ticks = np.arange(int(np.floor(low)), int(np.ceil(high)) + 1)
    fig.update_layout(
        barmode="overlay",
        height=300,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        legend={"orientation": "h", "y": 1.15},
        yaxis_title="tiles",
    )
    fig.update_xaxes(
        title="KL(p ‖ q), nats",
        tickvals=list(ticks),
        ticktext=[f"1e{t}" if t < -1 or t > 1 else f"{10.0**t:g}" for t in ticks],
    )
    return fig


def thumbnail(state: np.ndarray, side: int = 48, now: bool = False) -> np.ndarray:
    """A ``k x k`` block state as a crisp RGB image about ``side`` pixels wide (+1 white), in a
    gray frame (red for the tile's current state) so that an all-white block shows."""
    cell = max(1, side // state.shape[0])
    image = pixels.to_rgb(pixels.upscale(pixels.spins(state), cell))
    frame = np.array([220, 38, 38] if now else [150, 150, 150], dtype=np.uint8)
    out = np.empty((image.shape[0] + 6, image.shape[1] + 6, 3), dtype=np.uint8)
    out[:] = frame
    out[3:-3, 3:-3] = image
    return out


# ----------------------------------------------------------------------------- in the app
PARAMS = view_params.BLOCK_PROPOSALS  # the tab's link parameters (app/view_params.py)
KEYS = tuple(param.key for param in PARAMS)
TAKE_KEY = "bp_take"
SNAPSHOT = "block_proposals_state"  # run.cache: (step, sampler, state [H, W])
CACHE = "block_proposals"  # run.cache: derived results by (state hash, k, weights, ...)
MAX_CACHED = 24
INTRO = (
    "neural-block proposes a whole k x k block at once from a network that saw only random "
    "instances of the block, and keeps the chain exact by Metropolis-Hastings. Here its proposal "
    "q on one block of this target stands beside the exact block conditional p (every block "
    "state enumerated): the closer q is to p, the more of its proposals are accepted."
)


def _cached(run, key: tuple, build):
    """``build()`` cached in the run under ``key`` (the oldest dropped beyond ``MAX_CACHED``)."""
    cache = run.cache.setdefault(CACHE, {})
    if key not in cache:
        while len(cache) >= MAX_CACHED:
            cache.pop(next(iter(cache)))
        cache[key] = build()
    return cache[key]


def picked_tile(points, k: int) -> tuple[int, int] | None:
    """The tile (row, column, 1-based) that a click on the image chose, from Plotly's selected
    points: a tile centre carries it as ``customdata`` (a list, or a mapping by position as
    the browser may send it), a point of the image itself by its ``x`` and ``y``; None when
    no point says."""
    for point in points or []:
        if not isinstance(point, dict):
            continue
        data = charts.customdata_pair(point)
        try:
            if data is not None:
                return int(data[0]), int(data[1])
            if point.get("curve_number") == 0 and "x" in point and "y" in point:
                return int(round(point["y"])) // k + 1, int(round(point["x"])) // k + 1
        except (TypeError, ValueError):
            continue
    return None


def _on_pick(k: int) -> None:
    """A click on the image: the tile under it becomes the chosen one (a tile off the range is
    clamped when the view is drawn)."""
    try:
        event = BP_PICK.get() or {}
        tile = picked_tile((event.get("selection") or {}).get("points"), k)
    except Exception:  # a click must never take the page down
        log.exception("block proposals: unreadable selection")
        return
    if tile is not None:
        BP_ROW.set(tile[0])
        BP_COL.set(tile[1])


def _snapshot(run, sampler: str, take: bool):
    """The state the view shows: chain 1 of ``sampler``, taken now when asked, when there is
    none, or when the run is not running (while it runs, the view keeps its state, so that
    the live redraws do not recompute it)."""
    held = run.cache.get(SNAPSHOT)
    stale = held is None or held[1] != sampler or (not run.running and held[0] != run.n_steps)
    if take or stale:
        with run.lock:
            x = run.comparison.samplers[sampler].x[0].detach().cpu().numpy().copy()
            held = run.cache[SNAPSHOT] = (run.n_steps, sampler, x)
    return held


def render_run(run) -> None:
    """The Block proposals tab (drawn once per page run, outside the live fragment): this
    state's tiles, then the source's experiments as shipped (``block_source``)."""
    _render_state(run)
    block_source.render(run)


def _render_state(run) -> None:
    from app import charts
    from lsbcore.studies.figures import sampler_label

    if not presentation.is_on():  # a lecture's screen has the view's sentence instead
        st.caption(INTRO)
    page_state.restore_links(KEYS)
    names = list(run.comparison.names)
    ensure(BP_SAMPLER.key, names[0], lambda v: v in names)
    ensure(BP_K.key, BLOCK_SIDES[0], lambda v: v in BLOCK_SIDES)
    ensure(BP_WEIGHTS.key, WEIGHTS[0], lambda v: v in WEIGHTS)
    with st.container(horizontal=True, gap="medium"):
        st.segmented_control(
            "Block size",
            list(BLOCK_SIDES),
            key=BP_K.key,
            required=True,
            format_func=lambda v: f"{v} x {v}",
        )
        st.segmented_control("Weights", list(WEIGHTS), key=BP_WEIGHTS.key, required=True)
        if len(names) > 1:
            st.selectbox(
                "Chain 1 of", names, key=BP_SAMPLER.key, format_func=sampler_label, width=220
            )
    try:
        k, weights = check_choice(BP_K.get(), BP_WEIGHTS.get())
    except ValueError as err:
        st.warning(plain(err))
        return
    sampler = BP_SAMPLER.get()
    target = run.problem.target
    refusal = grid_refusal(chain_target(target), k)
    if refusal:
        st.info(plain(refusal))
        return
    take = st.button(
        "Take the current state",
        key=TAKE_KEY,
        help="While the run runs, the view keeps the state it was drawn from; this takes chain "
        "1's state now.",
    )
    step, _, x = _snapshot(run, sampler, take)
    digest = state_hash(x, k, weights)[0]
    try:
        lay = _cached(run, ("layout", digest, k), lambda: layout(target, x, k))
    except (ValueError, ImportError) as err:
        st.info(plain(err))
        return
    ensure_in_range(BP_ROW.key, 1, 1, lay.rows)
    ensure_in_range(BP_COL.key, 1, 1, lay.cols)
    page_state.remember_links(KEYS)
    row, col = int(BP_ROW.get()), int(BP_COL.get())
    # one line in a lecture, where the figure needs the room
    edges = (
        ""
        if presentation.is_on()
        else f" (tiles from the top-left corner; a lattice side that is not a multiple of {k} "
        "leaves its last rows or columns out)"
    )
    st.caption(
        f"Chain 1 of {sampler_label(sampler)} at step {step:,}: {grid_size(lay.rows, lay.cols)} "
        f"tiles of {grid_size(k, k)}{edges}. Click a tile, or give its row and column."
    )
    left, right = st.columns([1, 1], gap="large")
    with left:
        st.plotly_chart(
            presentation.figure(state_figure(x, lay, (row, col)), presentation.BELOW_CONTROLS),
            key=BP_PICK.key,
            on_select=lambda: _on_pick(k),
            selection_mode="points",
            config={"displayModeBar": False},
        )
        with st.container(horizontal=True):
            st.number_input("Tile row", 1, lay.rows, step=1, key=BP_ROW.key, width=150)
            st.number_input("Tile column", 1, lay.cols, step=1, key=BP_COL.key, width=150)
    proposal, missing = load_proposal(k, weights)
    with right:
        if proposal is None:
            st.info(missing)
        else:
            report = _cached(
                run,
                ("tile", digest, k, weights, row, col),
                lambda: tile_report(lay, proposal, row, col),
            )
            _draw_tile(report, weights, run, charts)
    _draw_histogram(run, lay, digest, k, charts)


def _draw_tile(report: TileReport, weights: str, run, charts) -> None:
    st.markdown(f"**Tile row {report.row}, column {report.col}** · {weights} network")
    with st.container(horizontal=True, key="bp_numbers"):
        st.metric("KL(p ‖ q)", f"{number_text(report.kl)} nats", border=True)
        st.metric("Expected acceptance", f"{report.acceptance:.3f}", border=True)
    st.image(
        [
            pixels.data_uri(thumbnail(report.state(m), now=m == report.current))
            for m in report.shown
        ],
        caption=[
            f"{i + 1}{' now' if m == report.current else ''}" for i, m in enumerate(report.shown)
        ],
        width=48,
    )
    charts.show(probability_figure(report), run, f"block-k{report.k}-tile")
    p_shown = float(np.exp(report.log_p[report.shown]).sum())
    st.caption(
        f"The likeliest block states of p and of q (white +1), {p_shown:.1%} of p's mass; "
        "“now” (framed in red) is the tile's current state. Expected acceptance: the "
        "probability that one proposal from it is accepted, sum over y of "
        "min(q(y), p(y) q(now) / p(now))."
    )


def _draw_histogram(run, lay: Layout, digest: str, k: int, charts) -> None:
    st.subheader("KL(p ‖ q) over the tiles of this state")
    kls, exact, notes = {}, True, []
    tiles = histogram_tiles(lay)
    with st.spinner("Scoring the tiles…"):
        for weights in WEIGHTS:
            proposal, missing = load_proposal(k, weights)
            if proposal is None:
                notes.append(missing)
                continue
            kls[weights], exact = _cached(
                run, ("kl", digest, k, weights), lambda p=proposal: tile_kls(lay, p, tiles)
            )
    for note in notes:
        st.caption(note)
    if not kls or not len(next(iter(kls.values()))):
        return
    charts.show(kl_histogram(kls), run, f"block-k{k}-kl")
    medians = ", ".join(f"{w} {number_text(float(np.median(v)))}" for w, v in kls.items())
    how = (
        "enumerated exactly"
        if exact
        else f"each estimated from {KL_DRAWS} exact draws of the tile's p (unbiased, seeded)"
    )
    which = (
        f"All {len(tiles):,} tiles"
        if len(tiles) == len(lay.c)
        else f"{len(tiles):,} of the {len(lay.c):,} tiles, spread evenly"
    )
    st.caption(
        f"Median KL in nats: {medians}. {which}, {how}; values below "
        f"{KL_FLOOR:g} share the first bin. A KL near 0 means q is almost the exact block "
        "conditional; proposals are then accepted almost always."
    )


def render_network(run) -> None:
    """The tab on a Markov network's page (its tabs are drawn whole inside the live part)."""
    render_run(run)
    render_live(run)


def render_live(run) -> None:
    """The live part under the view: whether the run has moved on since the state shown."""
    held = run.cache.get(SNAPSHOT)
    if held is not None and held[0] != run.n_steps:
        st.caption(
            f"The view shows step {held[0]:,}; the run is at step {run.n_steps:,}. Press "
            "“Take the current state” to look at it now."
        )
