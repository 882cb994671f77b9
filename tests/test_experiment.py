"""The experiment command end to end on tiny configurations, its recorder and its results."""

from __future__ import annotations

import csv
import json
import math
import re

import numpy as np
import pytest
import torch
from PIL import Image

from lsbcore import (
    CSV_COLUMNS,
    Comparison,
    load_balancing,
    paper_case,
    write_traces_csv,
)
from lsbcore.samplers.registry import APP_SAMPLERS
from lsbcore.studies.experiment import (
    CHOICES,
    DEFAULT_SAMPLERS,
    ArrayTrace,
    RecordingComparison,
    main,
    thin_for_csv,
)
from lsbcore.studies.results import (
    SAMPLER_FIELDS,
    comparison_results,
    effective_max_lag,
    results_to_json,
)

TINY = ["--case", "3", "--size", "6", "--chains", "4", "--burn-in", "40", "--steps", "200"]
TINY += ["--samplers", "barker,lsb1,lsb2", "--csv-thin", "1", "--quiet"]
NAMES = ["barker", "lsb1", "lsb2"]


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny tensors run far faster on one thread (as the experiment itself runs them)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def strict_json(text: str):
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON token {c}"))


@pytest.fixture(scope="module")
def run1(tmp_path_factory):
    out = tmp_path_factory.mktemp("run1")
    assert main([*TINY, "--workers", "1", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def run2(tmp_path_factory):
    out = tmp_path_factory.mktemp("run2")
    assert main([*TINY, "--workers", "2", "--out", str(out)]) == 0
    return out


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


# ----------------------------------------------------------------------------- outputs
def test_results_json_schema(run1):
    results = strict_json((run1 / "results.json").read_text())
    assert {"config", "device", "versions", "samplers"} <= set(results)
    assert set(results["versions"]) == {"lsb_explorer", "torch", "numpy", "python", "arviz_stats"}
    assert results["device"] == "cpu"
    config = results["config"]
    assert config["case"] == 3 and config["chains"] == 4 and config["size"] == 6
    assert config["burn_in"] == 40 and config["steps"] == 200 and config["thin"] == 1
    assert config["samplers"] == NAMES
    assert config["max_lag"] == 100 and config["max_lag_requested"] == 500  # 200 // 2
    assert config["chains_share_posterior"] is False
    assert "python -m lsbcore.experiment " in config["command"] and "--case 3" in config["command"]
    assert list(results["samplers"]) == NAMES
    for name, entry in results["samplers"].items():
        assert list(entry) == list(SAMPLER_FIELDS), name
        for key in ("ess_paper_mean", "ess_paper_std", "ess_bulk_chain_mean", "accept_rate"):
            assert isinstance(entry[key], float) and math.isfinite(entry[key]), (name, key)
        # a paper case gives every chain its own alpha: nothing is pooled over chains
        assert entry["ess_bulk"] is None and entry["rhat"] is None
        assert 1.0 <= entry["ess_paper_mean"] <= 101.0
        assert 0.0 < entry["accept_rate"] <= 1.0
        assert 0.0 <= entry["final_accuracy"] <= 1.0
        assert isinstance(entry["target_evals"], int) and entry["target_evals"] >= 240 * 5
        assert entry["burnin_seconds"] >= 0 and entry["mixing_seconds"] > 0
    assert results["timings"]["total_seconds"] > 0


def test_traces_csv_columns_and_rows(run1):
    rows = read_csv(run1 / "traces.csv")
    assert tuple(rows[0]) == CSV_COLUMNS
    body = rows[1:]
    records = 40 + 200 + 1  # every step of burn-in and mixing, plus the start
    assert len(body) == len(NAMES) * records * 4
    assert [r[0] for r in body[:: records * 4]] == NAMES  # one block per sampler, in order
    phases = {r[3] for r in body}
    assert phases == {"burnin", "mixing"}
    mixing = [r for r in body if r[0] == "barker" and r[3] == "mixing"]
    assert len(mixing) == 200 * 4
    for r in body[:50]:
        assert abs(float(r[5])) <= 36 and 0 <= float(r[7]) <= 1  # magnetisation, accuracy


def test_report_is_self_contained(run1):
    import base64
    import gzip

    from lsbcore.studies.figures import plotly_js

    text = (run1 / "report.html").read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    packed = re.findall(
        r'<script type="application/octet-stream" id="plotly-gzip">(.*?)</script>', text
    )
    assert len(packed) == 1  # the bundle, embedded once, gzip'd: 1.9 MB instead of 4.8 MB
    assert gzip.decompress(base64.b64decode(packed[0])).decode("utf-8") == plotly_js()
    assert "* plotly.js v" not in text
    assert not re.search(r"<script[^>]+src\s*=", text, flags=re.IGNORECASE)
    assert not re.search(r"<link[^>]+href\s*=\s*[\"']?https?:", text, flags=re.IGNORECASE)
    assert text.count("data-figure=") >= 8 and "Plotly.newPlot" in text
    assert "Command: <code>python -m lsbcore.experiment --case 3" in text
    assert "paper Table 2" not in text  # 6 x 6 and 200 steps: not the paper's run
    for heading in ("autocorrelation", "effective sample size", "Balancing functions"):
        assert heading.lower() in text.lower()
    assert "LSB 1: mixture weights" in text and "Learning" in text


def test_paper_table_2_stands_beside_the_paper_s_own_setting_only():
    from lsbcore.studies.experiment.report import paper_comparable

    paper = {"case": 3, "lam": 1.0, "mu": 1.0, "sigma": 3.0, "shape": [30, 30], "max_lag": 500}
    assert paper_comparable(paper)
    assert paper_comparable({**paper, "source": "paper", "shape": None, "size": 30})
    assert not paper_comparable({**paper, "source": "sample"})  # the app keeps case=3 for photos
    assert not paper_comparable({**paper, "lam": 0.5})
    assert not paper_comparable({**paper, "shape": [6, 6]})
    assert not paper_comparable({**paper, "max_lag": 100})
    assert not paper_comparable({**paper, "case": None})


def test_learned_functions_load_back(run1):
    for name in ("lsb1", "lsb2"):
        balancing = load_balancing(run1 / f"learned_{name}.json")
        t = np.logspace(-2, 2, 9)
        np.testing.assert_allclose(t * balancing.g(1 / t), balancing.g(t), rtol=1e-10)
    data = json.loads((run1 / "learned_lsb1.json").read_text())
    assert data["meta"]["sampler"] == "lsb1" and data["meta"]["burn_in"] == 40
    assert not (run1 / "learned_barker.json").exists()


def test_results_do_not_depend_on_workers(run1, run2):
    r1 = strict_json((run1 / "results.json").read_text())
    r2 = strict_json((run2 / "results.json").read_text())
    timing = {"burnin_seconds", "mixing_seconds"}
    for name in NAMES:
        a = {k: v for k, v in r1["samplers"][name].items() if k not in timing}
        b = {k: v for k, v in r2["samplers"][name].items() if k not in timing}
        assert a == b, name
    c1, c2 = read_csv(run1 / "traces.csv"), read_csv(run2 / "traces.csv")
    wall = CSV_COLUMNS.index("wall_s")
    assert len(c1) == len(c2)
    assert all(a[:wall] == b[:wall] for a, b in zip(c1, c2, strict=True))
    for name in ("lsb1", "lsb2"):
        j1 = json.loads((run1 / f"learned_{name}.json").read_text())
        j2 = json.loads((run2 / f"learned_{name}.json").read_text())
        assert j1["parameters"] == j2["parameters"]


# ----------------------------------------------------------------------------- images
@pytest.fixture(scope="module")
def png(tmp_path_factory):
    yy, xx = np.mgrid[0:24, 0:20]
    disc = ((yy - 12) ** 2 + (xx - 10) ** 2 < 40).astype(np.uint8)
    path = tmp_path_factory.mktemp("img") / "disc <b>&.png"
    Image.fromarray(40 + 180 * disc).save(path)
    return path


def test_image_problem_end_to_end(png, tmp_path):
    out = tmp_path / "img"
    args = ["--image", str(png), "--lam", "0.8", "--mu", "1", "--sigma", "0.5", "--noise", "0.3"]
    args += ["--size", "12", "--chains", "3", "--burn-in", "20", "--steps", "120", "--quiet"]
    args += ["--samplers", "sqrt,lsb1,gibbs", "--workers", "1", "--out", str(out)]
    assert main(args) == 0
    results = strict_json((out / "results.json").read_text())
    assert results["config"]["image"] == str(png)
    assert results["config"]["shape"] == [12, 10]
    assert len(results["config"]["image_sha256"]) == 64
    assert results["samplers"]["sqrt"]["final_accuracy"] > 0.5  # noise gives a ground truth
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "disc &lt;b&gt;&amp;.png" in report
    assert "disc <b>&" not in report
    assert (out / "learned_lsb1.json").exists()


def test_image_without_noise_has_no_accuracy(png, tmp_path):
    args = ["--image", str(png), "--lam", "1", "--mu", "1", "--sigma", "1", "--size", "8"]
    args += ["--chains", "2", "--burn-in", "0", "--steps", "20", "--samplers", "barker"]
    args += ["--quiet", "--out", str(tmp_path)]
    assert main(args) == 0
    results = strict_json((tmp_path / "results.json").read_text())
    entry = results["samplers"]["barker"]
    assert entry["final_accuracy"] is None
    assert results["config"]["max_lag"] == 10
    assert "accuracy" not in read_csv(tmp_path / "traces.csv")[1][7]


def test_the_command_offers_every_registered_sampler_and_runs_checkerboard_gibbs(tmp_path):
    # the registry decides: the dashboard's samplers but the file-built "learned"; the paper's
    # six by default (the samplers on any target run from the library and the benchmarks)
    assert set(CHOICES) == set(APP_SAMPLERS) - {"learned"} and "checkerboard" in CHOICES
    assert DEFAULT_SAMPLERS == ("barker", "sqrt", "min", "max", "lsb1", "lsb2")
    out = tmp_path / "block"
    args = ["--case", "3", "--size", "6", "--chains", "2", "--burn-in", "10", "--steps", "40"]
    assert main([*args, "--samplers", "checkerboard,gibbs", "--quiet", "--out", str(out)]) == 0
    results = strict_json((out / "results.json").read_text())
    assert set(results["samplers"]) == {"checkerboard", "gibbs"}
    assert 0.0 <= results["samplers"]["checkerboard"]["accept_rate"] <= 1.0
    assert "Checkerboard Gibbs" in (out / "report.html").read_text(encoding="utf-8")


# ----------------------------------------------------------------------------- bad arguments
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--case", "3", "--samplers", "barker,foo"], "choose from: barker, sqrt"),
        (["--case", "3", "--samplers", "barker,barker"], "listed twice"),
        (["--case", "3", "--chains", "0"], "--chains"),
        (["--case", "3", "--size", "100000"], "between 3 and 256"),
        (["--case", "3", "--steps", "-5"], "--steps"),
        (["--case", "3", "--burn-in", "x"], "expected an integer"),
        (["--case", "5"], "invalid choice"),
        (["--case", "3", "--lam", "1"], "only apply to --image"),
        (["--case", "3", "--steps", "10", "--thin", "20"], "--thin"),
        (["--case", "3", "--lr", "0"], "--lr"),
        (["--case", "3", "--device", "tpu"], "invalid choice"),
        (["--image", "missing.png", "--lam", "1", "--mu", "1", "--sigma", "1"], "no file"),
        (["--image", "x.png", "--lam", "1"], "needs --mu, --sigma"),
        (["--image", "x.png", "--lam", "1", "--mu", "1", "--sigma", "0"], "--sigma"),
        (["--samplers", "barker"], "one of the arguments --case --image is required"),
    ],
)
def test_bad_arguments_exit_2(args, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*args, "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_bad_image_and_output_exit_2(tmp_path, capsys):
    fake = tmp_path / "notes.png"
    fake.write_text("not an image")
    with pytest.raises(SystemExit) as exc:
        main(["--image", str(fake), "--lam", "1", "--mu", "1", "--sigma", "1", "--out", "o"])
    assert exc.value.code == 2
    assert "--image" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SystemExit) as exc:
        main(["--case", "1", "--out", str(blocker / "sub")])
    assert exc.value.code == 2
    assert "--out" in capsys.readouterr().err


def test_a_huge_image_file_is_refused_before_it_is_read(tmp_path, capsys):
    """Issue 47: --image read the whole file before the 25 MB cap (an 8 GB sparse file reached
    1.5 GB resident in 10 s). A 4 GB sparse file is now refused from its size, nothing read."""
    import tracemalloc

    huge = tmp_path / "huge.png"
    with open(huge, "wb") as f:
        f.truncate(4 * 10**9)  # sparse: no disk used
    tracemalloc.start()
    try:
        with pytest.raises(SystemExit) as exc:
            main(["--image", str(huge), "--lam", "1", "--mu", "1", "--sigma", "1", "--out", "o"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert exc.value.code == 2
    assert "files up to 25 MB are accepted" in capsys.readouterr().err
    assert peak < 50 * 2**20, peak


def test_a_new_output_folder_is_created(tmp_path):
    out = tmp_path / "new"  # in an existing folder: a missing one is refused (test_output_paths)
    args = ["--case", "1", "--size", "4", "--chains", "2", "--burn-in", "0", "--steps", "5"]
    assert main([*args, "--samplers", "min", "--quiet", "--out", str(out)]) == 0
    assert (out / "results.json").exists() and (out / "report.html").exists()
    results = strict_json((out / "results.json").read_text())
    assert results["config"]["max_lag"] == 2
    assert results["samplers"]["min"]["rhat"] is None or math.isfinite(
        results["samplers"]["min"]["rhat"]
    )


# ----------------------------------------------------------------------------- recorder
@pytest.mark.parametrize(("case", "thin"), [(3, 1), (1, 3)])
def test_recording_comparison_matches_comparison(case, thin):
    problem = paper_case(case, n=8, n_chains=5, seed=2)
    names = ["barker", "lsb1", "gibbs", "max"]
    kwargs = dict(seed=4, device="cpu", x0=problem.x0, thin=thin, truth=problem.truth)
    reference = Comparison(names, problem.target, 5, **kwargs)
    fast = RecordingComparison(names, problem.target, 5, capacity=3, **kwargs)
    for comparison in (reference, fast):
        comparison.step(37, learn=True)
        comparison.start_mixing()
        comparison.step(300)
    fast.flush()
    for name in names:
        a, b = reference.traces[name].arrays(), fast.traces[name].arrays()
        assert set(a) == set(b)
        for key in a:
            if key == "wall_s":
                continue
            if key == "log_p":
                np.testing.assert_allclose(a[key], b[key], rtol=1e-6, atol=1e-4)
            else:
                np.testing.assert_array_equal(a[key], b[key], err_msg=f"{name} {key}")
        np.testing.assert_array_equal(
            reference.traces[name].mixing_series(), fast.traces[name].mixing_series()
        )


def test_recorder_without_cached_log_ratios_records_exact_log_p():
    problem = paper_case(4, n=5, n_chains=3, seed=1)
    kwargs = dict(seed=0, device="cpu", x0=problem.x0, thin=1, truth=problem.truth)
    fast = RecordingComparison(["sqrt"], problem.target, 3, **kwargs)
    fast._recorders["sqrt"]._fast = False
    fast.step(50)
    fast.flush()
    reference = Comparison(["sqrt"], problem.target, 3, **kwargs)
    reference.step(50)
    np.testing.assert_allclose(
        fast.traces["sqrt"].arrays()["log_p"], reference.traces["sqrt"].arrays()["log_p"],
        rtol=1e-6,
    )  # fmt: skip


def test_array_trace_rules_and_csv_like_trace():
    truth = torch.ones(2, 2, dtype=torch.float64)
    trace = ArrayTrace(2, thin=1, truth=truth, capacity=1)
    x = torch.tensor([[[1.0, -1.0], [1.0, 1.0]], [[-1.0, -1.0], [-1.0, -1.0]]])
    assert trace.record(0, x, torch.tensor([1.5, -2.0]), 5, 0.0, 0.0, "burnin")
    assert not trace.record(0, x, torch.tensor([1.5, -2.0]), 5, 0.0, 0.0, "burnin")
    assert trace.record(1, x, torch.tensor([1.5, -2.0]), 10, 0.5, 0.1, "mixing")
    with pytest.raises(ValueError):
        trace.record(2, x, torch.tensor([1.5, -2.0]), 10, 0.5, 0.1, "burnin")
    with pytest.raises(ValueError):
        trace.extend([1], np.zeros((1, 3, 2)), [0], [0.0], [0.0], [1])
    arrs = trace.arrays()
    np.testing.assert_array_equal(arrs["magnetisation"], [[2.0, -4.0], [2.0, -4.0]])
    np.testing.assert_allclose(arrs["accuracy"], [[0.75, 0.0], [0.75, 0.0]])
    assert trace.mixing_series().shape == (2, 1)
    import io

    buf = io.StringIO()
    assert write_traces_csv(buf, {"barker": trace}) == 4
    lines = buf.getvalue().splitlines()
    assert lines[0] == ",".join(CSV_COLUMNS) and lines[1].startswith("barker,0,5,burnin,0,2,")


# ----------------------------------------------------------------------------- results
def test_effective_max_lag():
    assert effective_max_lag(30_000) == 500
    assert effective_max_lag(1000) == 500
    assert effective_max_lag(999) == 499
    assert effective_max_lag(200, 50) == 50
    assert effective_max_lag(3) == 1
    assert effective_max_lag(1) is None
    with pytest.raises(ValueError):
        effective_max_lag(100, 0)


def test_comparison_results_from_a_comparison():
    problem = paper_case(2, n=6, n_chains=3, seed=0)
    comparison = Comparison(["min", "lsb1"], problem.target, 3, x0=problem.x0, thin=1, device="cpu")
    comparison.step(10, learn=True)
    comparison.start_mixing()
    comparison.step(60)
    results = comparison_results(
        comparison, {"case": 2}, {"min": 0.1}, {"min": float("nan")}, max_lag=500
    )
    assert results["config"]["max_lag"] == 30 and results["config"]["case"] == 2
    entry = results["samplers"]["min"]
    assert entry["final_accuracy"] is None  # the comparison has no truth
    assert entry["mixing_seconds"] is None and entry["burnin_seconds"] == 0.1
    assert results["samplers"]["lsb1"]["burnin_seconds"] is None
    assert math.isfinite(entry["ess_paper_mean"])
    assert entry["target_evals"] == comparison["min"].n_target_evals
    assert entry["accept_rate"] == pytest.approx(comparison["min"].accept_rate)
    text = results_to_json({**results, "extra": [float("inf"), np.float32(2.5), np.int64(3)]})
    parsed = strict_json(text)
    assert parsed["extra"] == [None, 2.5, 3]


def test_comparison_results_with_truth_and_no_mixing():
    problem = paper_case(3, n=6, n_chains=2, seed=0)
    comparison = Comparison(
        ["barker"], problem.target, 2, x0=problem.x0, thin=1, truth=problem.truth, device="cpu"
    )
    comparison.step(5)
    results = comparison_results(comparison, {}, {}, {})
    entry = results["samplers"]["barker"]
    assert entry["ess_paper_mean"] is None and results["config"]["max_lag"] is None
    x = comparison["barker"].x
    expected = float((x == problem.truth).double().mean())
    assert entry["final_accuracy"] == pytest.approx(expected)
    strict_json(results_to_json(results))


def test_csv_thin_keeps_burn_in_and_every_nth_mixing_record(tmp_path):
    args = ["--case", "2", "--size", "4", "--chains", "2", "--burn-in", "10", "--steps", "25"]
    args += ["--samplers", "max", "--csv-thin", "10", "--quiet", "--out", str(tmp_path)]
    assert main(args) == 0
    steps = sorted({int(r[1]) for r in read_csv(tmp_path / "traces.csv")[1:]})
    assert steps == [*range(11), 20, 30, 35]
    results = strict_json((tmp_path / "results.json").read_text())
    assert results["config"]["csv_thin"] == 10 and results["config"]["max_lag"] == 12


def test_thin_for_csv_is_identity_for_one():
    trace = ArrayTrace(1, capacity=1)
    assert thin_for_csv(trace, 1) is trace
    assert len(thin_for_csv(trace, 5)) == 0


def test_comparison_results_uses_precomputed_summaries_only_when_they_match():
    import dataclasses

    from lsbcore.diagnostics.mixing import summarise_mixing

    problem = paper_case(1, n=5, n_chains=2, seed=0)
    comparison = Comparison(["min"], problem.target, 2, x0=problem.x0, thin=1, device="cpu")
    comparison.start_mixing()
    comparison.step(60)
    series = comparison.traces["min"].mixing_series()
    exact = summarise_mixing(series, max_lag=30)
    planted = dataclasses.replace(exact, ess_paper_mean=123.0)
    used = comparison_results(comparison, {}, {}, {}, summaries={"min": planted})
    assert used["samplers"]["min"]["ess_paper_mean"] == 123.0
    stale = dataclasses.replace(planted, max_lag=10)
    fresh = comparison_results(comparison, {}, {}, {}, summaries={"min": stale})
    assert fresh["samplers"]["min"]["ess_paper_mean"] == pytest.approx(exact.ess_paper_mean)


def test_experiment_equals_one_comparison_of_all_samplers(run1):
    """Per-sampler tasks give what one Comparison of every sampler gives (independent RNGs)."""
    problem = paper_case(3, n=6, n_chains=4, seed=0, start="per_chain")  # the command's default
    comparison = Comparison(
        NAMES, problem.target, 4, seed=0, device="cpu", x0=problem.x0, thin=1, truth=problem.truth
    )
    comparison.step(40, learn=True)
    comparison.start_mixing()
    comparison.step(200)
    rows = read_csv(run1 / "traces.csv")[1:]
    column = CSV_COLUMNS.index("magnetisation")
    for name in NAMES:
        recorded = np.array([float(r[column]) for r in rows if r[0] == name]).reshape(-1, 4)
        np.testing.assert_array_equal(recorded, comparison.traces[name].arrays()["magnetisation"])


def test_the_report_draws_every_figure_in_a_browser(run1):
    """The report unpacks its plotly.js and draws each figure from its JSON, offline."""
    from playwright.sync_api import sync_playwright

    from tools.browser_kit import launch_chromium

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page()
            errors = []
            page.on("pageerror", lambda err: errors.append(str(err)))
            page.goto((run1 / "report.html").as_uri())
            page.wait_for_selector("body[data-figures-drawn=yes]", timeout=60_000)
            figures = page.locator("div.figure").count()
            drawn = page.locator("div.figure .main-svg").count()
            assert figures >= 8 and drawn >= figures and not errors
            assert page.locator("#charts-missing").is_hidden()
        finally:
            browser.close()
