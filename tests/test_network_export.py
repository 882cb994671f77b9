"""The network page's Export tab: the report, results, traces and learned functions of a Markov
network's run carry that run's own settings (not the Ising page's, kept in the configuration for
the way back), their names change with every setting that changes the run and with an uploaded
file's contents, and the link reopens the network.

AppTest runs the real script on short runs; the statistics in the files are the library's,
tested against exact answers elsewhere.
"""

from __future__ import annotations

import csv
import datetime
import gzip
import io
import json
from dataclasses import replace
from types import SimpleNamespace
from urllib.parse import parse_qsl, urlsplit

import pytest
import torch
from app_support import open_app, stop_runs_fixture  # noqa: F401  (autouse)

from app import config as cfgmod
from app import sources, state
from app.file_names import export_stem
from app.views import export
from lsbcore import load_balancing
from lsbcore.studies.experiment.report import paper_comparable
from lsbcore.targets.factor_graph import FactorGraph

DAY = datetime.date(2026, 12, 1)
LEARNED = ("lsb1", "lsb2", "lsb2-monotone")


def healthy(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def ring(weight: float = 2.0) -> bytes:
    """A ring of 6 binary variables in the MARKOV format; ``weight`` is each table's last entry."""
    return (
        "MARKOV\n6\n2 2 2 2 2 2\n6\n"
        + "".join(f"2 {i} {(i + 1) % 6}\n" for i in range(6))
        + "".join(f"4\n 1.0 0.5 0.5 {weight}\n" for _ in range(6))
    ).encode()


@pytest.fixture(scope="module")
def mn1():
    """An MN 1 run past its burn-in (20 steps) with the paper's samplers, a Ising setting
    changed before the target was (lambda 2.5: kept for the way back), on the Export tab."""
    at = open_app(lam="2.5", target="mn1", chains="3", burn_in="20", network_view="Export")
    healthy(at)
    run = at.session_state["_run"]
    state.advance(run, 30.0, max_steps=120)
    at.run()
    healthy(at)
    yield at, run
    state._pause_all_runs()


def test_the_export_tab_offers_the_report_results_and_learned_functions(mn1):
    at, run = mn1
    assert run.config.lam == 2.5 and run.comparison.phase == "mixing"
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Report (HTML)", "Results (JSON)", "LSB 1 (JSON)", "LSB 2 (JSON)",
                      "LSB 2' (JSON)"], labels  # fmt: skip
    not_offered = [str(c.value) for c in at.caption if "Ising posterior" in str(c.value)]
    assert not_offered and not any("export" in c for c in not_offered)  # offered now
    # the traces are prepared on request, then offered with their size
    at.button(key="prepare_traces").click().run()
    healthy(at)
    traces = [b.label for b in at.get("download_button") if b.label.startswith("Traces")]
    assert traces and f"at step {run.n_steps:,}" in traces[0], traces


def test_the_results_carry_the_run_settings_and_every_sampler(mn1):
    _, run = mn1
    results = json.loads(export.results_json(run))
    config = results["config"]
    own = cfgmod.run_settings(run.config)
    assert {k: config[k] for k in own} == own and config["problem"] == "MN 1"
    assert own["epsilon"] == run.config.epsilon and own["chains"] == 3
    for ising in ("lam", "mu", "sigma", "case", "source", "sample", "size", "start"):
        assert ising not in config, ising
    assert list(results["samplers"]) == run.comparison.names
    assert all(s["final_accuracy"] is None for s in results["samplers"].values())  # no truth
    assert all(s["ess_paper_mean"] > 0 for s in results["samplers"].values())


def test_a_network_report_is_never_set_beside_the_papers_table_2(mn1):
    """The configuration a network run keeps says paper case 3 at its own lambda, mu, sigma and
    size (the Ising page's defaults): given whole, with the paper's window, the report would
    put Table 2's case 3 column beside MN 1's ESS. The network's own settings never do."""
    _, run = mn1
    kept = SimpleNamespace(config=replace(run.config, lam=1.0), problem=run.problem)
    assert paper_comparable({**kept.config.as_dict(), "max_lag": 500})  # the risk guarded
    assert not paper_comparable({**export.run_config(kept), "max_lag": 500})
    html = export.report_html(run)
    assert "paper Table 2" not in html and "lsbcore.experiment --case" not in html
    assert export.NETWORK_COMMAND_NOTE.split(":")[0] in html
    assert "LSB Explorer experiment: MN 1" in html
    # MN 1 is a distribution, not a posterior: its burn-in figure says so
    assert "Burn-in: log probability" in html and "log posterior" not in html


def test_the_report_names_a_posterior_only_where_the_target_is_one(mn1):
    from app.selection_target import SyntheticSelection
    from lsbcore import IsingPosterior
    from lsbcore.studies.experiment.report import target_density

    assert target_density(mn1[1].problem.target) == "probability"
    assert target_density(SyntheticSelection(30, 4, 5)) == "posterior"
    assert target_density(IsingPosterior(torch.zeros(2, 2), 1.0, "free")) == "posterior"


def test_traces_and_learned_functions_are_the_runs_own(mn1):
    _, run = mn1
    with run.lock:
        data = export.traces_gzip(run.comparison.traces)
        rows = sum(len(t) * t.n_chains for t in run.comparison.traces.values())
        files = export.learned_functions({n: run.comparison[n] for n in LEARNED})
    table = list(csv.reader(io.StringIO(gzip.decompress(data).decode("utf-8"))))
    assert len(table) == rows + 1
    assert {row[0] for row in table[1:]} == set(run.comparison.names)
    s = torch.linspace(-20, 20, 81, dtype=torch.float64)
    for name in LEARNED:
        loaded = load_balancing(json.loads(files[name]))
        with torch.no_grad():
            assert torch.allclose(loaded.log_g(s), run.comparison[name].balancing.log_g(s))


def test_the_link_reopens_the_network_run(mn1):
    at, run = mn1
    (link,) = [str(c.value) for c in at.code if "target=mn1" in str(c.value)]
    params = dict(parse_qsl(urlsplit(link).query))
    assert set(params) == {*cfgmod.run_settings(run.config), "speed"}  # no lam, case, size...
    back, warnings = cfgmod.from_query_params(params, sources.sample_names())
    assert warnings == []
    assert cfgmod.run_settings(back) == cfgmod.run_settings(run.config)
    assert back.speed == run.config.speed


def network_run(target: str = "mn1", name: str = "MN 1", graph=None, **changes):
    """A network run as the download names see it (nothing is sampled)."""
    return SimpleNamespace(
        config=replace(cfgmod.defaults_for(target=target), **changes),
        problem=SimpleNamespace(name=name, target=graph, data=None),
        source=None,
        cache={},
    )


def replace_config(run, **changes):
    run.config = replace(run.config, **changes)
    return run


def test_network_file_names_change_with_the_networks_settings_only():
    base = export_stem(network_run(), DAY)
    assert base.startswith("lsb-mn-1-seed0-") and base.endswith("-2026-12-01")
    # the Ising page's settings, kept for the way back, do not change a network's files
    for ising in ({"lam": 2.0}, {"case": 1}, {"size": 64}, {"source": "upload"}, {"start": "ones"}):
        assert export_stem(network_run(**ising), DAY) == base, ising
    names = {base}
    for change in ({"epsilon": 0.01}, {"chains": 2}, {"seed": 1}, {"burn_in": 50},
                   {"steps": 500}, {"lr": 0.001}, {"samplers": ("barker", "sqrt")}):  # fmt: skip
        names.add(export_stem(network_run(**change), DAY))
    assert len(names) == 8
    assert export_stem(network_run(target="mn2", name="MN 2"), DAY).startswith("lsb-mn-2-seed0-")


def test_two_uploads_of_one_name_get_different_file_names():
    def upload(weight):
        graph = FactorGraph.from_uai(ring(weight).decode())
        return network_run(target="uai", name="ring.uai", graph=graph)

    first, again, other = upload(2.0), upload(2.0), upload(3.0)
    assert export_stem(first, DAY) == export_stem(again, DAY)
    assert export_stem(first, DAY) != export_stem(other, DAY)
    # the preset's epsilon does not shape an upload
    assert export_stem(upload(2.0), DAY) == export_stem(
        replace_config(upload(2.0), epsilon=0.2), DAY
    )


def test_variable_selection_files_carry_its_data_settings():
    run = network_run(target="vs", name="variable selection")
    settings = cfgmod.run_settings(run.config)
    assert {"features", "informative", "data_seed"} <= set(settings)
    assert "epsilon" not in settings
    base = export_stem(run, DAY)
    assert export_stem(replace_config(network_run("vs", "variable selection"), data_seed=3),
                       DAY) != base  # fmt: skip


def test_an_uploaded_networks_link_says_to_upload_the_file_again():
    at = open_app(target="uai", chains="2", burn_in="5", network_view="Export")
    healthy(at)
    at.sidebar.file_uploader(key="network_upload").upload("ring.uai", ring(), "x/y")
    at.run()
    healthy(at)
    run = at.session_state["_run"]
    assert run.problem.name == "ring.uai"
    captions = [str(c.value) for c in at.caption]
    assert any("not the uploaded network: upload its file again" in c for c in captions)
    assert not any("not the uploaded image" in c for c in captions)
    assert export_stem(run).startswith("lsb-ring-uai-seed0-")
