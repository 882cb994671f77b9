"""The dashboard's views as plain functions: typical data in, images / figures / tables out;
empty data in, nothing (or an empty list) out and no exception."""

from __future__ import annotations

import io
import json
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from PIL import Image

import lsbcore
from app import config as cfgmod
from app.state import SiteStep
from app.views import (
    about,
    balancing,
    chains,
    convergence,
    export,
    mixing,
    pixels,
    posterior,
    proposal,
    segmentation,
    weights,
)

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """As the app does: tiny tensor ops, so intra-op threads only add hand-offs."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def spins(*shape) -> np.ndarray:
    return np.where(RNG.random(shape) < 0.5, -1.0, 1.0)


def serialises(fig: go.Figure) -> dict:
    return json.loads(fig.to_json())


# ----------------------------------------------------------------------------- pixels
def test_spins_are_white_for_object_and_black_for_background():
    out = pixels.spins(np.array([[1.0, -1.0]]))
    assert out.dtype == np.uint8 and out.tolist() == [[255, 0]]


def test_upscaling_turns_each_site_into_a_square_block():
    image = np.array([[0, 255]], dtype=np.uint8)
    big = pixels.upscale(image, 3)
    assert big.shape == (3, 6) and (big[:, :3] == 0).all() and (big[:, 3:] == 255).all()


def test_colour_maps_and_diverging_fields_give_rgb_uint8():
    values = np.linspace(-2, 3, 12).reshape(3, 4)
    for image in (pixels.colour(values, -2, 3), pixels.diverging(values)):
        assert image.shape == (3, 4, 3) and image.dtype == np.uint8
    # white at zero for the diverging map, NaN does not raise
    assert (pixels.diverging(np.zeros((1, 1)))[0, 0] >= 240).all()
    assert pixels.gray(np.array([np.nan]))[0] == 128


def test_data_uri_is_an_inline_png_of_the_image():
    image = pixels.spins(spins(5, 7))
    uri = pixels.data_uri(image)
    assert uri.startswith("data:image/png;base64,")
    import base64

    decoded = np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))))
    assert np.array_equal(decoded, image)


# ----------------------------------------------------------------------------- chains
def test_chain_panels_put_the_shown_chains_and_the_marginal_side_by_side():
    states = {"barker": spins(6, 10, 10), "lsb1": spins(6, 10, 10)}
    marginals = {"barker": RNG.random((10, 10)), "lsb1": None}
    panels = chains.chain_panels(states, marginals, n_show=3, side=40)
    assert [p.name for p in panels] == ["barker", "lsb1"]
    factor = pixels.scale_for((10, 10), 40)
    gap = max(1, factor // 2)
    assert panels[0].image.shape == (10 * factor, 4 * 10 * factor + 3 * gap)  # 3 chains + marginal
    assert panels[1].image.shape == (10 * factor, 3 * 10 * factor + 2 * gap)
    assert "marginal" in panels[0].caption and "marginal" not in panels[1].caption
    assert panels[0].image.dtype == np.uint8


def test_chain_captions_count_every_chain_not_only_those_shown():
    """With 8 chains and 4 shown the caption said "chains 1-4 of 4" (the snapshot holds only
    the shown ones); the sampler's own count is what it must say."""
    shown = {"barker": spins(4, 5, 5), "sqrt": spins(1, 5, 5)}
    panels = chains.chain_panels(shown, n_show=4, totals={"barker": 8, "sqrt": 8})
    assert panels[0].caption.startswith("t/(1+t): chains 1–4 of 8")
    assert panels[1].caption.startswith("sqrt(t): chain 1 of 8")
    alone = chains.chain_panels({"barker": spins(3, 5, 5)}, n_show=4)
    assert alone[0].caption.startswith("t/(1+t): chains 1–3 of 3")


def test_chain_panels_of_nothing_are_empty():
    assert chains.chain_panels({}) == []
    assert chains.chain_panels({"barker": np.zeros((0, 4, 4))}) == []


# ----------------------------------------------------------------------------- proposal
def site_step(h=8, w=8, site=None, uniform=False, accepted=True) -> SiteStep:
    q = np.full((h, w), 1.0 / (h * w)) if uniform else RNG.random((h, w)) + 1e-3
    q = q / q.sum()
    t = q * RNG.random((h, w))
    a = None if site is None else 0.5
    return SiteStep(spins(h, w), q, t, site, a, float(t.sum()), None if site is None else accepted)


def test_proposal_figure_shows_state_and_log_q_per_sampler_with_a_shared_scale():
    maps = {"barker": site_step(site=(2, 3)), "gibbs": site_step(uniform=True)}
    fig = proposal.proposal_figure(maps, "Q")
    heatmaps = [t for t in fig.data if t.type == "heatmap"]
    assert len(heatmaps) == 4  # state and Q for each sampler
    assert all(h.coloraxis == "coloraxis" for h in heatmaps[1::2])
    # the proposed site is marked in both panels of the sampler that stepped, only there
    markers = [t for t in fig.data if t.type == "scatter"]
    assert len(markers) == 2 and markers[0].x == (3,) and markers[0].y == (2,)
    assert markers[0].marker.symbol == "square-open"  # accepted
    rejected = proposal.proposal_figure({"barker": site_step(site=(2, 3), accepted=False)}, "Q")
    assert [t.marker.symbol for t in rejected.data if t.type == "scatter"] == ["x-open"] * 2
    zmax = fig.layout.coloraxis.cmax
    assert zmax == pytest.approx(np.log10(maps["barker"].q.max()))
    serialises(fig)


def test_proposal_acceptance_map_is_t_over_q_within_zero_one():
    step = site_step()
    a = proposal.quantity_map(step, "A")
    assert np.allclose(a, step.t / step.q) and (a >= 0).all() and (a <= 1).all()
    fig = proposal.proposal_figure({"barker": step}, "A")
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0.0, 1.0)


def test_large_lattices_are_shown_in_blocks_whose_probabilities_add_up():
    step = site_step(200, 150)
    pooled = proposal.quantity_map(step, "Q", factor=3)
    assert pooled.shape == (67, 50)
    assert np.log10(np.nansum(10**pooled)) == pytest.approx(0.0, abs=1e-9)  # still sums to 1
    fig = proposal.proposal_figure({"sqrt": step})
    assert max(np.shape(fig.data[1].z)) <= proposal.MAX_SIDE


def test_proposal_of_nothing_is_none_and_rows_say_what_was_proposed_and_decided():
    assert proposal.proposal_figure({}) is None
    maps = {
        "barker": site_step(site=(1, 1)),
        "gibbs": site_step(site=(2, 0), uniform=True, accepted=False),
    }
    rows = proposal.step_rows(maps)
    assert rows[0]["proposed site (row, col)"] == "(1, 1)" and rows[0]["A at that site"] == 0.5
    assert rows[0]["outcome"] == "accepted" and rows[1]["outcome"] == "rejected"
    assert rows[1]["proposal"] == "uniform" and rows[0]["proposal"] == "informed"
    before_any_step = proposal.step_rows({"barker": site_step()}, after_step=False)
    assert "proposed site (row, col)" not in before_any_step[0]


def test_block_samplers_are_left_out_of_the_maps_and_the_table_with_a_note():
    sweep = SiteStep(spins(8, 8), None, None, None, None, float("nan"), True, 17)
    maps = {"barker": site_step(site=(1, 1)), "checkerboard": sweep}
    fig = proposal.proposal_figure(maps, "Q")
    assert len([t for t in fig.data if t.type == "heatmap"]) == 2  # barker only
    assert [r["sampler"] for r in proposal.step_rows(maps)] == ["t/(1+t)"]
    assert proposal.proposal_figure({"checkerboard": sweep}) is None
    note = proposal.block_note(["checkerboard"], maps)
    assert "Checkerboard Gibbs (17 sites changed)" in note and "sweep" in note
    assert "changed" not in proposal.block_note(["checkerboard"])


# ----------------------------------------------------------------------------- balancing
def test_balancing_figure_draws_every_function_and_its_reflection_on_request():
    funcs = {n: lsbcore.make_balancing(n) for n in ("barker", "sqrt", "lsb1")}
    plain = balancing.balancing_figure(funcs, overlay=False, t=balancing.t_grid(10.0))
    with_reflection = balancing.balancing_figure(funcs, overlay=True, t=balancing.t_grid(10.0))
    assert isinstance(plain, go.Figure) and len(with_reflection.data) > len(plain.data)
    assert plain.layout.xaxis.type == "log" and plain.layout.yaxis.type == "log"
    serialises(with_reflection)
    assert balancing.balancing_figure({}) is None


def test_t_grid_covers_the_posterior_ratios_within_one_to_eight_decades():
    assert balancing.t_grid(0.1).max() == pytest.approx(10.0)
    assert balancing.t_grid(2 * np.log(10) * 3).max() == pytest.approx(1e6)
    assert balancing.t_grid(1e4).max() == pytest.approx(1e8)


def test_loss_figure_needs_a_history():
    assert balancing.loss_figure({}) is None
    assert balancing.loss_figure({"lsb1": {"step": np.array([]), "loss": np.array([])}}) is None
    history = {"step": np.arange(5), "loss": RNG.random(5), "eta": RNG.random(5)}
    assert isinstance(balancing.loss_figure({"lsb1": history}), go.Figure)


# ----------------------------------------------------------------------------- weights
def test_weights_figures_show_the_history_and_the_current_weights():
    history = {"step": np.arange(10), "weights": np.full((10, 4), 0.25)}
    area, bars = weights.weights_figures(history, np.array([0.1, 0.2, 0.3, 0.4]))
    assert isinstance(area, go.Figure) and isinstance(bars, go.Figure)
    serialises(area)


def test_weights_figures_without_data_are_none():
    assert weights.weights_figures(None, None) == (None, None)
    empty = {"step": np.zeros(0), "weights": np.zeros((0, 4))}
    area, bars = weights.weights_figures(empty, np.full(4, 0.25))
    assert area is None and isinstance(bars, go.Figure)


# ----------------------------------------------------------------------------- convergence
def trace_arrays(n=40, chains_=3, with_accuracy=True) -> dict:
    out = {
        "step": np.arange(n) * 10,
        "target_evals": np.arange(n) * 50,
        "accept_rate": np.linspace(1, 0.8, n),
        "magnetisation": RNG.normal(size=(n, chains_)),
        "log_p": RNG.normal(size=(n, chains_)),
    }
    if with_accuracy:
        out["accuracy"] = RNG.random((n, chains_))
    return out


def test_convergence_has_four_panels_with_truth_and_three_without():
    figs = convergence.convergence_figures({"barker": trace_arrays(), "sqrt": trace_arrays()})
    assert len(figs) == 4 and all(isinstance(f, go.Figure) for f in figs)
    mixed = {"barker": trace_arrays(), "sqrt": trace_arrays(with_accuracy=False)}
    assert len(convergence.convergence_figures(mixed)) == 3


def test_convergence_marks_burn_in_and_follows_the_chosen_axis():
    figs = convergence.convergence_figures({"lsb1": trace_arrays()}, "iterations", burn_in=100)
    assert any(s.x0 == 100 for s in figs[0].layout.shapes)
    by_evals = convergence.convergence_figures(
        {"lsb1": trace_arrays()}, "target evaluations per chain", burn_in=100
    )
    assert not by_evals[0].layout.shapes  # no single burn-in x on the evaluations axis
    assert by_evals[0].layout.xaxis.title.text == "target evaluations per chain"
    xs = [t.x for t in by_evals[0].data if len(t.x)]
    assert max(max(x) for x in xs) == 39 * 50


def test_convergence_offers_sweeps_and_falls_back_to_iterations_without_them():
    single = trace_arrays()
    single["sweeps"] = single["step"] / 64
    block = trace_arrays()
    block["sweeps"] = block["step"].astype(float)  # one sweep per step
    figs = convergence.convergence_figures({"barker": single, "checkerboard": block}, "sweeps")
    assert figs[0].layout.xaxis.title.text.startswith("sweeps")
    assert max(max(t.x) for t in figs[0].data if len(t.x)) == 390
    without = convergence.convergence_figures({"barker": trace_arrays()}, "sweeps")
    assert without[0].layout.xaxis.title.text == "iteration"


def test_long_traces_are_thinned_for_display():
    figs = convergence.convergence_figures({"barker": trace_arrays(n=5000)}, max_points=100)
    assert all(len(t.x) <= 100 for t in figs[0].data)


def test_convergence_of_nothing_is_empty():
    assert convergence.convergence_figures({}) == []
    assert convergence.convergence_figures({"barker": trace_arrays(n=0)}) == []


# ----------------------------------------------------------------------------- mixing
def test_mixing_view_gives_acf_ess_and_a_row_per_sampler():
    series = {"barker": RNG.normal(size=(4, 1200)), "max": np.cumsum(RNG.normal(size=(4, 1200)), 1)}
    view = mixing.mixing_view(series, max_lag=500)
    assert isinstance(view.acf, go.Figure) and isinstance(view.ess, go.Figure)
    assert view.max_lag == 500 and view.n_draws == 1200
    assert [r["sampler"] for r in view.rows] == ["t/(1+t)", "max(1,t)"]
    white = view.summaries["barker"]["ess_paper_mean"]
    walk = view.summaries["max"]["ess_paper_mean"]
    assert white > 100 > walk  # i.i.d. noise mixes, a random walk does not


def test_chains_of_different_posteriors_get_their_own_ess_and_no_rhat():
    rng = np.random.default_rng(3)
    series = {"barker": rng.normal(size=(4, 800)) + np.arange(4)[:, None]}  # shifted chains
    pooled = mixing.mixing_view(series, max_lag=100, shared=True)
    assert pooled.summaries["barker"]["rhat"] > 1.01 and "R-hat" in pooled.rows[0]
    assert mixing.rhat_warnings(pooled.summaries) == [
        "t/(1+t) (R-hat " + (f"{pooled.summaries['barker']['rhat']:.3f})")
    ]
    own = mixing.mixing_view(series, max_lag=100, shared=False)
    assert "R-hat" not in own.rows[0] and own.summaries["barker"]["rhat"] is None
    per_chain = lsbcore.ess_bulk_per_chain(series["barker"])
    assert own.rows[0]["bulk ESS per chain"] == f"{per_chain.mean():.1f} ± {per_chain.std():.1f}"
    assert own.summaries["barker"]["ess_bulk"] == pytest.approx(per_chain.mean())
    assert mixing.rhat_warnings(own.summaries) == []
    assert "per chain" in own.ess.layout.annotations[1].text


def test_short_mixing_phases_clip_the_window_and_tiny_ones_give_nothing():
    view = mixing.mixing_view({"sqrt": RNG.normal(size=(3, 60))}, max_lag=500)
    assert view.max_lag == 30  # half the phase, as the results export
    assert mixing.mixing_view({"sqrt": RNG.normal(size=(3, 2))}) is None
    assert mixing.mixing_view({}) is None


# ----------------------------------------------------------------------------- segmentation
def test_segmentation_thresholds_the_marginal_and_scores_it_against_the_truth():
    marginal = np.array([[0.9, 0.2], [0.6, 0.4]])
    truth = np.array([[1, -1], [-1, -1]])
    view = segmentation.segmentation_view(marginal, RNG.random((2, 2)), 0.5, truth)
    assert view.mask.tolist() == [[True, False], [True, False]]
    assert view.accuracy == pytest.approx(0.75) and view.object_fraction == 0.5
    for image in (view.observed, view.marginal, view.overlay, view.uncertainty):
        assert image.dtype == np.uint8 and image.shape[:2] == view.marginal.shape[:2]


def test_mask_png_is_the_mask_at_the_working_resolution():
    mask = RNG.random((7, 5)) > 0.5
    decoded = np.asarray(Image.open(io.BytesIO(segmentation.mask_png(mask))))
    assert decoded.shape == (7, 5) and np.array_equal(decoded > 127, mask)


def test_uncertainty_is_one_bit_at_one_half_and_zero_when_certain():
    h = segmentation.binary_entropy(np.array([0.0, 0.5, 1.0]))
    assert h.tolist() == pytest.approx([0.0, 1.0, 0.0])


def test_a_photo_sized_lattice_is_shrunk_for_the_page_and_a_small_one_blown_up():
    marginal = np.zeros((512, 384))
    marginal[:, 192:] = 1.0
    view = segmentation.segmentation_view(marginal, RNG.random((512, 384, 3)))
    assert max(view.marginal.shape) == segmentation.SIDE and view.observed.shape[2] == 3
    # area averaging keeps the halves: black on the left, white on the right
    assert view.marginal[:, :40].max() == 0 and view.marginal[:, -40:].min() == 255
    small = segmentation.segmentation_view(np.full((10, 20), 0.5))
    assert small.marginal.shape == (110, 220)  # 11 x each site, crisp


def test_the_difference_map_colours_where_marginal_and_map_disagree():
    mask = np.array([[True, True], [False, False]])
    map_mask = np.array([[True, False], [True, False]])
    out = segmentation.difference_image(mask, map_mask)
    assert out[0, 0].tolist() == [255, 255, 255] and out[1, 1].tolist() == [0, 0, 0]
    assert out[0, 1].tolist() == [240, 140, 30]  # marginal only
    assert out[1, 0].tolist() == [40, 120, 230]  # MAP only


def test_segmentation_of_nothing_is_none():
    assert segmentation.segmentation_view(np.zeros((0, 0))) is None
    assert segmentation.segmentation_view(np.zeros(4)) is None


# ----------------------------------------------------------------------------- posterior
def test_posterior_images_show_observation_alpha_and_truth_where_known():
    alpha = RNG.normal(size=(6, 9))
    full = posterior.posterior_images(alpha, RNG.random((6, 9)), spins(6, 9))
    assert [c.split(":")[0] for _, c in full][0] == "observed image"
    assert len(full) == 3 and full[1][0].shape[2] == 3
    assert len(posterior.posterior_images(alpha)) == 1
    assert posterior.posterior_images(np.zeros((0, 0))) == []


# ----------------------------------------------------------------------------- export
def small_comparison(names=("barker", "lsb1", "lsb2"), steps=30):
    problem = lsbcore.paper_case(3, n=8, n_chains=2)
    comparison = lsbcore.Comparison(
        list(names), problem.target, 2, x0=problem.x0, thin=5, truth=problem.truth
    )
    comparison.step(steps, learn=True)
    return comparison


def test_traces_csv_has_one_row_per_record_and_chain():
    comparison = small_comparison(("barker",))
    text = export.traces_csv(comparison.traces)
    lines = text.strip().splitlines()
    assert lines[0].split(",") == list(lsbcore.CSV_COLUMNS)
    assert len(lines) - 1 == len(comparison.traces["barker"]) * 2


def test_learned_functions_export_and_import_again():
    torch.manual_seed(0)
    comparison = small_comparison()
    files = export.learned_functions(comparison.samplers, {"steps": 30})
    assert sorted(files) == ["lsb1", "lsb2"]
    for name, text in files.items():
        loaded = lsbcore.load_balancing(text)
        s = torch.linspace(-5, 5, 11, dtype=torch.float64)
        assert torch.allclose(loaded.log_g(s), comparison[name].balancing.log_g(s).detach())
        assert json.loads(text)["meta"]["sampler"] == name


def test_results_json_follows_the_experiment_schema():
    from dataclasses import replace as dc_replace

    from app import sources, state

    cfg = dc_replace(cfgmod.Config(), samplers=("barker", "lsb1"), size=8, chains=2, burn_in=10)
    run, _ = state.build_run(cfg, sources.build_problem(cfg))
    state.advance(run, 30.0, 40)
    results = json.loads(export.results_json(run, max_lag=10))
    assert set(results["samplers"]) == {"barker", "lsb1"}
    assert results["config"]["samplers"] == ["barker", "lsb1"] and results["config"]["max_lag"]
    burnin, mixing = run.phase_seconds()
    assert results["samplers"]["lsb1"]["burnin_seconds"] == pytest.approx(burnin["lsb1"])
    assert mixing["barker"] >= 0


def test_share_link_reopens_the_same_configuration():
    cfg = cfgmod.Config(case=2, lam=0.5, samplers=("sqrt", "gibbs"), chains=7, seed=3)
    link = export.share_link(cfg, "http://host:8501/?old=1#frag")
    parts = urlsplit(link)
    assert parts.netloc == "host:8501" and parts.path == "/"
    restored, warnings = cfgmod.validate(dict(parse_qsl(parts.query)), ("synthetic_disc_letter",))
    assert restored == cfg and warnings == []
    assert export.share_link(cfg).startswith("?")


def test_about_sections_each_carry_text_and_formulas():
    assert len(about.SECTIONS) >= 5
    assert all(title and text and formulas for title, text, formulas in about.SECTIONS)


# ----------------------------------------------------------------------------- exports
def built_run(cfg, steps=40):
    from app import sources, state

    run, _ = state.build_run(cfg, sources.build_problem(cfg))
    state.advance(run, 30.0, steps)
    return run


def test_export_names_carry_problem_seed_and_date_and_nothing_odd():
    import datetime
    from dataclasses import replace as dc_replace
    from types import SimpleNamespace

    from app.file_names import result_settings, settings_digest

    day = datetime.date(2026, 11, 24)
    cfg = cfgmod.Config(case=4, seed=7)
    run = SimpleNamespace(problem=SimpleNamespace(name="case 4 (dependent, clean)"), config=cfg)
    digest = settings_digest(result_settings(run))
    assert export.export_stem(run, day) == (
        f"lsb-case-4-dependent-clean-n30-lam1-mu1-sigma3-seed7-{digest}-2026-11-24"
    )
    odd = SimpleNamespace(
        problem=SimpleNamespace(name="../../etc/<script>ÿ photo (1).PNG" + "x" * 200),
        config=dc_replace(cfg, seed=0),
    )
    stem = export.export_stem(odd, day)
    # the 203-letter last word dropped
    assert stem.startswith("lsb-etc-script-photo-1-n30-lam1-mu1-sigma3-seed0-")
    assert all(c.isalnum() or c in "-." for c in stem) and len(stem) < 90
    blank = SimpleNamespace(problem=SimpleNamespace(name="!!!"), config=cfg)
    assert export.export_stem(blank, day).startswith("lsb-run-n30-")
    long = SimpleNamespace(
        problem=SimpleNamespace(
            name="case 3 geometry (dependent, noisy) with your parameters, one α for all chains"
        ),
        config=cfg,
    )  # cut at 48 characters this was "...-with-your-parame"
    assert export.export_stem(long, day).startswith(
        "lsb-case-3-geometry-dependent-noisy-with-your-n30-"
    )


def test_file_names_are_cut_between_words():
    from app.file_names import cut_at_word, file_stem

    assert cut_at_word("alpha-beta-gamma", 12) == "alpha-beta"
    assert cut_at_word("alpha-beta-gamma", 16) == "alpha-beta-gamma"
    assert cut_at_word("alpha-beta-gamma", 10) == "alpha-beta"  # the boundary right at the limit
    assert cut_at_word("x" * 30, 8) == "x" * 8  # one long word: no boundary to cut at
    assert file_stem("Horse (dark) ÿ!", 40) == "horse-dark"


def test_a_photo_is_named_after_its_file():
    from types import SimpleNamespace

    from app import sources
    from app.file_names import photo_title

    assert photo_title("My Cat.jpeg") == "My-Cat, uploaded image"
    assert photo_title("../../etc/<script>ÿ photo (1).PNG") == "script-photo-1, uploaded image"
    assert photo_title("C:\\Users\\me\\IMG_2024.jpg") == "IMG_2024, uploaded image"
    assert photo_title(None) == photo_title("!!!.png") == "uploaded image"
    assert len(photo_title("a-" * 100 + ".png")) <= 40 + len(", uploaded image")
    cfg = cfgmod.defaults_for("upload")
    buffer = io.BytesIO()
    Image.fromarray((np.tile(np.linspace(0, 1, 16), (12, 1)) * 255).astype(np.uint8)).save(
        buffer, format="PNG"
    )
    photo = lsbcore.load_photo(buffer.getvalue(), 16)
    problem = sources.build_problem(cfg, photo, file_name="coffee beans.png")
    assert problem.name == "coffee-beans, uploaded image"
    run = SimpleNamespace(problem=problem, config=cfg)
    assert export.export_stem(run).startswith("lsb-coffee-beans-uploaded-image-mixture-")


def test_the_report_command_is_the_experiment_command_of_the_run():
    from dataclasses import replace as dc_replace

    from lsbcore.studies.experiment.cli import build_parser

    cfg = cfgmod.Config()
    command, reason = export.experiment_command(cfg, "out-dir")
    assert reason == "" and command.startswith("python -m lsbcore.experiment --case 3 ")
    args = build_parser().parse_args(command.split()[3:])
    assert (args.case, args.samplers, args.chains) == (3, list(cfg.samplers), cfg.chains)
    assert (args.burn_in, args.steps, args.seed, args.start) == (2000, 30_000, 0, "shared")
    assert (args.size, args.lr, args.hidden, str(args.out)) == (30, 0.01, 10, "out-dir")
    command, reason = export.experiment_command(dc_replace(cfg, lam=0.5, shared_alpha=True))
    assert command is None and "λ, one α for all chains" in reason
    command, reason = export.experiment_command(cfgmod.defaults_for("sample"))
    assert command is None and "shipped sample" in reason


def test_traces_gzip_is_the_csv_compressed():
    import gzip

    comparison = small_comparison(("barker", "lsb1"))
    data = export.traces_gzip(comparison.traces)
    assert gzip.decompress(data).decode("utf-8") == export.traces_csv(comparison.traces)
    assert data == export.traces_gzip(comparison.traces)  # no time stamp: same bytes again


def test_the_page_report_is_the_experiment_report_of_the_run():
    from dataclasses import replace as dc_replace

    cfg = dc_replace(
        cfgmod.Config(), samplers=("barker", "lsb1"), size=8, chains=2, burn_in=10, steps=30
    )
    run = built_run(cfg)
    page = export.report_html(run)
    assert page.startswith("<!DOCTYPE html>") and "plotly" in page.lower()
    assert "LSB Explorer experiment: " + run.problem.name in page
    for heading in ("Burn-in: magnetisation", "Mixing: autocorrelation", "LSB 1: mixture weights"):
        assert heading in page
    results = json.loads(export.results_json(run))
    ess = results["samplers"]["barker"]["ess_paper_mean"]
    assert f"{ess:.2f} ±" in page  # the summary table holds the run's own numbers
    assert "Command: <code>python -m lsbcore.experiment --case 3 --samplers barker,lsb1" in page
    assert "paper Table 2" not in page  # 8 x 8 sites, 30 steps: nothing like the paper's run
    assert "ESS over the mixing phase, chains start shared." in page  # not "n/a", not "mixed"
    # every chain has its own α: no pooled bulk ESS to draw, and the report says so
    assert results["config"]["chains_share_posterior"] is False
    assert "No pooled bulk ESS is drawn" in page and "bulk ESS per chain (mean)" in page


def test_chart_config_saves_in_the_chosen_format_under_the_run_name(monkeypatch):
    from app import charts

    state = {}
    monkeypatch.setattr(charts.st, "session_state", state)
    config = charts.config("lsb-case-3-seed0-2026-11-24", "ess")
    assert config["toImageButtonOptions"]["format"] == "png"
    assert config["toImageButtonOptions"]["filename"] == "lsb-case-3-seed0-2026-11-24-ess"
    assert "toImage" not in config["modeBarButtonsToRemove"]
    state[charts.FORMAT_KEY] = "svg"
    assert charts.config("s", "acf")["toImageButtonOptions"]["format"] == "svg"
    state[charts.FORMAT_KEY] = "gif"  # not offered: back to the last format chosen
    assert charts.config("s", "acf")["toImageButtonOptions"]["format"] == "svg"
    state.clear()
    state[charts.FORMAT_KEY] = "gif"  # and to PNG when none was chosen
    assert charts.config("s", "acf")["toImageButtonOptions"]["format"] == "png"


def test_proposal_figures_give_one_cell_per_sampler_on_one_colour_scale():
    maps = {"barker": site_step(site=(2, 3)), "gibbs": site_step(uniform=True)}
    together = proposal.proposal_figure(maps, "Q")
    cells = proposal.proposal_figures(maps, "Q")
    assert [name for name, _ in cells] == ["barker", "gibbs"]
    for _, fig in cells:  # the shared scale is the one of all the maps together
        assert fig.layout.coloraxis.cmin == together.layout.coloraxis.cmin
        assert fig.layout.coloraxis.cmax == together.layout.coloraxis.cmax
        assert len([t for t in fig.data if t.type == "heatmap"]) == 2
    assert [fig.layout.coloraxis.showscale for _, fig in cells] == [False, False]
    assert {fig.layout.width for _, fig in cells} == {proposal.CELL_PX}  # fixed cells: they wrap
    z_range = proposal.shared_range(maps, "Q")
    assert z_range == (together.layout.coloraxis.cmin, together.layout.coloraxis.cmax)
    scale = proposal.scale_figure("Q", z_range)  # the one scale, as a strip of its own
    assert scale.layout.xaxis.title.text == "log10 Q"
    assert scale.data[0].x[0] == z_range[0] and scale.data[0].x[-1] == z_range[1]
    assert proposal.shared_range({}, "Q") is None
    assert proposal.proposal_figures({}) == []
