"""Plotly figures of sampler results, shared by the experiment report and the dashboard.

Every function takes plain data (dicts of numpy arrays keyed by sampler name, or arrays) and
returns a ``plotly.graph_objects.Figure``. None of them raises on empty input (the figure then
carries the annotation "no data yet") or on NaN/inf values (they become gaps). Besides the
report commands (``lsbcore.studies.experiment.report``, ``lsbcore.studies.sweep.report``,
``lsbcore.studies.block_proposals.held_out``) this is the only module of ``lsbcore`` that imports
plotly.

Colours and labels are fixed per sampler name (``SAMPLER_COLOURS``, ``SAMPLER_LABELS``, read from
the sampler registry; the RBM study's block variants from ``lsbcore.rbm.variants.COLOURS``) so that
a sampler looks the same in every figure and any two are told apart at a glance; unknown names
get a stable colour from the same palette and their own name as label.
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import math
import warnings
import zlib
from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from lsbcore.rbm.variants import COLOURS as VARIANT_COLOURS
from lsbcore.samplers.registry import REGISTRY

__all__ = [
    "COMPONENTS",
    "ESS_THRESHOLD",
    "SAMPLER_COLOURS",
    "SAMPLER_LABELS",
    "acf_figure",
    "balancing_curves",
    "balancing_figure",
    "band_figure",
    "ess_figure",
    "exact_relaxation_figure",
    "exact_tv_figure",
    "figure_div",
    "figure_json",
    "flow_elbo_figure",
    "flow_latent_figure",
    "g_style",
    "loss_figure",
    "pinned_bars_figure",
    "pinned_weights_figure",
    "plotly_js",
    "plotly_js_gzip_base64",
    "sampler_colour",
    "sampler_label",
    "weights_area_figure",
    "weights_bar_figure",
]

#: One colour and one human label per sampler, from its registry entry, so that a sampler
#: looks the same in every figure and a newly registered one needs nothing here.
SAMPLER_COLOURS = {name: spec.colour for name, spec in REGISTRY.items()}
SAMPLER_LABELS = {name: spec.label for name, spec in REGISTRY.items()}
#: LSB 1's mixture components, in the order of its softmax weights.
COMPONENTS = ("barker", "sqrt", "min", "max")
#: Autocorrelations above this count towards the paper ESS (spec section 6).
ESS_THRESHOLD = 0.05

_PALETTE = tuple(dict.fromkeys((*SAMPLER_COLOURS.values(), "#EDC948", "#4B4B4B")))
_HEIGHT = 420
_MAX_POINTS = 5000  # longer series are decimated for display (every k-th point, last kept)
_NO_DATA = "no data yet"


# ----------------------------------------------------------------------------- helpers
def sampler_colour(name: str) -> str:
    """The colour of sampler ``name`` (a stable palette colour for unknown names)."""
    if name in SAMPLER_COLOURS:
        return SAMPLER_COLOURS[name]
    if name in VARIANT_COLOURS:  # the RBM study's block variants (Gibbs-2, HB-10-1, ...)
        return VARIANT_COLOURS[name]
    return _PALETTE[zlib.crc32(str(name).encode("utf-8")) % len(_PALETTE)]


def sampler_label(name: str) -> str:
    """The human label of sampler ``name`` (the name itself when unknown)."""
    return SAMPLER_LABELS.get(name, str(name))


def _rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def _style(fig: go.Figure, title: str, x_label: str | None = None, y_label: str | None = None):
    fig.update_layout(
        template="plotly_white",
        title={"text": title, "x": 0.01, "xanchor": "left"},
        height=_HEIGHT,
        margin={"l": 60, "r": 20, "t": 70, "b": 50},
        # below the plot: at the top it ran into the title once a narrow figure wrapped it
        legend={"orientation": "h", "yanchor": "top", "y": -0.2, "x": 0, "xanchor": "left"},
        hovermode="x unified",
        font={"size": 13},
    )
    if x_label is not None:
        fig.update_xaxes(title_text=x_label)
    if y_label is not None:
        fig.update_yaxes(title_text=y_label)
    return fig


def _empty(title: str, x_label: str | None = None, y_label: str | None = None) -> go.Figure:
    fig = _style(go.Figure(), title, x_label, y_label)
    fig.add_annotation(
        text=_NO_DATA,
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        showarrow=False,
        font={"size": 16, "color": "#888888"},
    )
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False)
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False)
    return fig


def _float_array(values, ndim: int | None = None) -> np.ndarray:
    """``values`` as float64 with inf replaced by NaN; an empty array if it cannot convert."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.zeros(0)
    if ndim == 2 and arr.ndim == 1:
        arr = arr[:, None]
    if ndim is not None and arr.ndim != ndim:
        return np.zeros((0,) * ndim)
    return np.where(np.isfinite(arr), arr, np.nan)


def _decimate(n: int, max_points: int = _MAX_POINTS) -> slice | np.ndarray:
    """Indices keeping at most ``max_points`` of ``n`` evenly spaced points, the last included."""
    if n <= max_points:
        return slice(None)
    stride = math.ceil(n / max_points)
    idx = np.arange(0, n, stride)
    return idx if idx[-1] == n - 1 else np.append(idx, n - 1)


def _quiet_nan(func, *args, **kwargs):
    """Run a nan-aware numpy reduction without "all-NaN slice" / "mean of empty" warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return func(*args, **kwargs)


def _row_quantile(values: np.ndarray, q: float) -> np.ndarray:
    """Quantile ``q`` of each row ignoring NaNs (numpy's default linear method), vectorised.

    ``np.nanquantile`` loops over rows in Python, far too slow for long traces.
    """
    if np.all(np.isfinite(values)):
        return np.quantile(values, q, axis=1)
    ordered = np.sort(values, axis=1)  # NaNs last
    count = np.sum(~np.isnan(values), axis=1)
    position = q * np.maximum(count - 1, 0)
    lower = np.floor(position).astype(np.int64)
    upper = np.minimum(lower + 1, np.maximum(count - 1, 0))
    rows = np.arange(values.shape[0])
    a, b = ordered[rows, lower], ordered[rows, upper]
    out = a + (b - a) * (position - lower)
    return np.where(count > 0, out, np.nan)


def _items(data) -> list:
    return list(data.items()) if isinstance(data, Mapping) else []


# ----------------------------------------------------------------------------- traces
def band_figure(
    series: dict[str, tuple[np.ndarray, np.ndarray]],
    title: str,
    y_label: str,
    x_label: str = "iteration",
    band: float = 0.95,
    max_points: int = _MAX_POINTS,
) -> go.Figure:
    """Mean over chains and a shaded central ``band`` interval per sampler.

    ``series[name] = (x [T], values [T, B])`` (``values [T]`` counts as one chain). The band is
    the ``(1 - band) / 2`` and ``(1 + band) / 2`` quantiles over chains at each x (numpy's
    default linear interpolation); NaNs are ignored per point, all-NaN points are gaps. Series
    longer than ``max_points`` are decimated for display, and the drawn values are float32
    (seven digits, more than a screen shows; half the bytes in a page or a report).
    """
    if isinstance(band, bool) or not isinstance(band, (int, float)) or not 0 < band < 1:
        raise ValueError(f"band must be a number in (0, 1), got {band!r}.")
    if isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < 2:
        raise ValueError(f"max_points must be an integer >= 2, got {max_points!r}.")
    fig = go.Figure()
    lo_q, hi_q = (1.0 - band) / 2.0, (1.0 + band) / 2.0
    pct = f"{100 * band:g}%"
    for name, pair in _items(series):
        try:
            x, values = pair
        except (TypeError, ValueError):
            continue
        x = _float_array(x, 1)
        values = _float_array(values, 2)
        n = min(len(x), values.shape[0])
        if n == 0 or values.shape[1] == 0:
            continue
        keep = _decimate(n, max_points)
        x, values = x[:n][keep], values[:n][keep]
        mean = _quiet_nan(np.nanmean, values, axis=1).astype(np.float32)
        lower = _row_quantile(values, lo_q).astype(np.float32)
        upper = _row_quantile(values, hi_q).astype(np.float32)
        x = x.astype(np.float32) if np.all(np.abs(x[np.isfinite(x)]) < 2**24) else x
        colour, label = sampler_colour(name), sampler_label(name)
        group = f"band-{name}"
        fig.add_trace(
            go.Scatter(
                x=x,
                y=upper,
                mode="lines",
                line={"width": 0, "color": colour},
                legendgroup=group,
                showlegend=False,
                hoverinfo="skip",
                name=f"{label} upper",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=lower,
                mode="lines",
                line={"width": 0, "color": colour},
                fill="tonexty",
                fillcolor=_rgba(colour, 0.18),
                legendgroup=group,
                showlegend=False,
                hoverinfo="skip",
                name=f"{label} lower",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=mean,
                mode="lines",
                line={"width": 2, "color": colour},
                legendgroup=group,
                name=label,
                hovertemplate=f"{label}: %{{y:.4g}}<extra></extra>",
            )
        )
    if not fig.data:
        return _empty(title, x_label, y_label)
    _style(fig, title, x_label, y_label)
    fig.add_annotation(
        text=f"line: mean over chains; band: central {pct} of chains",
        x=0,
        y=1.0,
        xref="paper",
        yref="paper",
        yanchor="bottom",
        showarrow=False,
        font={"size": 11, "color": "#666666"},
    )
    return fig


# ----------------------------------------------------------------------------- balancing
def balancings_of(samplers: Mapping) -> dict:
    """The balancing function of every locally balanced sampler among ``samplers`` (names to
    samplers): what ``balancing_curves`` draws."""
    return {n: s.balancing for n, s in samplers.items() if REGISTRY[n].balanced}


def balancing_curves(balancings: dict, t=None) -> tuple[np.ndarray, dict, dict]:
    """``(t, g, reflected)`` for plotting: ``g[name] = g(t)`` and ``reflected[name] = t g(1/t)``.

    ``balancings`` maps names to ``lsbcore.Balancing`` objects (anything with ``.g(t)``);
    ``t`` defaults to ``logspace(-4, 4, 200)``. For a balancing function both curves coincide.
    """
    t = np.logspace(-4, 4, 200) if t is None else np.asarray(t, dtype=np.float64).reshape(-1)
    if t.size and not (np.all(np.isfinite(t)) and np.all(t > 0)):
        raise ValueError("t must contain only finite positive numbers.")
    g, reflected = {}, {}
    for name, balancing in _items(balancings):
        g[name] = np.asarray(balancing.g(t), dtype=np.float64)
        reflected[name] = t * np.asarray(balancing.g(1.0 / t), dtype=np.float64)
    return t, g, reflected


def _positive(values) -> np.ndarray:
    arr = _float_array(values, 1)
    return np.where(arr > 0, arr, np.nan)


#: Each function's line: (dash, width, marker). Functions can coincide (t/(1+t) and min(1,t)
#: differ by at most a factor 2; LSB 1 may learn sqrt(t)), so every curve has its own dash,
#: width or marker, and wider lines are drawn first: a curve on top of another shows through.
G_STYLES = {
    "barker": ("solid", 6.0, None),
    "sqrt": ("dash", 4.0, None),
    "min": ("dot", 3.5, None),
    "max": ("dashdot", 3.0, None),
    "lsb1": ("solid", 2.0, "circle"),
    "lsb2": ("solid", 2.0, "diamond"),
    "lsb2-monotone": ("dot", 2.0, "triangle-up"),
    "learned": ("longdash", 2.0, "square"),
}
_G_OTHER = ("solid", 2.5, "x")
_G_MARKERS = 14  # markers per learned curve: enough to follow it, few enough to see the line


def g_style(name: str) -> tuple[str, float, str | None]:
    """``(dash, width, marker)`` of sampler ``name``'s g(t) curve."""
    return G_STYLES.get(name, _G_OTHER)


def balancing_figure(
    t: np.ndarray,
    g: dict[str, np.ndarray],
    reflected: dict[str, np.ndarray] | None = None,
) -> go.Figure:
    """``g(t)`` per sampler on log-log axes; thin black ``t g(1/t)`` on top when ``reflected``
    is given.

    The black curve lies exactly on the function's for a balancing function
    (``g(t) = t g(1/t)``). Every function has its own dash, width or marker (``G_STYLES``), and
    the wide ones are drawn first, so coinciding curves all stay visible; the legend keeps the
    samplers' order. Non-positive or non-finite values are gaps (a log axis cannot show them).
    """
    title = "Balancing functions g(t)"
    x_label, y_label = "t = p(x') / p(x)", "g(t)"
    t = _positive(t)
    fig = go.Figure()
    if t.size:
        curves = [
            (rank, name, _positive(values))
            for rank, (name, values) in enumerate(_items(g))
            if _positive(values).size == t.size
        ]
        curves.sort(key=lambda c: -g_style(c[1])[1])  # stable: wide lines underneath
        for rank, name, y in curves:
            colour, label = sampler_colour(name), sampler_label(name)
            dash, width, marker = g_style(name)
            fig.add_trace(
                go.Scatter(
                    x=t,
                    y=y,
                    mode="lines+markers" if marker else "lines",
                    line={"width": width, "color": colour, "dash": dash},
                    marker=(
                        {"symbol": marker, "size": 8, "color": colour, "maxdisplayed": _G_MARKERS}
                        if marker
                        else None
                    ),
                    name=label,
                    legendgroup=str(name),
                    legendrank=1000 + rank,
                    hovertemplate=f"{label}: g(%{{x:.3g}}) = %{{y:.4g}}<extra></extra>",
                )
            )
        for name, values in _items(reflected):
            y = _positive(values)
            if y.size != t.size:
                continue
            label = sampler_label(name)
            fig.add_trace(
                go.Scatter(
                    x=t,
                    y=y,
                    mode="lines",
                    line={"width": 1.2, "color": "#222222", "dash": "solid"},
                    opacity=0.8,
                    name=f"{label}: t g(1/t)",
                    legendgroup=str(name),
                    showlegend=False,
                    hovertemplate=f"{label}: t g(1/t) = %{{y:.4g}}<extra></extra>",
                )
            )
    if not fig.data:
        return _empty(title, x_label, y_label)
    _style(fig, title, x_label, y_label)
    fig.update_layout(hovermode="closest")
    fig.update_xaxes(type="log", exponentformat="power")
    fig.update_yaxes(type="log", exponentformat="power")
    if reflected:
        fig.add_annotation(
            text="thin black: t g(1/t), on the function's curve when g is balanced",
            x=0,
            y=1.0,
            xref="paper",
            yref="paper",
            yanchor="bottom",
            showarrow=False,
            font={"size": 11, "color": "#666666"},
        )
    return fig


# ----------------------------------------------------------------------------- LSB 1 weights
def weights_area_figure(steps: np.ndarray, weights: np.ndarray) -> go.Figure:
    """Stacked area of LSB 1's softmax weights ``[T, 4]`` (barker, sqrt, min, max) over burn-in."""
    title = "LSB 1: mixture weights during burn-in"
    x_label, y_label = "burn-in step", "weight"
    x = _float_array(steps, 1)
    w = _float_array(weights, 2)
    n = min(len(x), w.shape[0])
    if n == 0 or w.shape[1] == 0:
        return _empty(title, x_label, y_label)
    keep = _decimate(n)
    x, w = x[:n][keep], w[:n][keep]
    fig = go.Figure()
    for k in range(w.shape[1]):
        name = COMPONENTS[k] if k < len(COMPONENTS) else f"component {k}"
        colour = sampler_colour(name)
        fig.add_trace(
            go.Scatter(
                x=x,
                y=w[:, k],
                mode="lines",
                stackgroup="weights",
                line={"width": 0.5, "color": colour},
                fillcolor=_rgba(colour, 0.75),
                name=sampler_label(name),
                hovertemplate=f"{sampler_label(name)}: %{{y:.3f}}<extra></extra>",
            )
        )
    _style(fig, title, x_label, y_label)
    fig.update_yaxes(range=[0, 1])
    return fig


def weights_bar_figure(weights: np.ndarray) -> go.Figure:
    """LSB 1's current softmax weights ``[4]`` (barker, sqrt, min, max) as bars."""
    title = "LSB 1: current mixture weights"
    w = _float_array(weights).reshape(-1)
    if w.size == 0:
        return _empty(title, None, "weight")
    names = [COMPONENTS[k] if k < len(COMPONENTS) else f"component {k}" for k in range(w.size)]
    text = ["n/a" if math.isnan(v) else f"{v:.3f}" for v in w]
    fig = go.Figure(
        go.Bar(
            x=[sampler_label(n) for n in names],
            y=np.nan_to_num(w, nan=0.0),
            marker_color=[sampler_colour(n) for n in names],
            text=text,
            textposition="outside",
            hovertemplate="%{x}: %{text}<extra></extra>",
        )
    )
    _style(fig, title, None, "weight")
    fig.update_layout(hovermode="closest", showlegend=False)
    fig.update_yaxes(range=[0, 1.1])
    return fig


# ----------------------------------------------------------------------------- mixing
def _sampler_line(name: str, y: np.ndarray, number_format: str) -> go.Scatter:
    """One sampler's curve against lag or step 0, 1, ..., in its colour, named by its label."""
    label = sampler_label(name)
    return go.Scatter(
        x=np.arange(len(y)),
        y=y,
        mode="lines",
        line={"width": 2, "color": sampler_colour(name)},
        name=label,
        hovertemplate=f"{label}: %{{y:{number_format}}}<extra></extra>",
    )


def acf_figure(acf: dict[str, np.ndarray], max_lag: int | None = None) -> go.Figure:
    """Mean autocorrelation over chains per sampler against the lag.

    ``acf[name]`` is ``[B, L + 1]`` (one row per chain, lag 0 first) or ``[L + 1]``; lags beyond
    ``max_lag`` are not shown. The dotted line at 0.05 is the paper-ESS threshold: only lags
    above it count.
    """
    title = "Autocorrelation of the magnetisation (mixing phase)"
    x_label, y_label = "lag", "autocorrelation (mean over chains)"
    fig = go.Figure()
    for name, values in _items(acf):
        rho = _float_array(values, 2) if np.ndim(values) == 2 else _float_array(values, 1)[None]
        if rho.size == 0:
            continue
        mean = _quiet_nan(np.nanmean, rho, axis=0)
        if max_lag is not None:
            mean = mean[: max(int(max_lag), 0) + 1]
        if mean.size == 0:
            continue
        fig.add_trace(_sampler_line(name, mean, ".3f"))
    if not fig.data:
        return _empty(title, x_label, y_label)
    _style(fig, title, x_label, y_label)
    fig.add_hline(
        y=ESS_THRESHOLD,
        line={"dash": "dot", "color": "#555555", "width": 1.5},
        annotation_text=f"{ESS_THRESHOLD:g}: paper-ESS threshold",
        annotation_position="top right",
        annotation_font={"size": 11, "color": "#555555"},
    )
    return fig


def _number(value) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out if math.isfinite(out) else math.nan


def ess_figure(summaries: dict[str, dict], bulk_title: str = "bulk ESS (pooled)") -> go.Figure:
    """Paper ESS (mean, error bar = std over chains) and bulk ESS per sampler, side by side.

    ``summaries[name]`` holds ``ess_paper_mean``, ``ess_paper_std`` and ``ess_bulk`` (as in
    ``results["samplers"]``); missing, None or NaN values show as "n/a". ``bulk_title`` names
    the second panel (the Mixing view shows each chain's own bulk ESS when chains sample
    different posteriors).
    """
    title = "Effective sample size"
    rows = [(n, s) for n, s in _items(summaries) if isinstance(s, Mapping)]
    if not rows:
        return _empty(title)
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("paper ESS (per L+1 draws)", bulk_title),
        horizontal_spacing=0.12,
    )
    labels = [sampler_label(n) for n, _ in rows]
    colours = [sampler_colour(n) for n, _ in rows]
    for col, key, err_key in ((1, "ess_paper_mean", "ess_paper_std"), (2, "ess_bulk", None)):
        y = np.array([_number(s.get(key)) for _, s in rows])
        err = np.array([_number(s.get(err_key)) for _, s in rows]) if err_key else None
        if err is not None:
            text = [
                "n/a" if math.isnan(v) else (f"{v:.2f}" if math.isnan(e) else f"{v:.2f} ± {e:.2f}")
                for v, e in zip(y, err, strict=True)
            ]
        else:
            text = ["n/a" if math.isnan(v) else f"{v:.0f}" for v in y]
        fig.add_trace(
            go.Bar(
                x=labels,
                y=np.nan_to_num(y, nan=0.0),
                marker_color=colours,
                error_y=(
                    {"type": "data", "array": np.nan_to_num(err, nan=0.0), "visible": True}
                    if err is not None
                    else None
                ),
                text=text,
                textposition="outside" if err is None else "none",
                hovertemplate="%{x}: %{text}<extra></extra>",
                showlegend=False,
            ),
            row=1,
            col=col,
        )
    _style(fig, title)
    fig.update_layout(hovermode="closest")
    fig.update_yaxes(title_text="ESS", row=1, col=1)
    fig.update_yaxes(rangemode="tozero")
    return fig


# ----------------------------------------------------------------------------- exact chain
def exact_tv_figure(curves: Mapping[str, np.ndarray]) -> go.Figure:
    """``TV(pi, v P^t)`` of the exact chain against ``t``, one line per sampler (log y).

    ``curves[name]`` is ``[T + 1]`` (``lsbcore.exact.tv_curve``). A TV of exactly 0 has no place
    on a log axis and is left out; a straight line there is a rate ``(1 - gap)^t``.
    """
    title = "Exact distance to the target"
    x_label, y_label = "steps t", "TV(pi, v P^t)"
    fig = go.Figure()
    for name, values in _items(curves):
        tv = _float_array(values, 1)
        if tv.size == 0:
            continue
        fig.add_trace(_sampler_line(name, np.where(tv > 0, tv, np.nan), ".3g"))
    if not fig.data:
        return _empty(title, x_label, y_label)
    _style(fig, title, x_label, y_label)
    fig.update_yaxes(type="log", exponentformat="power")
    return fig


def exact_relaxation_figure(
    couplings, curves: Mapping[str, np.ndarray], current: float | None = None
) -> go.Figure:
    """Relaxation time (site updates) of the exact chain against the coupling ``lambda``, one
    line per sampler (log y); ``current`` marks the run's lambda."""
    title = "Relaxation time against the coupling"
    x_label, y_label = "coupling λ", "relaxation time 1/gap (site updates)"
    x = _float_array(couplings, 1)
    fig = go.Figure()
    for name, values in _items(curves):
        y = _float_array(values, 1)
        if y.size != x.size or y.size == 0:
            continue
        label = sampler_label(name)
        fig.add_trace(
            go.Scatter(
                x=x,
                y=np.where((y > 0) & np.isfinite(y), y, np.nan),
                mode="lines+markers",
                line={"width": 2, "color": sampler_colour(name)},
                name=label,
                hovertemplate=f"{label}: %{{y:.3g}}<extra></extra>",
            )
        )
    if not fig.data:
        return _empty(title, x_label, y_label)
    _style(fig, title, x_label, y_label)
    fig.update_yaxes(type="log", exponentformat="power")
    if current is not None and math.isfinite(current):
        fig.add_vline(x=current, line={"dash": "dot", "color": "#888888"})
        fig.add_annotation(
            x=current, y=1, yref="paper", text="this run's λ", showarrow=False, yanchor="bottom"
        )
    return fig


# ----------------------------------------------------------------------------- learning
def _smooth(y: np.ndarray) -> np.ndarray:
    """Centred moving average over ~1/50 of the series, ignoring NaNs."""
    window = max(1, len(y) // 50)
    if window == 1:
        return y
    ok = np.isfinite(y)
    kernel = np.ones(window)
    total = np.convolve(np.where(ok, y, 0.0), kernel, mode="same")
    count = np.convolve(ok.astype(np.float64), kernel, mode="same")
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / count, np.nan)


def loss_figure(history: dict[str, dict[str, np.ndarray]]) -> go.Figure:
    """Learning loss (top) and eta (bottom) over burn-in per learned sampler.

    ``history[name]`` holds ``step``, ``loss`` and ``eta`` arrays (``LearningHistory.arrays()``).
    The loss is drawn faintly as recorded plus a moving average.
    """
    title = "Learning during burn-in"
    rows = []
    for name, h in _items(history):
        if not isinstance(h, Mapping):
            continue
        step = _float_array(h.get("step", ()), 1)
        loss = _float_array(h.get("loss", ()), 1)
        eta = _float_array(h.get("eta", ()), 1)
        n = min(len(step), len(loss), len(eta))
        if n:
            rows.append((name, step[:n], loss[:n], eta[:n]))
    if not rows:
        return _empty(title, "burn-in step")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    for name, step, loss, eta in rows:
        keep = _decimate(len(step))
        step, loss, eta = step[keep], loss[keep], eta[keep]
        colour, label = sampler_colour(name), sampler_label(name)
        fig.add_trace(
            go.Scatter(
                x=step,
                y=loss,
                mode="lines",
                line={"width": 1, "color": colour},
                opacity=0.3,
                legendgroup=str(name),
                showlegend=False,
                hoverinfo="skip",
                name=f"{label} loss",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=step,
                y=_smooth(loss),
                mode="lines",
                line={"width": 2, "color": colour},
                legendgroup=str(name),
                name=label,
                hovertemplate=f"{label} loss: %{{y:.4g}}<extra></extra>",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=step,
                y=eta,
                mode="lines",
                line={"width": 2, "color": colour},
                legendgroup=str(name),
                showlegend=False,
                name=f"{label} eta",
                hovertemplate=f"{label} eta: %{{y:.4g}}<extra></extra>",
            ),
            row=2,
            col=1,
        )
    _style(fig, title)
    fig.update_layout(height=_HEIGHT + 120)
    fig.update_yaxes(title_text="loss", row=1, col=1)
    fig.update_yaxes(title_text="eta", row=2, col=1)
    fig.update_xaxes(title_text="burn-in step", row=2, col=1)
    return fig


# ----------------------------------------------------------------------------- flows
def flow_elbo_figure(steps, elbo, log_z: float | None = None) -> go.Figure:
    """The flow's training curve: the ELBO per step (``-loss``, a lower bound on ``log Z``),
    drawn faintly as estimated plus a moving average, and the exact ``log Z`` as a line where
    it is known (a target small enough to enumerate): the gap is what training has left."""
    title = "Flow training: the ELBO, a lower bound on log Z"
    step, value = _float_array(steps, 1), _float_array(elbo, 1)
    n = min(len(step), len(value))
    known = log_z is not None and math.isfinite(float(log_z))
    if not n:
        fig = _empty(title, "training step", "ELBO")
    else:
        keep = _decimate(n)
        step, value = step[:n][keep], value[:n][keep]
        fig = _style(go.Figure(), title, "training step", "ELBO")
        colour = SAMPLER_COLOURS.get("flow-exact", "#4B4B4B")
        fig.add_trace(go.Scatter(
            x=step, y=value, mode="lines", line={"width": 1, "color": colour}, opacity=0.35,
            name="ELBO per step", hovertemplate="ELBO %{y:.4g}<extra></extra>",
        ))  # fmt: skip
        fig.add_trace(go.Scatter(
            x=step, y=_smooth(value), mode="lines", line={"width": 2, "color": colour},
            name="moving average", hovertemplate="average %{y:.4g}<extra></extra>",
        ))  # fmt: skip
    if known:
        fig.add_hline(
            y=float(log_z), line={"dash": "dash", "color": "#4B4B4B"},
            annotation_text=f"exact log Z = {float(log_z):.4g}", annotation_position="top left",
        )  # fmt: skip
    return fig


def flow_latent_figure(points, magnetisation) -> go.Figure:
    """The flow's draws in two dimensions (``points [N, 2]``, a projection such as
    ``app.flow_training.latent_projection``), each coloured by the magnetisation ``mean(x)`` of
    the state it maps to: a flow that learned the target's modes shows them as coloured
    clusters."""
    title = "The flow's draws v = T(z), first two principal components"
    xy, colour = _float_array(points, 2), _float_array(magnetisation, 1)
    n = min(len(xy), len(colour))
    if not n or xy.shape[1] < 2:
        return _empty(title, "component 1", "component 2")
    fig = _style(go.Figure(), title, "component 1", "component 2")
    fig.add_trace(go.Scatter(
        x=xy[:n, 0], y=xy[:n, 1], mode="markers", name="draws",
        marker={"size": 6, "color": colour[:n], "colorscale": "RdBu", "cmin": -1.0, "cmax": 1.0,
                "colorbar": {"title": {"text": "mean(x)"}}, "opacity": 0.8},
        hovertemplate="mean(x) %{marker.color:.3f}<extra></extra>",
    ))  # fmt: skip
    fig.update_layout(hovermode="closest", showlegend=False)
    return fig


# ----------------------------------------------------------------------------- HTML export
def plotly_js() -> str:
    """The plotly.js bundle (about 4.8 MB) to embed once in a self-contained HTML page."""
    return get_plotlyjs()


@functools.cache
def plotly_js_gzip_base64() -> str:
    """``plotly_js()`` gzip-compressed and base64-encoded (about 1.9 MB instead of 4.8 MB), for
    a page that unpacks it with the browser's ``DecompressionStream`` (every current browser:
    Chrome 80, Firefox 113, Safari 16.4). Deterministic: no time stamp in the gzip header."""
    raw = gzip.compress(plotly_js().encode("utf-8"), compresslevel=9, mtime=0)
    return base64.b64encode(raw).decode("ascii")


def figure_json(fig: go.Figure) -> str:
    """``fig`` as JSON (numeric arrays base64-packed by plotly) that is safe inside an HTML
    ``<script type="application/json">``: no ``</`` can close the element early."""
    return fig.to_json().replace("</", "<\\/")


def figure_div(fig: go.Figure, div_id: str) -> str:
    """``fig`` as an HTML ``<div>`` plus its drawing script, for a page that embeds
    ``plotly_js()`` once (nothing is loaded from the network)."""
    height = int(fig.layout.height or _HEIGHT)
    return pio.to_html(
        fig,
        include_plotlyjs=False,
        full_html=False,
        config={"displaylogo": False, "responsive": True},
        div_id=div_id,
        default_height=f"{height}px",
    )


# ----------------------------------------------------------------------------- importance
#: Importance-sampling proposals drawn as their own series (not samplers).
PROPOSAL_COLOURS = {"field": "#4E79A7", "mean field": "#E15759"}


def importance_collapse_figure(
    curves: Mapping[str, tuple], n_samples: int | None = None
) -> go.Figure:
    """``ESS / N`` against the number of sites, one line per proposal, both axes log.

    ``curves[name] = (sites, ess_fraction)``, arrays of one length. ``n_samples`` draws the floor
    ``1 / N`` (one draw carries all the weight), where every line ends once the proposal has
    collapsed.
    """
    title = "Importance sampling: effective sample size against lattice size"
    x_label, y_label = "sites n", "Kish ESS / N"
    fig = go.Figure()
    for name, (sites, fraction) in _items(curves):
        x, y = _float_array(sites, 1), _float_array(fraction, 1)
        if x.size == 0 or x.size != y.size:
            continue
        fig.add_trace(
            go.Scatter(
                x=x,
                y=np.where(y > 0, y, np.nan),
                mode="lines+markers",
                name=str(name),
                line={"width": 2, "color": PROPOSAL_COLOURS.get(name, sampler_colour(name))},
                hovertemplate=f"{name}: %{{y:.3g}} at %{{x:,}} sites<extra></extra>",
            )
        )
    if not fig.data:
        return _empty(title, x_label, y_label)
    if n_samples:  # a trace, not add_hline: its annotation lands astray on a log axis
        every = np.concatenate([np.asarray(t.x, dtype=np.float64) for t in fig.data])
        fig.add_trace(
            go.Scatter(
                x=[np.nanmin(every), np.nanmax(every)],
                y=[1.0 / n_samples] * 2,
                mode="lines",
                name="1/N: one draw carries all the weight",
                line={"dash": "dash", "color": "#888888", "width": 1},
                hoverinfo="skip",
            )
        )
    _style(fig, title, x_label, y_label)
    fig.update_layout(hovermode="closest")
    fig.update_xaxes(type="log", dtick=1)
    fig.update_yaxes(type="log", dtick=1, exponentformat="power")
    return fig


def importance_marginals_figure(p_plus, p_plus_se, exact=None) -> go.Figure:
    """The importance estimate of ``P(x_i = +1)`` and its error bar as two images side by
    side (a third, the exact marginals, when given); ``[H, W]`` arrays (``[n]`` is one row)."""
    title = "Importance estimate of P(x = +1) and its error bar"
    panels = [("estimate", _float_array(p_plus), "P(x = +1)"),
              ("error bar (1 se)", _float_array(p_plus_se), "se")]  # fmt: skip
    if exact is not None:
        panels.append(("exact (enumerated)", _float_array(exact), "P(x = +1)"))
    panels = [(t, v[None, :] if v.ndim == 1 else v, z) for t, v, z in panels]
    if any(v.ndim != 2 or v.size == 0 for _, v, _ in panels):
        return _empty(title)
    fig = make_subplots(
        rows=1, cols=len(panels), subplot_titles=[t for t, _, _ in panels], horizontal_spacing=0.12
    )
    for c, (_, values, name) in enumerate(panels):
        probability = name != "se"
        right = fig.layout[f"xaxis{c + 1 if c else ''}"].domain[1]
        fig.add_trace(
            go.Heatmap(
                z=values,
                zmin=0.0 if probability else None,
                zmax=1.0 if probability else None,
                colorscale="Gray" if probability else "Viridis",
                colorbar={"x": right + 0.01, "len": 0.8, "thickness": 10},
                hovertemplate=f"row %{{y}}, col %{{x}}: {name} %{{z:.3f}}<extra></extra>",
            ),
            row=1,
            col=c + 1,
        )
    _style(fig, title)
    fig.update_layout(hovermode="closest", margin={"r": 60})
    # rows downwards as in an image; no ticks (the hover names the row and column)
    fig.update_yaxes(
        autorange="reversed", scaleanchor="x", showgrid=False, zeroline=False, showticklabels=False
    )
    fig.update_xaxes(showgrid=False, zeroline=False, showticklabels=False)
    for c in range(2, len(panels) + 1):
        fig.update_yaxes(scaleanchor=f"x{c}", row=1, col=c)
    return fig


# ----------------------------------------------------------------------------- pinned runs
#: Bar patterns that tell runs apart while every bar keeps its sampler's colour.
RUN_PATTERNS = ("", "/", ".", "x", "-", "|", "+", "\\")


def _run_name(name) -> str:
    # run names are user text: Plotly reads <a>, <b>, <br> in legends, so escape them
    return html.escape(str(name), quote=False)


def pinned_bars_figure(
    runs: Mapping[str, Mapping[str, float | None]], title: str, y_label: str
) -> go.Figure:
    """One value per sampler and run as grouped bars: ``runs[run name][sampler] = value``.

    Bars keep their sampler's colour; runs differ by pattern and are named in the legend.
    None or non-finite values show as "n/a" (a bar of height 0).
    """
    samplers = list(dict.fromkeys(n for values in runs.values() for n in values))
    if not samplers:
        return _empty(title, None, y_label)
    fig = go.Figure()
    for k, (run, values) in enumerate(runs.items()):
        y = np.array([_number(values.get(n)) for n in samplers])
        fig.add_trace(
            go.Bar(
                x=[sampler_label(n) for n in samplers],
                y=np.nan_to_num(y, nan=0.0),
                name=_run_name(run),
                marker={
                    "color": [sampler_colour(n) for n in samplers],
                    "pattern": {"shape": RUN_PATTERNS[k % len(RUN_PATTERNS)], "solidity": 0.4},
                    "line": {"color": "#333333", "width": 1},
                },
                text=["n/a" if math.isnan(v) else f"{v:.3g}" for v in y],
                textposition="outside",
                hovertemplate=f"{_run_name(run)}, %{{x}}: %{{text}}<extra></extra>",
            )
        )
    _style(fig, title, None, y_label)
    fig.update_layout(barmode="group", hovermode="closest")
    fig.update_yaxes(rangemode="tozero")
    return fig


def pinned_weights_figure(runs: Mapping[str, np.ndarray | None]) -> go.Figure:
    """LSB 1's softmax weights ``[4]`` of several runs as grouped bars, one group per component."""
    per_run = {
        run: dict(zip(COMPONENTS, _float_array(w).reshape(-1), strict=False))
        for run, w in runs.items()
        if w is not None
    }
    return pinned_bars_figure(per_run, "LSB 1: mixture weights by run", "weight")


# ----------------------------------------------------------------------------- annealing
def annealing_energy_figure(
    curves: Mapping[str, Mapping[str, np.ndarray]], exact_energy: float | None = None
) -> go.Figure:
    """Annealing runs against sweeps: the energy ``-log p~`` (top) and its relative gap to the
    exact MAP (bottom, log y), one colour per sampler.

    ``curves[name]`` holds ``sweeps [R]``, ``lowest [R]`` (the lowest energy over chains so far,
    solid) and ``current [R]`` (one chain's energy, dotted); ``exact_energy``, the MAP's energy
    from the minimum cut, is a dashed line on top and the zero of the gaps below (a gap of
    exactly 0 is left off the log axis: the line stops where it reaches the optimum).
    """
    title = "Annealing: energy against sweeps"
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.6, 0.4]
    )
    for name, curve in _items(curves):
        sweeps = _float_array(curve.get("sweeps", ()), 1)
        lowest = _float_array(curve.get("lowest", ()), 1)
        current = _float_array(curve.get("current", ()), 1)
        if sweeps.size == 0 or lowest.size != sweeps.size:
            continue
        keep = _decimate(sweeps.size)
        label, colour = sampler_label(name), sampler_colour(name)
        if current.size == sweeps.size:
            fig.add_trace(
                go.Scatter(
                    x=sweeps[keep], y=current[keep], mode="lines", legendgroup=name,
                    showlegend=False, line={"width": 1, "color": colour, "dash": "dot"},
                    name=f"{label} (current)",
                    hovertemplate=f"{label} current: %{{y:.6g}}<extra></extra>",
                ),
                row=1, col=1,
            )  # fmt: skip
        fig.add_trace(
            go.Scatter(
                x=sweeps[keep], y=lowest[keep], mode="lines", legendgroup=name, name=label,
                line={"width": 2, "color": colour},
                hovertemplate=f"{label} lowest: %{{y:.6g}}<extra></extra>",
            ),
            row=1, col=1,
        )  # fmt: skip
        if exact_energy is not None and math.isfinite(exact_energy) and exact_energy != 0:
            gap = (lowest - exact_energy) / abs(exact_energy)
            fig.add_trace(
                go.Scatter(
                    x=sweeps[keep], y=np.where(gap > 0, gap, np.nan)[keep], mode="lines",
                    legendgroup=name, showlegend=False, line={"width": 2, "color": colour},
                    name=f"{label} gap", hovertemplate=f"{label} gap: %{{y:.2e}}<extra></extra>",
                ),
                row=2, col=1,
            )  # fmt: skip
    if not fig.data:
        return _empty(title, "sweeps", "energy −log p̃")
    if exact_energy is not None and math.isfinite(exact_energy):
        fig.add_hline(
            y=exact_energy, line={"dash": "dash", "color": "#333333", "width": 1.5},
            annotation_text="exact MAP (minimum cut)", annotation_position="top right",
            row=1, col=1,
        )  # fmt: skip
    _style(fig, title)
    fig.update_layout(height=_HEIGHT + 180)
    fig.update_yaxes(title_text="energy −log p̃", row=1, col=1)
    fig.update_yaxes(title_text="relative gap", type="log", exponentformat="power", row=2, col=1)
    fig.update_xaxes(title_text="sweeps", row=2, col=1)
    return fig


# --------- tempering
def _temperature_colours(n: int) -> list[str]:
    """Cold (beta = 1) blue to hot red, one colour per replica."""
    from plotly.colors import sample_colorscale

    return sample_colorscale("Bluered", [r / max(n - 1, 1) for r in range(n)])


def tempering_ladder_figure(betas, swap_rates, ladder_history=None) -> go.Figure:
    """Left: the inverse temperatures ``beta_r`` against replica ``r`` (and, faint, the ladder
    after each adaptation during burn-in); right: the swap acceptance of each neighbour pair."""
    title = "Ladder and swap rates"
    betas, rates = _float_array(betas, 1), _float_array(swap_rates, 1)
    if betas.size < 2:
        return _empty(title, "replica r", "beta_r")
    fig = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.12,
        subplot_titles=("inverse temperature of each replica", "swaps accepted per pair"),
    )  # fmt: skip
    replicas = np.arange(betas.size)
    history = [_float_array(b, 1) for b in (ladder_history or [])]
    for k, past in enumerate(history[:-1] if len(history) > 1 else []):
        if past.size == betas.size:
            fig.add_trace(
                go.Scatter(
                    x=replicas, y=past, mode="lines", showlegend=k == 0,
                    name="during burn-in (adapting)", line={"color": "#BBBBBB", "width": 1},
                    legendgroup="history", hoverinfo="skip",
                ),
                row=1, col=1,
            )  # fmt: skip
    colours = _temperature_colours(betas.size)
    fig.add_trace(
        go.Scatter(
            x=replicas, y=betas, mode="lines+markers", name="ladder sampled with",
            marker={"color": colours, "size": 10}, line={"color": "#444444"},
            hovertemplate="replica %{x}: beta = %{y:.3f}<extra></extra>",
        ),
        row=1, col=1,
    )  # fmt: skip
    pairs = [f"{r}↔{r + 1}" for r in range(betas.size - 1)]
    fig.add_trace(
        go.Bar(
            x=pairs, y=rates[: len(pairs)], name="swap acceptance", marker={"color": "#4E79A7"},
            hovertemplate="pair %{x}: %{y:.2f}<extra></extra>", showlegend=False,
        ),
        row=1, col=2,
    )  # fmt: skip
    _style(fig, title)
    fig.update_layout(
        hovermode="closest",
        legend={"x": 0.01, "y": 0.02, "xanchor": "left", "yanchor": "bottom", "orientation": "v"},
    )
    fig.update_xaxes(title_text="replica r (0 = cold)", row=1, col=1)
    fig.update_yaxes(title_text="beta_r", range=[0, 1.05], row=1, col=1)
    fig.update_xaxes(title_text="neighbour pair", row=1, col=2)
    fig.update_yaxes(title_text="accepted / proposed", range=[0, 1], row=1, col=2)
    return fig


def replica_magnetisation_figure(magnetisation, betas) -> go.Figure:
    """Each replica's ``m / n`` against sweeps (``magnetisation [T, R]``, one chain), one row per
    replica from the cold one (top) to the hottest: the hot replicas wander between the modes,
    the cold one follows through exchanges."""
    title = "Magnetisation of each replica"
    x_label, y_label = "sweep", "m / n"
    m, betas = _float_array(magnetisation, 2), _float_array(betas, 1)
    if m.size == 0:
        return _empty(title, x_label, y_label)
    n = m.shape[1]
    keep = _decimate(m.shape[0])
    sweeps = np.arange(1, m.shape[0] + 1)[keep]
    colours = _temperature_colours(n)
    fig = make_subplots(rows=n, cols=1, shared_xaxes=True, vertical_spacing=0.2 / n)
    for r in range(n):
        beta = betas[r] if r < betas.size else math.nan
        fig.add_trace(
            go.Scatter(
                x=sweeps, y=m[keep, r], mode="lines", name=f"β = {beta:.2f}",
                line={"color": colours[r], "width": 1.2}, showlegend=False,
                hovertemplate=f"β = {beta:.2f}, sweep %{{x}}: m/n = %{{y:.2f}}<extra></extra>",
            ),
            row=r + 1, col=1,
        )  # fmt: skip
        fig.update_yaxes(
            title_text=f"β = {beta:.2f}", range=[-1.1, 1.1], tickvals=[-1, 0, 1],
            title_font={"size": 11}, row=r + 1, col=1,
        )  # fmt: skip
    _style(fig, title)
    fig.update_layout(height=110 + 70 * n, hovermode="closest")
    fig.update_xaxes(title_text=x_label, row=n, col=1)
    return fig


def cold_versus_single_figure(cold, single, sampler: str, threshold: float = 0.5) -> go.Figure:
    """``m / n`` of the cold chain of parallel tempering and of a single chain of ``sampler``
    against sweeps, with the mode thresholds ``+-threshold`` dashed."""
    title = f"Cold chain of tempering against a single chain ({sampler_label(sampler)})"
    x_label, y_label = "sweep", "m / n"
    lines = {"parallel tempering, cold chain": cold, "single chain": single}
    arrays = {name: _float_array(values, 1) for name, values in lines.items()}
    if all(a.size == 0 for a in arrays.values()):
        return _empty(title, x_label, y_label)
    fig = go.Figure()
    styles = {
        "parallel tempering, cold chain": {"color": sampler_colour(sampler), "width": 1.5},
        "single chain": {"color": "#4B4B4B", "width": 1.5, "dash": "dot"},
    }
    for name, values in arrays.items():
        keep = _decimate(values.size)
        sweeps = np.arange(1, values.size + 1)[keep]
        fig.add_trace(
            go.Scatter(x=sweeps, y=values[keep], mode="lines", name=name, line=styles[name])
        )
    for level in (threshold, -threshold):
        fig.add_hline(y=level, line={"color": "#999999", "width": 1, "dash": "dash"})
    _style(fig, title, x_label, y_label)
    fig.update_yaxes(range=[-1.05, 1.05])
    fig.update_layout(hovermode="closest")
    return fig
