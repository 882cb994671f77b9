"""View: Which g where. The map of a parameter sweep (``python -m lsbcore.studies.sweep``): for
every
coupling lambda and noise sigma of a target, which balancing function mixes best per target
evaluation, with its ties and margin (``lsbcore.studies.sweep.which_g_where``).

The tab shows the small map shipped in ``assets/which_g_where.json``, or a sweep's results file
(``.sqlite``) or map (``.json``) that the user opens. A click on a cell (or the lambda and sigma
pickers) shows that point's ranking; "Open in the live views" sets the sidebar to that point's
configuration and opens the Chains tab. Nothing here changes with the run: the tab is drawn once
per page run, outside the live fragment.

``load_upload``, ``nearest``, ``picked_point`` and ``live_config`` are plain data, tested
without a browser.
"""

from __future__ import annotations

import logging
import math
import tempfile
from pathlib import Path

import plotly.graph_objects as go
import streamlit as st

from app import charts, page_state, presentation, sources, view_params
from app import config as cfgmod
from app.page_state import (
    WG_BOXES,
    WG_LAM,
    WG_LOADED,
    WG_PANEL,
    WG_PICK,
    WG_SIGMA,
    WG_UPLOAD,
    WG_VERSION,
)
from app.text import counted, plain, quote
from lsbcore.number_text import number_text
from lsbcore.studies.figures import sampler_colour, sampler_label
from lsbcore.studies.sweep import (
    StoreError,
    build_map,
    map_from_json,
    read_map,
    read_results,
    write_map,
)
from lsbcore.studies.sweep.grid import ASSETS
from lsbcore.studies.sweep.report import map_figure, point_hover

log = logging.getLogger(__name__)

SHIPPED = ASSETS / "which_g_where.json"
# Streamlit's own upload limit (.streamlit/config.toml, maxUploadSize): a results file of about
# 60,000 cells, or any map; a larger sweep is opened through its map (lsbcore.studies.sweep.report
# --json)
MAX_UPLOAD_BYTES = 20_000_000
SQLITE_HEADER = b"SQLite format 3\x00"
PARAMS = view_params.WHICH_G_WHERE  # the tab's link parameters (app/view_params.py)
KEYS = tuple(param.key for param in PARAMS)
# WG_VERSION is bumped by a click on the map, so that the λ and σ boxes are drawn afresh showing
# the clicked point. Were the boxes keyed by the point itself, a rerun the browser sends before
# it has seen the boxes' new values (the map's own deselection, as the chosen cell's frame moves)
# would carry their old values back and undo the click (seen in Chromium after a change of
# panel).
OPEN_KEY = "wg_open"
INTRO = (
    "Is one balancing function best everywhere? For each coupling λ, noise σ and target, the "
    "function that mixes best per target evaluation, and whether the seeds can tell. Each cell "
    "is one point of a sweep "
    "(`python -m lsbcore.studies.sweep`), coloured by the winner (highest ESS per 1,000 target "
    "evaluations, mean over seeds) with its margin over the runner-up; “≈ tie” where the seeds "
    "cannot single one out (paired differences within two standard errors), in a lighter shade "
    "of the leader."
)


# ----------------------------------------------------------------------------- the map
@st.cache_data(show_spinner=False)
def shipped_map() -> dict:
    """The map shipped with the product, read and checked once per server."""
    return read_map(SHIPPED)


def _checked(document: dict) -> dict:
    """A map built here, written and read back: the reader checks it whole."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "map.json"
        write_map(document, path)
        return read_map(path)


def load_upload(name: str, data: bytes) -> dict:
    """The map of an uploaded file: a sweep's results (SQLite) or a map (JSON). A ``ValueError``
    with one sentence when it is neither, is too large, or holds no finished cell."""
    shown = quote(name)
    if len(data) > MAX_UPLOAD_BYTES:
        raise ValueError(
            f"{shown} is over {MAX_UPLOAD_BYTES // 1_000_000} MB; open its map instead "
            "(python -m lsbcore.studies.sweep.report RESULTS --json map.json writes one)."
        )
    if not data:
        raise ValueError(f"{shown} is empty.")
    if data.startswith(SQLITE_HEADER):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "results.sqlite"
            path.write_bytes(data)
            try:
                rows = read_results(path)
            except StoreError as err:
                for where in (str(path.resolve()), str(path)):
                    err = str(err).replace(where, f"“{name}”")
                raise ValueError(plain(err)) from None
        if not rows:
            raise ValueError(f"{shown} holds no finished cell yet: nothing to map.")
        try:
            return _checked(build_map(rows))
        except ValueError as err:
            raise ValueError(f"{shown} cannot be mapped: {plain(err)}") from None
    if data.lstrip()[:1] in (b"{", b"["):
        try:
            return map_from_json(data)
        except ValueError as err:
            raise ValueError(f"{shown}: {plain(err)}") from None
    raise ValueError(
        f"{shown} is neither a sweep's results file (SQLite, .sqlite) nor a map (JSON, .json)."
    )


def panel_label(panel: dict) -> str:
    target = "square (the paper's synthetic problem)" if panel["target"] == "square" else None
    return f"{target or panel['target']}, μ = {panel['mu']:g}"


def nearest(values: list[float], wanted: float) -> float:
    """The value of an axis closest to ``wanted`` (the first on a tie)."""
    return min(values, key=lambda v: abs(v - wanted))


def point_at(panel: dict, lam: float, sigma: float) -> dict | None:
    return next((p for p in panel["points"] if p["lam"] == lam and p["sigma"] == sigma), None)


def picked_point(points) -> tuple[float, float] | None:
    """The (lambda, sigma) of the cell a click chose, from Plotly's selected points: a cell
    centre carries them as ``customdata`` (a list, or a mapping by position as the browser may
    send it); None when no point says."""
    for point in points or []:
        data = charts.customdata_pair(point)
        try:
            if data is not None:
                lam, sigma = float(data[0]), float(data[1])
                if math.isfinite(lam) and math.isfinite(sigma):
                    return lam, sigma
        except (TypeError, ValueError):
            continue
    return None


# ----------------------------------------------------------------------------- figures
def clickable_map(panel: dict, samplers: list[str], chosen: tuple[float, float] | None):
    """The report's heat map of one panel (``lsbcore.studies.sweep.report.map_figure``), made to
    take
    clicks: heat maps report clicks poorly, so nearly transparent markers at the cell centres
    carry each cell's ``[lam, sigma]``; the chosen cell is framed."""
    lams, sigmas = panel["lam"], panel["sigma"]
    fig = map_figure(panel, samplers, title=panel_label(panel))
    hover = {(p["lam"], p["sigma"]): point_hover(p) for p in panel["points"]}
    cells = [(lam, sigma) for sigma in sigmas for lam in lams]
    fig.add_trace(
        go.Scatter(
            x=[f"{lam:g}" for lam, _ in cells],
            y=[f"{sigma:g}" for _, sigma in cells],
            mode="markers",
            marker={"symbol": "square", "size": 30, "color": "#ffffff", "opacity": 0.01},
            customdata=[[lam, sigma] for lam, sigma in cells],
            hovertext=[hover.get(c, "no result at this point") for c in cells],
            hovertemplate="%{hovertext}<extra></extra>",
            name="cells",
            showlegend=False,
        )
    )
    if chosen is not None and chosen[0] in lams and chosen[1] in sigmas:
        c, r = lams.index(chosen[0]), sigmas.index(chosen[1])  # category axes: index positions
        fig.add_shape(
            type="rect",
            x0=c - 0.5,
            x1=c + 0.5,
            y0=r - 0.5,
            y1=r + 0.5,
            line={"color": "#111111", "width": 3},
        )
    fig.update_layout(dragmode=False, clickmode="event+select")
    fig.update_xaxes(fixedrange=True)
    fig.update_yaxes(fixedrange=True)
    return fig


def ranking_figure(point: dict, samplers: list[str]) -> go.Figure:
    """ESS per 1,000 target evaluations per sampler at one point, with +-2 standard errors."""
    names = [s for s in samplers if s in point["means"]]
    means = [point["means"][s] for s in names]
    errors = [2 * point["stderrs"].get(s, math.nan) for s in names]
    fig = go.Figure(
        go.Bar(
            x=[sampler_label(s) for s in names],
            y=[m if math.isfinite(m) else None for m in means],
            error_y={
                "type": "data",
                "array": [e if math.isfinite(e) else 0.0 for e in errors],
                "visible": True,
            },
            marker={
                "color": [sampler_colour(s) for s in names],
                "line": {
                    "color": ["#111111" if s in (point.get("tied") or []) else "rgba(0,0,0,0)"
                              for s in names],
                    "width": 2,
                },
            },
            hovertemplate="%{x}: %{y:.4g}<extra></extra>",
        )
    )  # fmt: skip
    fig.update_layout(
        title=f"λ = {point['lam']:g}, σ = {point['sigma']:g}",
        yaxis_title="ESS per 1,000 evaluations",
        height=360,
        margin={"l": 60, "r": 20, "t": 50, "b": 40},
        showlegend=False,
    )
    return fig


# ----------------------------------------------------------------------------- open live
def live_config(
    document: dict, panel: dict, point: dict, samples: tuple[str, ...], base: cfgmod.Config
) -> tuple[cfgmod.Config | None, list[str]]:
    """The dashboard configuration closest to a map point, and sentences saying where it is not
    the sweep's (a value clamped to the dashboard's bounds, a sample this install lacks).

    ``square``: the paper source (its square geometry, alpha = mu truth + U(-sigma, sigma) per
    chain) at that lambda, mu, sigma. A sample: the sample at its threshold data model with the
    object bright, the sweep's own posterior (alpha = mu y / sigma^2, y = 2 I - 1). Size, chains,
    burn-in and mixing steps from the map's protocol; the map's samplers; device and speed kept.
    """
    protocol = document["protocol"]
    target = panel["target"]
    values: dict = {
        "lam": point["lam"],
        "mu": panel["mu"],
        "sigma": point["sigma"],
        "size": protocol["size"],
        "chains": protocol["chains"],
        "burn_in": protocol["burn_in"],
        "steps": protocol["steps"],
        "samplers": ",".join(document["samplers"]),
        "seed": (document.get("seeds") or [0])[0],
        "device": base.device,
        "speed": base.speed,
        "thin": 1,
    }
    if target == "square":
        values.update(source="paper", case=3, boundary="periodic", shared_alpha="0")
    elif target in samples:
        values.update(
            source="sample",
            sample=target,
            model="threshold",
            polarity="bright",
            boundary="free",
            noise=0.0,
            until_settled="0",  # the sweep ran its steps whatever the marginal did
        )
    else:
        return None, [
            f"The map's target {quote(target)} is not a sample of this install; it cannot be "
            "opened here."
        ]
    cfg, problems = cfgmod.validate(values, samples)
    cfg, capped = cfgmod.cap_workload(cfg)
    notes = [f"Within the dashboard's bounds, not the sweep's: {p}" for p in problems + capped]
    return cfg, notes


def _open_live(cfg: cfgmod.Config, notes: list[str]) -> None:
    """The button's callback: the sidebar's keys take ``cfg`` before the sidebar is drawn, and
    the Chains tab opens."""
    page_state.open_config(cfg)
    page_state.VIEW.set("Chains")
    # written by the callback, these show at the top of the page run it starts
    st.toast("The sweep's point is open in the live views: press Run.")
    for note in notes:
        st.info(note)


# ----------------------------------------------------------------------------- in the app
def _shown_map() -> tuple[dict | None, str]:
    """The map to draw and what it is called; an upload that cannot be read says why and the
    shipped map stays."""
    with st.expander("Open your own sweep", expanded=WG_UPLOAD.get() is not None):
        file = st.file_uploader(
            "A sweep's results (.sqlite) or its map (.json)",
            type=["sqlite", "db", "json"],
            key=WG_UPLOAD.key,
            help="A results file that python -m lsbcore.studies.sweep wrote (--out), or the map "
            "that python -m lsbcore.studies.sweep.report derived from one (--json). Up to "
            f"{MAX_UPLOAD_BYTES // 1_000_000} MB. Without one, the map shipped with LSB "
            "Explorer is shown.",
        )
    if file is not None:
        held = WG_LOADED.get()
        if held is None or held[0] != file.file_id:
            try:
                document, error = load_upload(file.name, file.getvalue()), None
            except ValueError as err:
                document, error = None, str(err)
            except Exception:  # an unreadable file must never take the page down
                log.exception("which g where: upload %r failed", file.name)
                document, error = None, f"{quote(file.name)} could not be read as a map."
            held = WG_LOADED.set((file.file_id, file.name, document, error))
        if held[2] is not None:
            return held[2], quote(held[1])
        st.error(f"{held[3]} Showing the shipped map.")
    try:
        return shipped_map(), "the shipped map"
    except ValueError as err:
        st.error(f"The shipped map cannot be read: {plain(err)}")
        return None, ""


def _on_pick() -> None:
    """A click on the map: the cell under it becomes the chosen point."""
    try:
        event = WG_PICK.get() or {}
        picked = picked_point((event.get("selection") or {}).get("points"))
    except Exception:  # a click must never take the page down
        log.exception("which g where: unreadable selection")
        return
    if picked is not None:
        WG_LAM.set(picked[0])
        WG_SIGMA.set(picked[1])
        WG_VERSION.set(WG_VERSION.get() + 1)


def _on_box(slot: page_state.Slot, box: str) -> None:
    """A λ or σ chosen in its box becomes the chosen point's. A box drawn before the last click
    can still report its old value (Streamlit calls its callback from the browser's stale
    state, after the click): it is not the user's choice, so it is ignored."""
    if box == (WG_BOXES.get() or {}).get(slot.key):
        slot.set(page_state.Slot(box, None).get())


def _snap(slot: page_state.Slot, values: list[float]) -> None:
    try:
        wanted = float(slot.get() if slot.is_set() else values[0])
    except (TypeError, ValueError):
        wanted = values[0]
    slot.set(nearest(values, wanted if math.isfinite(wanted) else values[0]))


def render(run) -> None:
    """The Which g where tab (drawn once per page run, outside the live fragment)."""
    if not presentation.is_on():  # a lecture has the view's one sentence instead
        st.caption(INTRO)
    document, name = _shown_map()
    if document is None:
        return
    protocol = document["protocol"]
    seeds = document["seeds"]
    st.caption(
        f"Showing {name}: {counted(len(document['panels']), 'panel')}, samplers "
        f"{', '.join(sampler_label(s) for s in document['samplers'])}; protocol "
        f"{protocol['size']} sites a side (longer side in pixels for a photo), "
        f"{protocol['chains']} chains, burn-in {protocol['burn_in']:,}, "
        f"{protocol['steps']:,} mixing steps, ESS lags up to {protocol['max_lag']:,}; "
        f"{counted(len(seeds), 'seed')} ({', '.join(map(str, seeds[:10]))}"
        f"{', …' if len(seeds) > 10 else ''})."
    )
    for note in document.get("notes") or []:
        st.caption(f"Note: {plain(note)}")
    page_state.restore_links(KEYS)
    panels = document["panels"]
    options = list(range(1, len(panels) + 1))
    if WG_PANEL.get() not in options:
        WG_PANEL.set(min(max(int(WG_PANEL.get() or 1), 1), len(panels)))
    panel = panels[WG_PANEL.get() - 1]
    _snap(WG_LAM, panel["lam"])
    _snap(WG_SIGMA, panel["sigma"])
    page_state.remember_links(KEYS)
    with st.container(horizontal=True, gap="medium"):
        if len(panels) > 1:
            st.selectbox(
                "Panel (target, μ)",
                options,
                key=WG_PANEL.key,
                format_func=lambda i: panel_label(panels[i - 1]),
                width=320,
            )
        boxes = WG_BOXES.set({})
        for label, slot, values in (("λ", WG_LAM, panel["lam"]), ("σ", WG_SIGMA, panel["sigma"])):
            # afresh after a click, and for other values (another panel or map)
            box = boxes[slot.key] = f"{slot.key}_box_{WG_VERSION.get()}_{hash(tuple(values))}"
            st.selectbox(
                label,
                values,
                index=values.index(slot.get()),
                key=box,
                on_change=_on_box,
                args=(slot, box),
                format_func=lambda v: f"{v:g}",
                width=120,
            )
    lam, sigma = float(WG_LAM.get()), float(WG_SIGMA.get())
    samplers = list(document["samplers"])
    left, right = st.columns([3, 2], gap="large")
    with left:
        st.plotly_chart(
            presentation.figure(
                clickable_map(panel, samplers, (lam, sigma)), presentation.BELOW_CONTROLS
            ),
            key=WG_PICK.key,
            on_select=_on_pick,
            selection_mode="points",
            config={"displayModeBar": False},
        )
        st.caption("Click a cell, or choose its λ and σ above.")
    point = point_at(panel, lam, sigma)
    with right, st.container(key="wg_point"):
        if point is None:
            st.info(f"The sweep has no finished cell at λ = {lam:g}, σ = {sigma:g}.")
            return
        _draw_point(document, panel, point, sources.sample_names(), run.config)


def _draw_point(document, panel, point, samples, base: cfgmod.Config) -> None:
    """The chosen point: its winner in a sentence, the Open button, the ranking figure."""
    samplers = list(document["samplers"])
    winner = point.get("winner")
    tied = [s for s in point.get("tied") or [] if s != winner]
    where = f"**λ = {point['lam']:g}, σ = {point['sigma']:g}**"
    margin = point.get("margin")
    above = (
        f", {number_text(margin * 100, 3)}% above the runner-up"
        if margin is not None and math.isfinite(margin)
        else ""
    )
    if winner is None:
        st.markdown(f"{where}: no winner (no sampler gave a finite ESS).")
    elif tied:
        names = ", ".join(sampler_label(s) for s in tied)
        st.markdown(
            f"{where}: winner **{sampler_label(winner)}**{above}, but tied with {names}: the "
            "seeds cannot tell them apart."
        )
    else:
        st.markdown(f"{where}: winner **{sampler_label(winner)}**{above}.")
    cfg, notes = live_config(document, panel, point, samples, base)
    if cfg is None:
        st.info(notes[0])
    else:
        if panel["target"] != "square":
            notes = [
                "Opens the sample at the threshold data model, object bright: the sweep's "
                "posterior (α = μ y / σ², y = 2I − 1).",
                *notes,
            ]
        st.button(
            "Open in the live views",
            key=OPEN_KEY,
            type="primary",
            on_click=_open_live,
            args=(cfg, notes),
            help="Sets the sidebar to this point (its target, λ, μ, σ, the map's samplers and "
            "protocol) and opens the Chains tab; press Run there.",
        )
        for note in notes:
            st.caption(note)
    st.plotly_chart(ranking_figure(point, samplers), config={"displayModeBar": False})
    seeds = sorted(set((point.get("n_seeds") or {}).values()))
    st.caption(
        "Bars: mean over seeds; whiskers: ± 2 standard errors; outlined: within the tie rule of "
        f"the winner. Seeds per sampler: {', '.join(map(str, seeds)) or '—'}."
    )
    for note in point.get("notes") or []:
        st.caption(f"Note: {plain(note)}")


def render_live(run) -> None:
    """Nothing of this tab follows the run."""
