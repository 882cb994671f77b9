"""The flow section of docs/reproduction.md, written from a tiny fake result: its numbers are the
results' (mean ± sd over seeds), each claim's verdict follows the numbers, and the section is
replaced in place without touching the other generated sections."""

import copy

import pytest

from lsbcore.studies.flows import report
from lsbcore.studies.flows.comparison import SAMPLERS
from lsbcore.studies.rbm.report import keep_section


def _figures(ess_1e4, per_min, total, log_p=100.0, accept=0.5):
    return {
        "burn_in": 0, "steps": 1000, "thin": 10, "draws": 100, "evals_per_step": 1,
        "evals_per_chain": 1000, "seconds": 2.0, "cost_before_seconds": 5.0, "ess": 50.0,
        "frozen_sites": 3, "kept_samples": 400, "ess_per_1e4": ess_1e4,
        "ess_per_1000_evals": ess_1e4 / 10, "ess_per_min": per_min,
        "ess_per_min_total": total, "accept": accept, "mean_log_p": log_p, "std_log_p": 1.0,
        "ess_per_1e4_kept": 2 * ess_1e4, "ess_per_1e4_kept_groups": [1.5 * ess_1e4, 2.5 * ess_1e4],
    }  # fmt: skip


def _problem(size):
    bits = [1, 0] * (size * size // 2)
    return {
        "size": size, "index": 0, "label": 0, "seed": 0, "flip": 0.1, "beta": 1.0,
        "eta": 2.1, "flipped": 2, "n_sites": size * size,
        "description": f"fake digit {size}x{size}", "clean": bits, "noisy": bits[::-1],
    }  # fmt: skip


def fake_results(flow_wins_large=True, flow_wins_small=False):
    """Two seeds on a "16" and an "8" problem; on "16" the flow samplers have ten times the
    baselines' figures when ``flow_wins_large`` (a tenth otherwise), likewise on "8"."""
    problems = {}
    for size, wins in (("16", flow_wins_large), ("8", flow_wins_small)):
        runs = []
        for seed, wobble in ((0, 1.0), (1, 3.0)):
            samplers = {}
            for name in SAMPLERS:
                base = 20.0 + wobble
                value = base * (10 if wins else 0.1) if name.startswith("flow") else base
                samplers[name] = _figures(value, value * 60, value * 30, log_p=value)
            flow = {"seconds": 12.5 + seed, "elbo": 150.0 + seed, "steps": 1000, "failed": None}
            runs.append({"seed": seed, "flow": flow, "samplers": samplers})
        problems[size] = {"problem": _problem(int(size)), "runs": runs}
    config = {
        "command": "python -m lsbcore.experiment --target flow-denoising",
        "protocol_name": "scaled",
        "protocol": {"chains": 4, "steps": 1000, "burn_in": 100, "short_steps": 100,
                     "short_burn_in": 10, "flow_steps": 100, "draws": 100, "train_steps": 1000,
                     "batch": 128, "importance": 4},
        "paper": {"chains": 128, "steps": 100_000, "burn_in": 10_000, "flow_steps": 100_000,
                  "train_steps": 1000, "thin": 10},
        "sizes": [16, 8], "digit": 0, "noise_seed": 0, "seeds": [0, 1],
        "samplers": list(SAMPLERS), "threads": 1, "device": "cpu",
    }  # fmt: skip
    return {"problems": problems, "total_seconds": 90.0, "config": config}


def test_the_section_shows_the_results_numbers_as_mean_and_sd_over_seeds():
    text = report.section(fake_results())
    assert text.startswith(report.BEGIN) and text.rstrip().endswith(report.END)
    assert report.TITLE in text
    # gibbs on "16": 21 and 23 per 1e4 steps -> 22.000 ± 1.414 (sd with ddof 1); per kept
    # sample its groups 31.5, 52.5 and 34.5, 57.5 pooled over seeds: 44.0 ± 12.923 / sqrt(4)
    assert "| `gibbs` | one random site resampled | 1 | 44.0 ± 6.5 | 22.000 ± 1.414 |" in text
    # flow-exact: ten times the baseline, per minute all-in 30 * (210, 230) -> 6,600 ± 424
    assert "6,600 ± 424" in text
    assert "seed 0: 1,000 steps in 12.5 s, ELBO 150.00" in text
    assert "seed 1: 1,000 steps in 13.5 s, ELBO 151.00" in text
    assert "fake digit 16x16" in text and "fake digit 8x8" in text
    assert "1.5 min of runs" in text
    assert "beta = 1.0 and eta = 2.1" in text


def test_each_claims_verdict_follows_the_numbers():
    wins = [h for _, h, _ in report.claims(fake_results(True, False))]
    loses = [h for _, h, _ in report.claims(fake_results(False, True))]
    claims = [c for c, _, _ in report.claims(fake_results())]
    assert len(claims) == 6
    small = next(i for i, c in enumerate(claims) if c.startswith("On a small posterior (8x8)"))
    # the flow wins on 16x16 and loses on 8x8: every claim holds, the honest negative too
    assert wins == [True] * 6
    # the flow loses on 16x16 and wins on 8x8: none holds
    assert loses == [False] * 6
    evidence = report.claims(fake_results(True, False))[0][2]
    # the first claim reads the paper's figure, per kept sample (twice per step in the fake)
    assert "`flow-exact` 440" in evidence and "`gibbs` 44 " in evidence and "10x" in evidence
    text = report.section(fake_results(False, True))
    assert text.count("**Does not hold here.**") == 6 and text.count("**Holds here.**") == 0
    assert small == 4


def test_a_claim_without_the_flow_samplers_is_not_measured():
    results = copy.deepcopy(fake_results())
    for data in results["problems"].values():
        for run in data["runs"]:
            for name in ("flow-exact", "flow-latent"):
                del run["samplers"][name]
            del run["flow"]
    verdicts = [h for _, h, _ in report.claims(results)]
    assert verdicts == [None] * 6
    assert "The flow samplers were not run." in report.section(results)


def test_a_sampler_whose_chains_never_move_is_named_with_what_its_ess_counts():
    results = fake_results()
    assert "stay where they started" not in report.section(results)
    for run in results["problems"]["16"]["runs"]:
        run["samplers"]["flow-exact"]["accept"] = 0.0
    text = report.section(results)
    assert "`flow-exact` accepted 0 of its proposals" in text
    assert "its 4 chains stay where they started, and its ESS counts only how their" in text
    results["config"]["protocol"]["flow_steps"] = 1000
    for run in results["problems"]["16"]["runs"]:
        run["samplers"]["flow-exact"]["accept"] = 0.009  # 9 moves each: not a start's ESS
    text = report.section(results)
    assert "its 4 chains move about" in text and "stay where they started" not in text


def test_a_claim_whose_seeds_overlap_is_inconclusive():
    """Every seed of the best flow sampler above every seed of the best baseline: holds; the
    seeds mixed: inconclusive (one lucky seed does not carry a mean past the baseline)."""
    results = copy.deepcopy(fake_results())
    runs = results["problems"]["16"]["runs"]
    key = "ess_per_1e4_kept"  # the paper's figure
    best = max(run["samplers"][n][key] for run in runs for n in ("gibbs", "bit-flip-mh"))
    for run in runs:
        run["samplers"]["flow-exact"][key] = 2 * best
        run["samplers"]["flow-latent"][key] = 0.0
    assert report.claims(results)[0][1] is True
    runs[0]["samplers"]["flow-exact"][key] = 0.0
    claim, holds, evidence = report.claims(results)[0]
    assert holds == report.INCONCLUSIVE and "they overlap" in evidence
    assert "**Inconclusive here.**" in report.section(results)


def test_the_digits_are_drawn_clean_beside_noisy():
    text = report.section(fake_results())
    assert "#.#.#.#.   .#.#.#.#" in text


@pytest.mark.parametrize("existing", ["", "# Reproduction\n\nIsing part.\n"])
def test_the_section_is_appended_then_replaced_in_place(tmp_path, existing):
    path = tmp_path / "reproduction.md"
    rbm = "<!-- rbm-digits:begin (x) -->\n## RBM\nrbm text\n<!-- rbm-digits:end -->\n"
    path.write_text(existing + rbm, encoding="utf-8")
    report.write_section(path, report.section(fake_results(True, False)))
    first = path.read_text(encoding="utf-8")
    assert first.startswith(existing + rbm) and first.count(report.BEGIN) == 1
    report.write_section(path, report.section(fake_results(False, True)))
    second = path.read_text(encoding="utf-8")
    assert second.count(report.BEGIN) == 1 and second.count(report.END) == 1
    assert second.startswith(existing + rbm)
    assert "**Does not hold here.**" in second.split(report.BEGIN)[1]
    # the Ising command keeps every generated section, this one included
    kept = keep_section(second)
    assert "rbm text" in kept and report.TITLE in kept
