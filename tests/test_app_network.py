"""Markov networks in the dashboard: the target picker's MN 1, MN 2 and .uai upload, their links,
the network page's views, and refusals that keep what the user had.

AppTest runs the real script; runs are short (a few dozen steps). What is sampled is tested
against enumeration in the library's tests; here the page and what it shows.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace

import numpy as np
import pytest
import torch
from app_support import open_app, stop_runs_fixture  # noqa: F401  (autouse)

from app import config as cfgmod
from app import network_run, network_targets, pins, rbm_run, sources, state
from app.text import escape, plain, quote
from app.views import network_graph
from app.views.export import learned_functions
from lsbcore import REGISTRY, load_balancing
from lsbcore.networks.layout import grid_positions
from lsbcore.targets.uai import MAX_UPLOAD_BYTES

SAMPLES = sources.sample_names()
TABLE3 = list(network_targets.DEFAULT_SAMPLERS)
VIEWS = ("Network", "Trace", "ESS", "Balancing functions", "Softmax weights", "Pinned runs")

# a ring of 6 binary variables with one zero entry per factor (x_i = -1, x_{i+1} = +1 has no
# mass), written as the competition's MARKOV format
RING = (
    "MARKOV\n6\n2 2 2 2 2 2\n6\n"
    + "".join(f"2 {i} {(i + 1) % 6}\n" for i in range(6))
    + "".join("4\n 1.0 0.0 0.5 2.0\n" for _ in range(6))
).encode()
CARDINALITY_3 = b"MARKOV\n2\n2 3\n1\n2 0 1\n6\n1 1 1 1 1 1\n"


def healthy(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def texts(elements) -> list[str]:
    return [str(e.value) for e in elements]


def wait_for_steps(run, n: int, timeout: float = 30.0) -> None:
    deadline = time.perf_counter() + timeout
    while run.n_steps < n and time.perf_counter() < deadline:
        time.sleep(0.05)
    assert run.n_steps >= n, f"only {run.n_steps} steps after {timeout} s"


# ----------------------------------------------------------------------------- configuration
def test_kinds_of_target_are_explicit():
    from app.target_kind import TargetKind, kind_of

    assert [kind_of(t) for t in ("ising", "digits-8x8", "own", "mn1", "uai")] == [
        TargetKind.ISING,
        TargetKind.RBM,
        TargetKind.RBM,
        TargetKind.NETWORK,
        TargetKind.NETWORK,
    ]


def test_network_link_round_trip_and_defaults():
    cfg = cfgmod.defaults_for(target="mn1")
    assert (cfg.samplers, cfg.chains, cfg.burn_in, cfg.steps) == (tuple(TABLE3), 5, 500, 10_000)
    assert "lsb2-monotone" in TABLE3 and "learned" not in network_targets.SAMPLERS
    cfg = replace(cfg, samplers=("gwg", "barker"), epsilon=0.0, seed=3)
    params = cfgmod.to_query_params(cfg)
    assert params["target"] == "mn1" and params["epsilon"] == "0.0"
    back, warnings = cfgmod.from_query_params(params, SAMPLES)
    assert warnings == []
    assert back == replace(cfg, samplers=("barker", "gwg"))  # the registry's order
    # epsilon shapes a preset only: an uploaded network's link leaves it out
    assert "epsilon" not in cfgmod.to_query_params(replace(cfg, target="uai"))
    assert "epsilon" not in cfgmod.to_query_params(cfgmod.Config())


def test_bad_network_link_values_are_refused_in_a_sentence():
    cfg, warnings = cfgmod.validate({"target": "mn9"})
    assert cfg.target == "ising"
    assert warnings == [
        f"target: {quote('mn9')} is not one of ising, digits-8x8, digits-16x16, own, mn1, mn2, "
        "uai, vs; using the default."
    ]
    cfg, warnings = cfgmod.validate({"target": "mn2", "samplers": "sqrt,learned,gibbs-2"})
    assert cfg.samplers == ("sqrt",)
    assert warnings == [
        f"samplers: {quote(n)} is not a sampler the network page offers; ignored."
        for n in ("learned", "gibbs-2")
    ]
    cfg, warnings = cfgmod.validate({"target": "mn1", "epsilon": "0.9"})
    assert cfg.epsilon == 0.5 and len(warnings) == 1 and "ε" in warnings[0]
    cfg, warnings = cfgmod.validate({"target": "mn1", "epsilon": "nan"})
    assert cfg.epsilon == network_targets.DEFAULT_EPSILON and len(warnings) == 1


def test_an_upload_with_no_state_of_mass_is_refused_within_what_the_page_waits():
    """Issue 47: 2,000 variables whose factors contradict each other only all together kept
    the server busy for minutes; the upload's start search gives up after its 1 s."""
    import time

    from hostile_files import contradicting_ring

    begin = time.perf_counter()
    with pytest.raises(ValueError, match="the search's 1 s") as refused:
        network_targets.read_upload(contradicting_ring(2_000).encode(), "ring.uai")
    assert time.perf_counter() - begin < 3.0  # reading, building and 1 s of search
    assert "'ring.uai'" in str(refused.value)


def test_uploads_are_read_or_refused_in_a_sentence():
    graph, line = network_targets.read_upload(RING, "ring.uai")
    assert (graph.n_variables, graph.n_factors, graph.shape) == (6, 6, (1, 6))
    assert line == (
        "Read 'ring.uai': a MARKOV network of 6 binary variables and 6 factors, 6 of its 24 "
        "table entries zero."
    )
    with pytest.raises(ValueError, match="the upload 'a.uai' is not UTF-8 text"):
        network_targets.read_upload(b"\x89PNG\r\n", "a.uai")
    with pytest.raises(ValueError, match="the upload 'b.uai' does not begin .* not a UAI model"):
        network_targets.read_upload(b"hello, world", "b.uai")
    with pytest.raises(
        ValueError, match="the upload 'c.uai', line 3 of the UAI file: variable 1 has 3 values"
    ):
        network_targets.read_upload(CARDINALITY_3, "c.uai")
    big = b"MARKOV\n" + b" " * MAX_UPLOAD_BYTES
    with pytest.raises(ValueError, match="the upload 'big.uai' holds 4.0 MB; at most 4.0 MB"):
        network_targets.read_upload(big, "big.uai")
    many = f"MARKOV\n2001\n{' '.join(['2'] * 2001)}\n0\n".encode()
    with pytest.raises(ValueError, match="the upload 'many.uai' declares 2,001 variables"):
        network_targets.read_upload(many, "many.uai")
    # a model whose only factor forbids every value: no state has positive probability
    dead = b"MARKOV\n1\n2\n1\n1 0\n2\n0 0\n"
    with pytest.raises(ValueError, match="the upload 'dead.uai': factor 0 .* probability zero"):
        network_targets.read_upload(dead, "dead.uai")
    # two factors that each allow a value the other forbids: the search finds nothing, and says so
    clash = b"MARKOV\n1\n2\n2\n1 0\n1 0\n2\n1 0\n2\n0 1\n"
    refused = r"the upload 'clash.uai': found no state .* over 1 chain \("
    with pytest.raises(ValueError, match=refused):
        network_targets.read_upload(clash, "clash.uai")


def test_network_graph_colours_are_the_marginal_exactly():
    cfg = replace(cfgmod.defaults_for(target="mn1"), samplers=("barker", "lsb1"), burn_in=5)
    graph = network_targets.preset("mn1", 1e-3)
    run, _ = state.build_network_run(cfg, graph, "MN 1")
    assert np.array_equal(run.problem.layout.positions, grid_positions((10, 10)))
    state.advance(run, 10.0, max_steps=3)  # burn-in: the chains' current mean
    p, what = network_graph.marginal(run, "lsb1")
    x = run.comparison["lsb1"].x.reshape(5, -1).double()
    assert np.allclose(p, ((x.mean(0) + 1) / 2).numpy(), atol=0) and what.startswith("burn-in")
    state.advance(run, 10.0, max_steps=7)  # past burn-in: the comparison's marginal
    assert run.phase == "mixing"
    p, what = network_graph.marginal(run, "barker")
    assert np.array_equal(p, run.comparison.marginals["barker"].mean().reshape(-1))
    assert "mixing records" in what
    fig = network_graph.graph_figure(run.problem.layout, p, "t")
    assert np.array_equal(np.asarray(fig.data[1].marker.color), p)
    assert len(fig.data[0].x) == 3 * len(run.problem.layout.edges)


# ----------------------------------------------------------------------------- the page
def test_mn1_runs_and_every_view_draws():
    at = open_app()
    healthy(at)
    at.sidebar.selectbox(key="target").set_value("mn1").run()
    healthy(at)
    run = at.session_state["_run"]
    assert network_run.is_network_run(run) and run.comparison.names == TABLE3
    assert run.config.burn_in == 500 and run.config.chains == 5
    at.number_input(key="burn_in").set_value(30).run()
    run = at.session_state["_run"]
    at.button(key="run").click().run()
    wait_for_steps(run, 50)
    at.button(key="pause").click().run()
    healthy(at)
    assert run.phase == "mixing"
    for view in VIEWS:
        at.session_state["network_view"] = view
        at.run()
        healthy(at)
        assert at.get("plotly_chart"), view
    assert any("Ising posterior" in str(c.value) for c in at.caption)  # what is not offered
    assert at.query_params["network_view"] == "Pinned runs"
    # the learned functions download as JSON that loads back as the run's own functions
    at.session_state["network_view"] = "Balancing functions"
    at.run()
    healthy(at)
    assert any("g(0) of the learned functions" in str(c.value) for c in at.caption)
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["LSB 1 (JSON)", "LSB 2 (JSON)", "LSB 2' (JSON)"], labels
    for name in ("lsb1", "lsb2", "lsb2-monotone"):
        data = learned_functions({name: run.comparison[name]})[name]
        loaded = load_balancing(json.loads(data))
        s = torch.linspace(-20, 20, 81, dtype=torch.float64)
        with torch.no_grad():
            assert torch.allclose(loaded.log_g(s), run.comparison[name].balancing.log_g(s))
    assert [p for p in at.get("popover")]  # "Pin this run", as on the other pages


def test_changing_target_and_epsilon_again_and_again():
    at = open_app(target="mn1", chains="2", burn_in="5")
    healthy(at)
    first = at.session_state["_run"]
    for target in ("mn2", "mn1", "mn2"):
        at.sidebar.selectbox(key="target").set_value(target).run()
        healthy(at)
        run = at.session_state["_run"]
        assert run.config.target == target
        assert run.problem.name == {"mn1": "MN 1", "mn2": "MN 2"}[target]
    assert run is not first
    zeros = []
    for epsilon in (0.0, 0.01, 0.0):
        at.number_input(key="epsilon").set_value(epsilon).run()
        assert not at.exception
        run = at.session_state["_run"]
        assert run.config.epsilon == epsilon and at.query_params["epsilon"] == repr(epsilon)
        zeros.append(network_targets.zero_entries(run.problem.target)[0])
        options = at.sidebar.multiselect(key="samplers").options
        gradient = [REGISTRY[n].label for n in ("gwg", "dmala")]
        assert all(any(g in o for o in options) for g in gradient) == (epsilon > 0)
        state.advance(run, 10.0, max_steps=3)
        at.run()
        assert not at.exception
    assert zeros[0] == zeros[2] > 0 == zeros[1]
    # hard zeros: the shared start was moved into the support, and the page says how
    assert all(
        torch.isfinite(run.problem.target.log_prob(s.x)).all()
        for s in run.comparison.samplers.values()
    )
    note = run.comparison.start_note
    assert note and any(plain(note)[:40] in str(w.value) for w in at.warning), note
    at.sidebar.selectbox(key="target").set_value("ising").run()
    healthy(at)
    assert not network_run.is_network_run(at.session_state["_run"])


def test_a_link_opens_mn2_and_a_bad_link_says_so():
    at = open_app(target="mn2", chains="2", network_view="Trace")
    healthy(at)
    run = at.session_state["_run"]
    assert network_run.is_network_run(run) and run.problem.name == "MN 2"
    assert at.get("plotly_chart")  # the traces
    at.button(key="step").click().run()  # Step: one plain step of every sampler
    healthy(at)
    assert at.session_state["_run"] is run and run.n_steps == 1
    at.button(key="reset").click().run()  # Reset: the same start again
    healthy(at)
    new = at.session_state["_run"]
    assert new is not run and new.n_steps == 0 and network_run.is_network_run(new)
    at = open_app(target="mn3")
    healthy(at)
    assert any(
        str(w.value).startswith(f"Link: target: {quote('mn3')} is not one of") for w in at.warning
    )
    assert not network_run.is_network_run(at.session_state["_run"])
    assert not rbm_run.is_rbm_run(at.session_state["_run"])


def test_bad_uploads_keep_what_there_was_and_say_why():
    at = open_app(target="mn1", chains="2", burn_in="5")
    healthy(at)
    mn1 = at.session_state["_run"]
    state.advance(mn1, 10.0, max_steps=4)
    at.sidebar.selectbox(key="target").set_value("uai").run()
    healthy(at)
    assert any("Upload a UAI model file" in str(i.value) for i in at.info)

    def upload(name: str, data: bytes) -> None:
        at.sidebar.file_uploader(key="network_upload").upload(name, data, "x/y")
        at.run()

    sentences = {
        "notes.uai": (b"hello, world", "is not a UAI model file"),
        "three.uai": (CARDINALITY_3, "only binary variables"),
        "huge.uai": (b"MARKOV\n" + b"1 " * (2 * 2**20 + 8), "at most 4.0 MB"),
    }
    for name, (data, words) in sentences.items():
        upload(name, data)
        assert not at.exception
        errors = [str(e.value) for e in at.sidebar.error]
        assert len(errors) == 1 and errors[0].startswith("This file cannot be sampled: ")
        assert plain(words) in errors[0] and plain(repr(name)) in errors[0], errors
        assert at.session_state["_run"] is mn1 and mn1.n_steps == 4  # nothing lost
    upload("ring.uai", RING)
    healthy(at)
    run = at.session_state["_run"]
    assert network_run.is_network_run(run) and run is not mn1
    assert run.problem.target.n_variables == 6 and run.problem.layout.kind == "spring"
    assert any("6 of its 24 table entries zero" in str(c.value) for c in at.sidebar.caption)
    # every start has positive probability, though a uniform draw often has none here
    assert all(
        torch.isfinite(run.problem.target.log_prob(s.x)).all()
        for s in run.comparison.samplers.values()
    )
    upload("notes.uai", b"not a model")
    assert at.session_state["_run"] is run  # the uploaded network stays
    assert any("Still sampling" in str(c.value) for c in at.sidebar.caption)
    # back to MN 1: its run was kept, paused, as it was
    at.sidebar.selectbox(key="target").set_value("mn1").run()
    healthy(at)
    back = at.session_state["_run"]
    assert network_run.is_network_run(back) and back.problem.name == "MN 1"


def test_every_network_view_has_its_presentation_sentence():
    from app.view_catalogue import ISING, NETWORK

    assert all(view.seeing for view in NETWORK.views)
    shared = set(NETWORK.labels) & set(ISING.labels)  # a view on both pages says the same
    assert shared and all(NETWORK.view(n).seeing == ISING.view(n).seeing for n in shared)
    at = open_app(target="mn1", chains="2", burn_in="5", present="1", network_view="ESS")
    healthy(at)
    html = " ".join(str(h.proto.body) for h in at.get("html"))
    assert "What you are seeing." in html and "Table 3 measure" in html
    assert any("ESS starts after burn-in" in str(i.value) for i in at.info)


def test_a_network_run_asks_for_cuda_and_falls_back_or_uses_it():
    cfg = replace(cfgmod.defaults_for(target="mn2"), samplers=("sqrt",), chains=2, device="cuda")
    run, messages = state.build_network_run(cfg, network_targets.preset("mn2", 0.0), "MN 2")
    state.advance(run, 10.0, max_steps=5)
    assert run.n_steps == 5
    if torch.cuda.is_available():
        assert run.comparison.device.type == "cuda" and messages == []
    else:
        assert run.device_label == "CPU"
        assert messages == ["No CUDA GPU is available here; running on the CPU instead."]
    # hard zeros: the shared start was moved inside the support, and the run says how
    assert run.notices == [escape(run.comparison.start_note)]
    assert run.comparison.start_note.startswith("2 of 2 chains started where p~ = 0")


def test_a_failing_view_says_so_in_its_tab_and_the_page_goes_on(monkeypatch):
    from app import view_catalogue
    from app.target_kind import TargetKind

    def broken(run):
        raise RuntimeError("a deliberate failure")

    page = view_catalogue.NETWORK
    views = tuple(replace(v, draw=broken) if v.label == "ESS" else v for v in page.views)
    monkeypatch.setitem(view_catalogue.PAGES, TargetKind.NETWORK, replace(page, views=views))
    at = open_app()
    at.sidebar.selectbox(key="target").set_value("mn1").run()
    at.session_state["network_view"] = "ESS"
    at.run()
    assert not at.exception
    assert [e.value for e in at.error] == ["The ESS view could not be drawn: a deliberate failure"]
    at.session_state["network_view"] = "Network"
    at.run()
    healthy(at)
    assert at.get("plotly_chart")


def test_a_target_chosen_again_comes_back_with_its_settings_and_its_run():
    """Samplers, chains and the posterior's parameters are kept per target (as per source): a
    network left for another target comes back with what was chosen for it, and its run; the
    speed cap is the page's and stays as last set."""
    at = open_app(target="mn1", burn_in="5")
    at.sidebar.multiselect(key="samplers").set_value(["barker", "lsb1"]).run()
    at.sidebar.slider(key="chains").set_value(3).run()
    healthy(at)
    run = at.session_state["_run"]
    state.advance(run, 10.0, max_steps=4)
    steps = run.n_steps
    assert steps > 0
    for away in ("mn2", "ising"):  # the other network starts from its own defaults
        at.sidebar.selectbox(key="target").set_value(away).run()
        healthy(at)
        if away == "mn2":
            assert (
                f"The run of the target left ({steps:,} steps) is kept, paused, for when you "
                "choose it again; this target's run starts here." in texts(at.info)
            )
            assert list(at.sidebar.multiselect(key="samplers").value) == TABLE3
            assert at.sidebar.slider(key="chains").value == network_targets.DEFAULT_CHAINS
    at.sidebar.number_input(key="lam").set_value(1.3).run()
    at.sidebar.select_slider(key="speed").set_value("20").run()
    healthy(at)
    at.sidebar.selectbox(key="target").set_value("mn1").run()
    healthy(at)
    assert list(at.sidebar.multiselect(key="samplers").value) == ["barker", "lsb1"]
    assert at.sidebar.slider(key="chains").value == 3
    assert at.session_state["_run"] is run and run.n_steps == steps  # its sampling kept
    assert f"Back to the run kept for this target: {steps:,} steps" in " ".join(texts(at.info))
    assert at.session_state["speed"] == "20"
    for target in ("ising", "mn1", "ising"):  # second and third returns alike
        at.sidebar.selectbox(key="target").set_value(target).run()
        healthy(at)
    assert at.sidebar.number_input(key="lam").value == 1.3
    assert list(at.sidebar.multiselect(key="samplers").value) == list(cfgmod.PAPER_SAMPLERS)
    assert at.session_state["_run"].config.lam == 1.3


# ----------------------------------------------------------------------------- pins
def test_a_network_run_is_pinned_and_its_ess_drawn_beside_later_runs(tmp_path, monkeypatch):
    """Pin this run on MN 1: the pin keeps the paper ESS per sampler; the Pinned runs tab draws
    it beside the current run's (grouped bars, one trace per run) with the settings that
    differ (ε, after a change), and on MN 2 lists it by name only."""
    from app import pin_store
    from app.views import network_pins

    monkeypatch.setattr(pin_store, "ROOT", tmp_path)
    at = open_app(target="mn1", chains="2", burn_in="5", samplers="barker,lsb1")
    run = at.session_state["_run"]
    state.advance(run, 10.0, max_steps=60)
    at.run()
    at.text_input(key="pin_name").input("eps default")
    at.button(key="pin_save").click().run()
    healthy(at)
    assert texts(at.success) == ["Pinned “eps default”: see the Pinned runs tab."]
    (entry,) = at.session_state[pin_store.STATE_KEY].entries()
    assert entry.pin.problem == "MN 1" and set(entry.pin.samplers) == {"barker", "lsb1"}
    assert entry.pin.samplers["barker"]["ess_paper_mean"] > 0
    at.number_input(key="epsilon").set_value(0.01).run()  # another ε: a new run, same network
    at.session_state["network_view"] = "Pinned runs"
    at.run()
    healthy(at)
    (chart,) = at.get("plotly_chart")
    bars = json.loads(chart.proto.spec)["data"]
    assert [b["name"] for b in bars] == ["Current run (step 0)", "1. eps default"]
    assert bars[1]["text"][0] == f"{entry.pin.samplers['barker']['ess_paper_mean']:.3g}"
    differ = [row["setting"] for row in at.dataframe[0].value.to_dict("records")]
    assert cfgmod.LABELS["epsilon"] in differ
    at.sidebar.selectbox(key="target").set_value("mn2").run()
    at.session_state["network_view"] = "Pinned runs"
    at.run()
    healthy(at)
    assert any("No pinned runs of this network yet" in t for t in texts(at.info))
    assert any(t.endswith("compared on their own page: eps default.") for t in texts(at.caption))
    assert network_pins.same_network(entry.pin, at.session_state["_run"]) is False
    assert pins.from_json(entry.pin.to_json().encode()) == entry.pin  # its file reads back
    # the tab manages the pins as the Ising page's Compare does: this one deleted here
    at.button(key=f"pin_delete_{entry.pin_id}").click().run()
    healthy(at)
    assert at.session_state[pin_store.STATE_KEY].entries() == []
    assert not any("compared on their own page" in t for t in texts(at.caption))
    # and added again from its file, on its own network's tab: drawn in that same page run
    at.sidebar.selectbox(key="target").set_value("mn1").run()
    at.session_state["network_view"] = "Pinned runs"
    at.run()
    at.file_uploader(key="pin_upload").upload("pin.json", entry.pin.to_json().encode(), "x/y")
    at.run()
    healthy(at)
    (chart,) = at.get("plotly_chart")
    names = [b["name"] for b in json.loads(chart.proto.spec)["data"]]
    assert names[1:] == ["1. eps default"]
    (entry,) = at.session_state[pin_store.STATE_KEY].entries()
    at.text_input(key=f"pin_rename_{entry.pin_id}").input("renamed")
    at.button(key=f"pin_rename_go_{entry.pin_id}").click().run()
    (chart,) = at.get("plotly_chart")  # a paused run: redrawn for the new name all the same
    assert [b["name"] for b in json.loads(chart.proto.spec)["data"]][1:] == ["1. renamed"]


def test_the_ising_compare_view_leaves_a_network_pin_to_its_own_page(tmp_path, monkeypatch):
    from app import pin_store

    monkeypatch.setattr(pin_store, "ROOT", tmp_path)
    at = open_app(target="mn1", chains="2", burn_in="5", samplers="barker")
    at.text_input(key="pin_name").input("a network")
    at.button(key="pin_save").click().run()
    at.sidebar.selectbox(key="target").set_value("ising").run()
    at.session_state["view"] = "Compare"
    at.run()
    healthy(at)
    assert any(t.endswith("compared on their own page: a network.") for t in texts(at.caption))
    assert not [m for m in at.multiselect if m.key == "compare_runs"]  # nothing to compare
    assert any(t.startswith("No pinned runs of this posterior yet.") for t in texts(at.info))
