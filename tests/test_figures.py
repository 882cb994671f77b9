"""Figures of lsbcore.studies.figures: traces, axis types, empty and NaN input, band quantiles."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

import lsbcore
from lsbcore import make_balancing
from lsbcore.balancing.functions import MixtureBalancing, NetworkBalancing
from lsbcore.studies.figures import (
    COMPONENTS,
    SAMPLER_COLOURS,
    SAMPLER_LABELS,
    acf_figure,
    balancing_curves,
    balancing_figure,
    band_figure,
    ess_figure,
    figure_div,
    loss_figure,
    plotly_js,
    sampler_colour,
    sampler_label,
    weights_area_figure,
    weights_bar_figure,
)

ALL = lsbcore.SAMPLERS  # the registry: every registered sampler has a colour and a label


def is_empty(fig: go.Figure) -> bool:
    texts = [a.text for a in fig.layout.annotations]
    return not fig.data and "no data yet" in texts


def serialises(fig: go.Figure) -> None:
    """The figure turns into strict JSON (plotly writes NaN as null)."""
    json.loads(fig.to_json(), parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))


def test_colours_and_labels_cover_every_sampler():
    assert set(SAMPLER_COLOURS) == set(ALL) == set(SAMPLER_LABELS)
    assert len(set(SAMPLER_COLOURS.values())) == len(ALL)
    assert SAMPLER_LABELS["barker"] == "t/(1+t)"
    assert SAMPLER_LABELS["sqrt"] == "sqrt(t)"
    assert SAMPLER_LABELS["checkerboard"] == "Checkerboard Gibbs"
    assert sampler_colour("sqrt") == SAMPLER_COLOURS["sqrt"]
    assert sampler_colour("mystery") == sampler_colour("mystery")  # stable fallback
    assert sampler_label("mystery") == "mystery"


# ----------------------------------------------------------------------------- band
def test_band_figure_traces_and_quantiles():
    rng = np.random.default_rng(0)
    x = np.arange(50)
    a = rng.normal(size=(50, 7))
    b = rng.normal(size=(50, 3)) + 5
    fig = band_figure({"barker": (x, a), "lsb2": (x, b)}, "t", "m")
    assert isinstance(fig, go.Figure)
    assert len(fig.data) == 6  # upper, lower, mean per sampler
    upper, lower, mean = fig.data[:3]
    np.testing.assert_allclose(mean.y, a.mean(axis=1))
    np.testing.assert_allclose(lower.y, np.quantile(a, 0.025, axis=1))
    np.testing.assert_allclose(upper.y, np.quantile(a, 0.975, axis=1))
    assert lower.fill == "tonexty"
    assert mean.name == "t/(1+t)" and fig.data[5].name == "LSB 2"
    assert mean.line.color == SAMPLER_COLOURS["barker"]
    assert fig.layout.xaxis.title.text == "iteration"
    assert fig.layout.yaxis.title.text == "m"
    serialises(fig)


def test_band_figure_known_quantiles_for_other_band():
    values = np.tile(np.arange(11, dtype=float), (3, 1))  # each row: 0..10
    fig = band_figure({"min": (np.arange(3), values)}, "t", "y", band=0.8)
    upper, lower, mean = fig.data
    np.testing.assert_allclose(lower.y, [1.0, 1.0, 1.0])
    np.testing.assert_allclose(upper.y, [9.0, 9.0, 9.0])
    np.testing.assert_allclose(mean.y, [5.0, 5.0, 5.0])


def test_band_figure_nan_and_one_dimensional_values():
    values = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan], [np.inf, 2.0, 2.0]])
    fig = band_figure({"sqrt": (np.arange(3), values), "max": ([0, 1], [1.0, 2.0])}, "t", "y")
    mean = fig.data[2]
    assert mean.y[0] == pytest.approx(2.0)
    assert np.isnan(mean.y[1])
    assert mean.y[2] == pytest.approx(2.0)  # inf is treated as missing
    assert len(fig.data) == 6
    serialises(fig)


def test_band_figure_empty_input_and_bad_band():
    assert is_empty(band_figure({}, "t", "y"))
    assert is_empty(band_figure({"barker": (np.zeros(0), np.zeros((0, 4)))}, "t", "y"))
    with pytest.raises(ValueError, match="band"):
        band_figure({}, "t", "y", band=1.5)


def test_band_figure_decimates_long_series():
    x = np.arange(30_001)
    fig = band_figure({"barker": (x, np.ones((x.size, 2)))}, "t", "y")
    assert len(fig.data[2].x) <= 5001
    assert fig.data[2].x[-1] == 30_000


# ----------------------------------------------------------------------------- balancing
def balanced_functions() -> dict:
    lsb1 = MixtureBalancing(torch.tensor([0.3, -1.2, 2.0, 0.1], dtype=torch.float64))
    lsb2 = NetworkBalancing(hidden=10, generator=torch.Generator().manual_seed(3))
    out = {name: make_balancing(name) for name in ("barker", "sqrt", "min", "max")}
    out.update(lsb1=lsb1, lsb2=lsb2)
    return out


def test_balancing_curves_reflected_equals_g_for_balanced_functions():
    t, g, reflected = balancing_curves(balanced_functions())
    np.testing.assert_allclose(t, np.logspace(-4, 4, 200))
    assert set(g) == set(reflected) == {"barker", "sqrt", "min", "max", "lsb1", "lsb2"}
    for name in g:
        assert g[name].shape == t.shape
        np.testing.assert_allclose(reflected[name], g[name], rtol=1e-10, err_msg=name)
    np.testing.assert_allclose(g["sqrt"], np.sqrt(t), rtol=1e-12)


def test_balancing_curves_custom_grid_and_bad_grid():
    t, g, _ = balancing_curves({"max": make_balancing("max")}, t=[0.5, 1.0, 2.0])
    np.testing.assert_allclose(g["max"], [1.0, 1.0, 2.0])
    with pytest.raises(ValueError):
        balancing_curves({}, t=[-1.0, 1.0])


def test_balancing_figure_log_axes_and_dashed_overlay():
    t, g, reflected = balancing_curves(balanced_functions())
    fig = balancing_figure(t, g, reflected)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert len(fig.data) == 12
    overlay = [tr for tr in fig.data if tr.name.endswith("t g(1/t)")]
    assert len(overlay) == 6 and all(tr.line.color == "#222222" for tr in overlay)
    assert all(tr.line.width < min(x.line.width for x in fig.data[:6]) for tr in overlay)
    solid = balancing_figure(t, g)
    assert len(solid.data) == 6
    serialises(fig)


def test_every_g_curve_stays_visible_where_functions_coincide():
    """Six functions, six distinguishable lines: t/(1+t) hid under min(1,t) and sqrt(t) under
    LSB 1 when all were solid lines of one width."""
    t, g, _ = balancing_curves(balanced_functions())
    g["lsb1"] = g["sqrt"].copy()  # LSB 1 that learned sqrt(t): the very same curve
    fig = balancing_figure(t, g)
    looks = [(tr.line.dash, tr.line.width, tr.marker.symbol) for tr in fig.data]
    assert len(set(looks)) == len(looks) == 6
    widths = [tr.line.width for tr in fig.data]
    assert widths == sorted(widths, reverse=True)  # the wide ones underneath
    by_name = {tr.name: tr for tr in fig.data}
    lsb1, sqrt = by_name[sampler_label("lsb1")], by_name[sampler_label("sqrt")]
    assert lsb1.line.width < sqrt.line.width and lsb1.marker.symbol is not None
    ranks = sorted(fig.data, key=lambda tr: tr.legendrank)
    assert [tr.name for tr in ranks] == [sampler_label(n) for n in g]  # legend order kept


def test_balancing_figure_empty_and_bad_values():
    assert is_empty(balancing_figure(np.zeros(0), {}))
    assert is_empty(balancing_figure(np.logspace(-1, 1, 5), {}))
    t = np.array([0.1, 1.0, 10.0])
    fig = balancing_figure(t, {"barker": np.array([np.nan, -1.0, 0.5])})
    assert len(fig.data) == 1
    assert np.isnan(fig.data[0].y[0]) and np.isnan(fig.data[0].y[1])
    serialises(fig)


# ----------------------------------------------------------------------------- weights
def test_weights_area_figure_stacks_four_components():
    steps = np.arange(0, 100, 10)
    w = np.full((10, 4), 0.25)
    fig = weights_area_figure(steps, w)
    assert len(fig.data) == 4
    assert [tr.name for tr in fig.data] == [SAMPLER_LABELS[c] for c in COMPONENTS]
    assert all(tr.stackgroup == "weights" for tr in fig.data)
    assert fig.data[1].line.color == SAMPLER_COLOURS["sqrt"]
    assert tuple(fig.layout.yaxis.range) == (0, 1)


def test_weights_figures_empty_and_nan():
    assert is_empty(weights_area_figure(np.zeros(0), np.zeros((0, 4))))
    assert is_empty(weights_area_figure(np.arange(3), np.zeros((0, 4))))
    fig = weights_area_figure(np.arange(2), np.array([[np.nan, 0.5, 0.25, 0.25], [0.1] * 4]))
    serialises(fig)
    assert is_empty(weights_bar_figure(np.zeros(0)))
    bar = weights_bar_figure(np.array([0.1, np.nan, 0.3, 0.6]))
    assert len(bar.data) == 1 and list(bar.data[0].text)[1] == "n/a"
    assert list(bar.data[0].x) == [SAMPLER_LABELS[c] for c in COMPONENTS]
    serialises(bar)


# ----------------------------------------------------------------------------- acf, ess
def test_acf_figure_mean_over_chains_and_threshold_line():
    rho = np.stack([np.linspace(1, 0, 11), np.linspace(1, 0.5, 11)])
    fig = acf_figure({"barker": rho, "lsb1": rho[0]}, max_lag=5)
    assert len(fig.data) == 2
    np.testing.assert_allclose(fig.data[0].y, rho.mean(axis=0)[:6])
    np.testing.assert_allclose(fig.data[0].x, np.arange(6))
    assert any(shape.y0 == 0.05 and shape.y1 == 0.05 for shape in fig.layout.shapes)
    assert is_empty(acf_figure({}))
    nan = acf_figure({"max": np.full((2, 4), np.nan)})
    serialises(nan)


def test_ess_figure_two_panels_and_missing_values():
    summaries = {
        "barker": {"ess_paper_mean": 2.4, "ess_paper_std": 0.9, "ess_bulk": 40.0},
        "lsb2": {"ess_paper_mean": None, "ess_paper_std": None, "ess_bulk": float("nan")},
        "max": {},
    }
    fig = ess_figure(summaries)
    assert len(fig.data) == 2
    paper, bulk = fig.data
    assert all(tr.type == "bar" for tr in fig.data)
    assert list(paper.x) == ["t/(1+t)", "LSB 2", "max(1,t)"]
    assert paper.y[0] == pytest.approx(2.4)
    assert paper.error_y.array[0] == pytest.approx(0.9)
    assert list(paper.text)[1] == "n/a" and list(bulk.text)[1] == "n/a"
    assert paper.marker.color[0] == SAMPLER_COLOURS["barker"]
    serialises(fig)
    assert is_empty(ess_figure({}))


# ----------------------------------------------------------------------------- learning
def test_loss_figure_rows_and_empty():
    history = {
        "lsb1": {"step": np.arange(200), "loss": np.sin(np.arange(200.0)), "eta": np.ones(200)},
        "lsb2": {"step": np.arange(5), "loss": np.array([1, np.nan, 2, 3, 4.0]), "eta": np.ones(5)},
    }
    fig = loss_figure(history)
    assert len(fig.data) == 6  # raw loss, smoothed loss, eta per sampler
    assert fig.layout.yaxis.title.text == "loss" and fig.layout.yaxis2.title.text == "eta"
    serialises(fig)
    assert is_empty(loss_figure({}))
    assert is_empty(loss_figure({"lsb1": {"step": [], "loss": [], "eta": []}}))


# ----------------------------------------------------------------------------- HTML export
def test_figure_div_and_bundle_for_offline_pages():
    div = figure_div(weights_bar_figure(np.full(4, 0.25)), "fig-7")
    assert 'id="fig-7"' in div and "Plotly.newPlot" in div
    assert "<script src" not in div and "plotly.js v" not in div
    assert plotly_js().lstrip().startswith("/**") and "plotly.js v" in plotly_js()[:200]


def test_band_figure_draws_at_most_max_points_in_float32():
    """The report draws 1,000 points a series: the whole run's 32,000 at full resolution
    made most of a 9 MB report."""
    x = np.arange(32_001)
    values = np.random.default_rng(0).normal(size=(32_001, 4))
    fig = band_figure({"barker": (x, values)}, "t", "y", max_points=1000)
    for trace in fig.data:
        assert len(trace.x) <= 1001 and trace.x[-1] == 32_000  # the last point is kept
        assert np.asarray(trace.y).dtype == np.float32
    assert len(band_figure({"barker": (x, values)}, "t", "y").data[0].x) > 4000  # the app: 5,000
    with pytest.raises(ValueError, match="max_points"):
        band_figure({}, "t", "y", max_points=1)
