"""The Block proposals view: what it shows is the network's distribution and the enumerated
block conditional, its KL and acceptance are right, bad inputs give sentences, and the tab
draws on the Ising page with no error, before and after the trained weights exist."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from app.page_state import BP_COL, BP_K, BP_ROW
from app.views import block_proposals as bp
from app.views import block_source
from lsbcore.methods.block_proposals.motif import GridMotif
from lsbcore.methods.block_proposals.proposal import BlockProposal
from lsbcore.targets.ising import IsingPosterior
from tests.app_support import open_app, stop_runs_fixture  # noqa: F401 (autouse fixture)


def _ising(h=6, w=7, lam=0.7, seed=0, batch=None):
    g = torch.Generator().manual_seed(seed)
    shape = (h, w) if batch is None else (batch, h, w)
    alpha = torch.randn(shape, generator=g, dtype=torch.float64)
    x = torch.where(torch.rand(h, w, generator=g) < 0.5, 1.0, -1.0).double()
    return IsingPosterior(alpha, lam), x


def _bad_network(k: int, seed: int = 3) -> BlockProposal:
    """A network whose correction is far from zero: q is then visibly unlike p."""
    net = BlockProposal(k, hidden=16, depth=1, seed=seed)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.8)
    return net.eval().requires_grad_(False)


def _log_p_by_hand(target, x, sites):
    """The block conditional from the whole target's log p~, every block state enumerated."""
    flat = x.reshape(-1).clone()
    rows = []
    for bits in itertools.product((0, 1), repeat=len(sites)):
        y = flat.clone()
        # code order: bit i of the code is site i of the block (itertools gives the last fastest)
        y[sites] = torch.tensor([2.0 * b - 1 for b in reversed(bits)], dtype=torch.float64)
        rows.append(y)
    log_w = target.log_prob(torch.stack(rows).view(-1, *target.shape))
    return torch.log_softmax(log_w, 0)


def test_tile_report_shows_the_enumerated_conditional_and_the_networks_distribution():
    target, x = _ising()
    lay = bp.layout(target, x, 2)
    assert (lay.rows, lay.cols) == (3, 3)
    net = _bad_network(2)
    report = bp.tile_report(lay, net, 2, 3)
    t = lay.tile(2, 3)
    sites = lay.blocks.sites[t]
    assert sites.tolist() == [1 * 2 * 7 + 4, 1 * 2 * 7 + 5, 3 * 7 + 4, 3 * 7 + 5]
    # p is the target's own conditional (log p~ of every completion), q the network's
    assert np.allclose(report.log_p, _log_p_by_hand(target, x, sites).numpy(), atol=1e-10)
    assert np.allclose(report.log_q, net.all_log_probs(lay.c[t : t + 1])[0].numpy())
    assert math.isclose(np.exp(report.log_p).sum(), 1.0, abs_tol=1e-12)
    assert math.isclose(np.exp(report.log_q).sum(), 1.0, abs_tol=1e-9)
    # q by brute force equals the network's log_prob of each state
    states = GridMotif(2).states
    direct = net.log_prob(states, lay.c[t].expand(16, -1)).numpy()
    assert np.allclose(report.log_q, direct)
    # the current state is the tile's, and is shown; the likeliest of p and of q are shown
    assert report.state(report.current).reshape(-1).tolist() == x.reshape(-1)[sites].tolist()
    assert report.current in report.shown
    assert int(np.argmax(report.log_p)) in report.shown
    assert int(np.argmax(report.log_q)) in report.shown
    assert len(set(report.shown)) == len(report.shown) <= bp.TOP_STATES + 1


def test_on_a_grid_network_with_zeros_p_is_the_targets_own_conditional():
    """A factor graph's motif coefficients stand in for zeros by a gap: the view's p scores
    every block state by the target itself instead, zeros included."""
    from app import network_targets

    graph = network_targets.preset("mn1", 0.0)  # exact zeros in its tables
    x = graph.start(1, torch.Generator().manual_seed(0)).reshape(-1).double()
    lay = bp.layout(graph, x, 2)
    net = _bad_network(2)
    zeros = 0
    for row, col in ((2, 2), (4, 5), (1, 3)):
        report = bp.tile_report(lay, net, row, col)
        by_hand = _log_p_by_hand(graph, x.view(graph.shape), lay.blocks.sites[lay.tile(row, col)])
        assert np.array_equal(np.isneginf(report.log_p), np.isneginf(by_hand.numpy()))
        finite = np.isfinite(report.log_p)
        assert np.allclose(report.log_p[finite], by_hand.numpy()[finite], atol=1e-12)
        zeros += int((~finite).sum())
        assert math.isfinite(report.kl) and 0.0 <= report.acceptance <= 1.0
    assert zeros > 0  # the case the gap would get wrong is present


def test_kl_and_acceptance_match_a_hand_computation():
    log_p = torch.log(torch.tensor([[0.5, 0.25, 0.125, 0.125]], dtype=torch.float64))
    log_q = torch.log(torch.tensor([[0.25, 0.25, 0.25, 0.25]], dtype=torch.float64))
    kl = 0.5 * math.log(2) + 0.25 * 0 + 2 * 0.125 * math.log(0.5)
    assert float(bp.kl_divergence(log_p, log_q)[0]) == pytest.approx(kl, abs=1e-15)
    assert float(bp.kl_divergence(log_p, log_p)[0]) == 0.0
    # from state 1 (p = q there): sum_y min(q(y), p(y)) = .25 + .25 + .125 + .125
    assert float(bp.expected_acceptance(log_p, log_q, 1)[0]) == pytest.approx(0.75)
    # from state 0 (p/q = 2): sum_y min(q, p q(0)/p(0)) = sum min(.25, p / 2) = .25+.125+2*.0625
    assert float(bp.expected_acceptance(log_p, log_q, 0)[0]) == pytest.approx(0.5)
    # from state 3 (p/q = 1/2): every proposal is accepted
    assert float(bp.expected_acceptance(log_p, log_q, 3)[0]) == pytest.approx(1.0)
    # a zero of p adds nothing to the KL
    zero_p = torch.tensor([[0.0, -math.inf]], dtype=torch.float64)
    assert float(bp.kl_divergence(zero_p, torch.log(torch.tensor([[0.5, 0.5]])))[0]) == (
        pytest.approx(math.log(2))
    )


def test_the_acceptance_is_the_samplers_own_on_a_tile():
    """The expected acceptance equals the average of min(1, MH ratio) over q, by brute force."""
    target, x = _ising(seed=2)
    lay = bp.layout(target, x, 2)
    net = _bad_network(2, seed=5)
    report = bp.tile_report(lay, net, 3, 1)
    p, q = np.exp(report.log_p), np.exp(report.log_q)
    now = report.current
    by_hand = sum(q[y] * min(1.0, p[y] * q[now] / (p[now] * q[y])) for y in range(16))
    assert report.acceptance == pytest.approx(by_hand, rel=1e-12)
    assert 0.0 < report.acceptance < 1.0


def test_tile_kls_are_exact_where_small_and_unbiased_estimates_beyond():
    target, x = _ising(h=8, w=8, seed=1)
    net = _bad_network(2)
    lay = bp.layout(target, x, 2)
    kl, exact = bp.tile_kls(lay, net)
    assert exact and kl.shape == (16,)
    for t in (0, 7, 15):
        row, col = divmod(t, 4)
        assert kl[t] == pytest.approx(bp.tile_report(lay, net, row + 1, col + 1).kl, rel=1e-9)
    # above the enumeration budget each tile's KL is estimated from exact draws of p
    old = bp.EXACT_HISTOGRAM_STATES
    try:
        bp.EXACT_HISTOGRAM_STATES = 16
        estimate, exact = bp.tile_kls(lay, net)
    finally:
        bp.EXACT_HISTOGRAM_STATES = old
    assert not exact
    se = np.sqrt(np.maximum(kl, 0.05) * 4 / bp.KL_DRAWS)  # generous: a few standard errors
    assert np.all(np.abs(estimate - kl) < 4 * se + 0.05)
    assert np.corrcoef(estimate, kl)[0, 1] > 0.8


def test_a_large_lattice_scores_a_subset_of_tiles_spread_evenly(monkeypatch):
    target, x = _ising(h=12, w=12, seed=6)
    lay = bp.layout(target, x, 2)
    assert torch.equal(bp.histogram_tiles(lay), torch.arange(36))
    monkeypatch.setitem(bp.HISTOGRAM_TILES, 2, 5)
    chosen = bp.histogram_tiles(lay)
    assert chosen.tolist() == [0, 9, 18, 26, 35]  # first and last included, evenly between
    net = _bad_network(2)
    kl, exact = bp.tile_kls(lay, net, chosen)
    everything, _ = bp.tile_kls(lay, net)
    assert exact and np.allclose(kl, everything[chosen.numpy()])


def test_per_chain_fields_use_the_first_chains():
    target, x = _ising(batch=3, seed=4)
    first, _ = _ising(seed=4)
    lay = bp.layout(target, x, 3)
    assert torch.equal(lay.c, bp.layout(IsingPosterior(target.alpha[0], target.lam), x, 3).c)
    assert lay.c.shape == (2 * 2, GridMotif(3).n_terms)
    del first


@pytest.mark.parametrize(
    ("k", "weights", "words"),
    [
        (5, "trained", "block size must be one of 2, 3, 4"),
        ("2", "trained", "block size must be one of"),
        (True, "trained", "block size must be one of"),
        (2, "clever", "weights must be trained or untrained"),
        (2, "exact", "weights must be trained or untrained"),
    ],
)
def test_bad_choices_give_sentences(k, weights, words):
    with pytest.raises(ValueError, match=words):
        bp.check_choice(k, weights)


def test_bad_tiles_states_and_targets_give_sentences():
    target, x = _ising()
    lay = bp.layout(target, x, 2)
    with pytest.raises(ValueError, match=r"Tile row 4 is outside 1–3: the 7 × 6 lattice"):
        lay.tile(4, 1)
    with pytest.raises(ValueError, match="Tile column 0 is outside 1–3"):
        lay.tile(1, 0)
    with pytest.raises(ValueError, match="tile row must be a whole number"):
        lay.tile(1.5, 1)
    with pytest.raises(ValueError, match="only \\+1 and −1"):
        bp.layout(target, x * 0.5, 2)
    with pytest.raises(ValueError, match="has 41 sites; the 7 × 6 lattice has 42"):
        bp.layout(target, x.reshape(-1)[:41], 2)
    small, y = _ising(h=3, w=5)
    with pytest.raises(ValueError, match="at least 4 sites on each side"):
        bp.layout(small, y, 4)
    with pytest.raises(ValueError, match="BlockProposal for 2 x 2"):
        bp.tile_report(lay, BlockProposal(3), 1, 1)


def test_missing_trained_weights_are_a_sentence(monkeypatch, tmp_path):
    monkeypatch.setattr(bp, "weights_file", lambda k: tmp_path / f"neural_block_k{k}.pt")
    proposal, message = bp.load_proposal(3, "trained")
    assert proposal is None
    assert "not in this copy yet" in message and "--block-size 3" in message
    proposal, message = bp.load_proposal(3, "untrained")
    assert isinstance(proposal, BlockProposal) and message == ""
    (tmp_path / "neural_block_k2.pt").write_bytes(b"not weights")
    proposal, message = bp.load_proposal(2, "trained")
    assert proposal is None and "cannot be read" in message
    BlockProposal(2, hidden=8, depth=1).save(tmp_path / "neural_block_k3.pt")  # another size
    proposal, message = bp.load_proposal(3, "trained")
    assert proposal is None and "holds a proposal for 2 x 2 blocks" in message
    good = BlockProposal(4, hidden=8, depth=1)
    good.save(tmp_path / "neural_block_k4.pt")
    proposal, message = bp.load_proposal(4, "trained")
    assert proposal is not None and proposal.hidden == 8 and message == ""


def test_figures_draw_every_tile_and_the_chosen_one():
    target, x = _ising()
    lay = bp.layout(target, x, 2)
    fig = bp.state_figure(x.numpy(), lay, (2, 3))
    centres = fig.data[2]
    assert len(centres.x) == 9 and centres.customdata.tolist()[5] == [2, 3]
    rect = fig.layout.shapes[0]
    assert (rect.x0, rect.x1, rect.y0, rect.y1) == (3.5, 5.5, 1.5, 3.5)
    report = bp.tile_report(lay, _bad_network(2), 2, 3)
    bars = bp.probability_figure(report)
    assert np.allclose(bars.data[0].y, np.exp(report.log_p[report.shown]))
    assert np.allclose(bars.data[1].y, np.exp(report.log_q[report.shown]))
    hist = bp.kl_histogram({"untrained": np.array([1e-9, 0.1, 2.0])})
    assert len(hist.data) == 1 and hist.data[0].x.min() == pytest.approx(np.log10(bp.KL_FLOOR))


# ----------------------------------------------------------------------------- in the app
def _open_tab(**query):
    at = open_app(size="16", chains="2", samplers="checkerboard,barker", **query)
    at.session_state["view"] = "Block proposals"
    return at.run()


def _healthy(at):
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def test_the_tab_draws_with_no_error_and_follows_its_controls_and_link():
    at = _open_tab(bp_k="3", bp_weights="untrained", bp_row="2", bp_col="4")
    _healthy(at)
    assert at.segmented_control(key=BP_K.key).value == 3
    assert (at.number_input(key=BP_ROW.key).value, at.number_input(key=BP_COL.key).value) == (
        2,
        4,
    )
    metrics = {m.label: m.value for m in at.metric}
    assert set(metrics) == {"KL(p ‖ q)", "Expected acceptance"}
    run = at.session_state["_run"]
    step, sampler, x = run.cache[bp.SNAPSHOT]
    lay = bp.layout(run.problem.target, x, 3)
    report = bp.tile_report(lay, bp.load_proposal(3, "untrained")[0], 2, 4)
    assert metrics["Expected acceptance"] == f"{report.acceptance:.3f}"
    # a larger block: the tile is clamped into the new range, the numbers change
    at.segmented_control(key=BP_K.key).set_value(4).run()
    _healthy(at)
    assert at.number_input(key=BP_COL.key).value == 4
    report4 = bp.tile_report(
        bp.layout(run.problem.target, x, 4), bp.load_proposal(4, "untrained")[0], 2, 4
    )
    shown = {m.label: m.value for m in at.metric}
    assert shown["Expected acceptance"] == f"{report4.acceptance:.3f}" and shown != metrics
    at.number_input(key=BP_ROW.key).set_value(1).run()
    _healthy(at)
    assert at.query_params["bp_k"] in ("4", ["4"]) and at.query_params["bp_col"] in ("4", ["4"])
    assert "bp_row" not in at.query_params  # back at its default: links carry only changes
    assert "Median KL in nats" in " ".join(str(c.value) for c in at.caption)


def test_trained_without_weights_says_so_in_a_sentence(monkeypatch, tmp_path):
    monkeypatch.setattr(bp, "weights_file", lambda k: tmp_path / f"neural_block_k{k}.pt")
    (tmp_path / "block_kl.json").write_text('{"setup": 1}')
    monkeypatch.setattr(block_source, "KL_FILE", tmp_path / "block_kl.json")
    monkeypatch.setattr(block_source, "RACE_FILE", tmp_path / "block_race.json")
    at = _open_tab(bp_k="2", bp_weights="trained")
    _healthy(at)
    assert any("not in this copy yet" in str(i.value) for i in at.info)
    # a bad or missing shipped result: a sentence in its place, the tab still drawn
    source = next(e for e in at.expander if e.label == block_source.TITLE)
    said = [str(i.value).replace("\\", "") for i in source.info]  # markdown escapes off
    assert len(said) == 2 and "not a block-kl summary" in said[0]
    assert "block_race.json are not in this copy" in said[1]
    # the untrained histogram is still drawn
    assert "untrained" in " ".join(str(c.value) for c in at.caption)


def test_a_click_picks_the_tile_it_landed_on():
    centre = {"curve_number": 2, "point_index": 5, "x": 4.5, "y": 2.5, "customdata": [2, 3]}
    assert bp.picked_tile([centre], 2) == (2, 3)
    # the browser may send customdata as a mapping by position
    assert bp.picked_tile([{**centre, "customdata": {"0": 4, "1": 1}}], 2) == (4, 1)
    # a point of the image itself: its pixel's tile
    assert bp.picked_tile([{"curve_number": 0, "x": 7, "y": 3}], 3) == (2, 3)
    # the outline trace, nothing, or garbage: no tile
    assert bp.picked_tile([{"curve_number": 1, "x": 1.5, "y": 0}], 2) is None
    assert bp.picked_tile([], 2) is None and bp.picked_tile(None, 2) is None
    assert bp.picked_tile([{"customdata": ["a", "b"]}, "junk"], 2) is None


def test_the_tab_draws_on_a_markov_networks_page():
    at = open_app(
        target="mn2", chains="2", network_view="Block proposals", bp_k="3", bp_weights="untrained"
    )
    _healthy(at)
    metrics = {m.label: m.value for m in at.metric}
    assert set(metrics) >= {"KL(p ‖ q)", "Expected acceptance"}
    assert "3 × 3 tiles of 3 × 3" in " ".join(str(c.value) for c in at.caption)
    at.number_input(key=BP_COL.key).set_value(3).run()
    _healthy(at)
    assert {m.label: m.value for m in at.metric} != metrics
    # under the tab, the source's experiments from the shipped files: both charts' captions
    source = [e for e in at.expander if e.label == block_source.TITLE]
    assert len(source) == 1
    captions = " ".join(str(c.value) for c in source[0].caption)
    assert "block-kl --summary assets/block_kl.json" in captions
    assert "--json assets/block_race.json" in captions and "here**" in captions


def test_the_shipped_trained_network_is_closer_to_p_than_the_untrained_one():
    """With the shipped weights the tab shows both networks' KL over the tiles, and on a paper
    case the trained one's median is the smaller."""
    assert bp.weights_file(2).is_file(), "the trained 2 x 2 weights ship in assets/"
    at = _open_tab(bp_k="2")
    _healthy(at)
    assert {m.label for m in at.metric} == {"KL(p ‖ q)", "Expected acceptance"}
    run = at.session_state["_run"]
    _, _, x = run.cache[bp.SNAPSHOT]
    lay = bp.layout(run.problem.target, x, 2)
    medians = {
        w: float(np.median(bp.tile_kls(lay, bp.load_proposal(2, w)[0])[0])) for w in bp.WEIGHTS
    }
    assert medians["trained"] < 0.5 * medians["untrained"], medians
    caption = " ".join(str(c.value) for c in at.caption)
    assert "Median KL in nats: trained" in caption and "untrained" in caption


def test_the_state_stays_visible_under_the_tiles_of_a_large_lattice():
    """Outlines and tile markers on a small lattice; on a 464 px one (232 x 232 tiles of 2 x 2)
    no outlines and nearly transparent markers, so the state is not covered."""
    for side, outlined in ((24, True), (464, False)):
        target = IsingPosterior(torch.zeros(side, side), 1.0)
        x = target.start(1, torch.Generator().manual_seed(0))[0]
        lay = bp.layout(target, x, 2)
        fig = bp.state_figure(x.numpy(), lay, (1, 1))
        lines = [t for t in fig.data if t.type == "scatter" and t.mode == "lines"]
        markers = next(t for t in fig.data if t.type == "scatter" and t.mode == "markers")
        assert bool(lines) == outlined
        assert (markers.marker.opacity >= 0.15) == outlined
        assert len(markers.x) == (side // 2) ** 2  # every tile still clickable
