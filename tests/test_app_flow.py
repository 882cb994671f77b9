"""The flow samplers in the dashboard: the background training (start, stop, resume, a NaN
that stops it with a sentence), the run they wait for and join, the Flow view's data and
figures, the training steps' bounds, and the page in AppTest (no browser)."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import pytest
import torch
from app_support import open_app, stop_runs_fixture  # noqa: F401  (autouse)

from app import config as cfgmod
from app import flow_training, network_targets, run_length, sources, state, view_catalogue
from app.views import annealing, exact_chain
from app.views import flow as flow_view
from lsbcore.methods.flows.train import FlowTraining, TrainingSettings
from lsbcore.studies import figures
from lsbcore.targets.base import Target

STEPS = 24  # training steps of the jobs here: a few tenths of a second on 4 sites


class TableTarget(Target):
    """``log p~`` a table over all ``2^n`` states."""

    def __init__(self, log_table: torch.Tensor):
        self.n_sites = int(log_table.numel()).bit_length() - 1
        self.shape = (self.n_sites,)
        self.log_table = log_table.double()

    def log_prob(self, x):
        flat = self._flat(x)
        codes = ((flat > 0).long() << torch.arange(self.n_sites)).sum(1)
        return self.log_table[codes]


class NaNTarget(TableTarget):
    """Finite for the first ``calls`` evaluations, NaN after: training fails part way."""

    def __init__(self, log_table: torch.Tensor, calls: int):
        super().__init__(log_table)
        self.calls = calls

    def log_prob(self, x):
        self.calls -= 1
        out = super().log_prob(x)
        return out if self.calls >= 0 else out * math.nan


class NaNAfter(Target):
    """``target``'s ``log p~`` for its first ``calls`` evaluations, NaN after."""

    def __init__(self, target: Target, calls: int):
        self.target, self.calls = target, calls
        self.n_sites, self.shape = target.n_sites, target.shape

    def log_prob(self, x):
        self.calls -= 1
        out = self.target.log_prob(x)
        return out if self.calls >= 0 else out * math.nan


def table(n: int = 4, seed: int = 0) -> torch.Tensor:
    return torch.randn(1 << n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def weights(model) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


# ----------------------------------------------------------------------------- the training job
def test_a_job_stopped_and_resumed_gives_the_weights_of_one_uninterrupted_training():
    target = TableTarget(table())
    job = flow_training.FlowJob(target, STEPS, seed=5)
    job.start()
    job.stop()  # within a step of starting
    stopped = job.progress()
    assert stopped.stopped and stopped.ready and not stopped.running
    assert stopped.steps < STEPS and "stopped" in stopped.text()
    job.resume()
    assert job.wait(60)
    done = job.progress()
    assert done.steps == STEPS and done.ready and not done.stopped and "done" in done.text()
    steps, elbo = job.history()
    assert steps.tolist() == list(range(1, STEPS + 1)) and np.isfinite(elbo).all()
    one_go = FlowTraining(target, TrainingSettings(seed=5))
    one_go.run(STEPS)
    for a, b in zip(weights(job.training.model), weights(one_go.model), strict=True):
        assert torch.equal(a, b)
    assert elbo[-1] == pytest.approx(one_go.elbo)


def test_a_job_whose_page_has_gone_stops_and_can_resume():
    page = {"there": True}
    job = flow_training.FlowJob(TableTarget(table()), 10_000, seed=0, alive=lambda: page["there"])
    job.start()
    wait_until(lambda: job.progress().steps >= 2)
    page["there"] = False
    assert job.wait(60)
    progress = job.progress()
    assert progress.stopped and progress.ready and progress.steps < 10_000
    page["there"] = True
    job.resume()
    wait_until(lambda: job.progress().steps > progress.steps)
    job.stop()
    assert job.progress().steps > progress.steps


def test_another_seed_trains_another_flow():
    target = TableTarget(table())
    a, b = flow_training.FlowJob(target, 4, seed=1), flow_training.FlowJob(target, 4, seed=2)
    for job in (a, b):
        job.start()
        job.wait(60)
    assert not all(
        torch.equal(x, y)
        for x, y in zip(weights(a.training.model), weights(b.training.model), strict=True)
    )


def test_a_nan_stops_training_with_a_sentence_and_keeps_the_last_finite_weights():
    job = flow_training.FlowJob(NaNTarget(table(), calls=5), STEPS, seed=0)
    job.start()
    assert job.wait(60)
    progress = job.progress()
    assert progress.failed and "NaN or infinite" in progress.failed
    assert progress.ready and not progress.running and "failed" in progress.text()
    assert 0 < progress.steps < STEPS
    assert all(torch.isfinite(p).all() for p in job.snapshot().parameters())
    job.resume()  # a failed training does not start again
    assert not job.running and job.progress().steps == progress.steps


def test_a_snapshot_is_frozen_and_apart_from_training():
    job = flow_training.FlowJob(TableTarget(table()), 4, seed=0)
    copy = job.snapshot()
    before = weights(copy)
    job.start()
    job.wait(60)
    assert not any(p.requires_grad for p in copy.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, weights(copy), strict=True))
    assert not all(
        torch.equal(a, b) for a, b in zip(before, weights(job.training.model), strict=True)
    )


def test_a_session_keeps_one_job_per_target_steps_and_seed():
    store: dict = {}
    target = TableTarget(table())
    key = flow_training.job_key(flow_training.target_key(target), 4, 0)
    job = flow_training.job_for(store, key, target, 4, 0)
    assert flow_training.job_for(store, key, target, 4, 0) is job  # both flow samplers share it
    other = TableTarget(table(seed=1))
    key2 = flow_training.job_key(flow_training.target_key(other), 4, 0)
    assert key2 != key and flow_training.target_key(TableTarget(table())) == key[0]
    job2 = flow_training.job_for(store, key2, other, 4, 0)
    assert job2 is not job and flow_training.current_job(store) is job2
    job2.wait(60)


# ----------------------------------------------------------------------------- the Flow view's data
def test_the_projection_finds_the_draws_largest_spreads():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 500))
    points = np.zeros((500, 6))
    points[:, 3] = 10 * a  # the widest direction
    points[:, 1] = 3 * b
    points += 0.01 * rng.normal(size=points.shape)
    xy = flow_training.latent_projection(points)
    assert xy.shape == (500, 2)
    assert np.corrcoef(xy[:, 0], points[:, 3])[0, 1] > 0.999  # the sign is fixed: positive
    assert abs(np.corrcoef(xy[:, 1], points[:, 1])[0, 1]) > 0.999
    assert flow_training.latent_projection(np.ones((5, 3))).tolist() == [[0.0, 0.0]] * 5
    assert flow_training.latent_projection(np.zeros((0, 3))).shape == (0, 2)


def test_the_latent_points_are_the_flows_draws_with_their_magnetisation():
    job = flow_training.FlowJob(TableTarget(table()), 0, seed=0)
    v, m = job.latent_points(n=50, seed=3)
    assert v.shape == (50, 4) and m.shape == (50,)
    np.testing.assert_array_equal(m, np.where(v < 0, -1.0, 1.0).mean(1))
    np.testing.assert_array_equal(job.latent_points(n=50, seed=3)[0], v)  # fixed z: one picture


def test_exact_log_z_is_the_log_sum_of_the_table_and_none_beyond_enumeration():
    values = table(4)
    assert flow_view.exact_log_z(TableTarget(values)) == pytest.approx(
        math.log(float(values.exp().sum()))
    )
    assert flow_view.exact_log_z(TableTarget(torch.zeros(1 << 13))) is None


def test_the_training_curve_draws_the_elbo_and_the_exact_log_z():
    fig = figures.flow_elbo_figure([1, 2, 3], [-5.0, -4.0, float("nan")], log_z=2.5)
    assert list(fig.data[0].y[:2]) == [-5.0, -4.0] and math.isnan(fig.data[0].y[2])
    assert [s.y0 for s in fig.layout.shapes] == [2.5]
    assert "exact log Z = 2.5" in fig.layout.annotations[0].text
    assert not figures.flow_elbo_figure([1], [0.0]).layout.shapes  # no log Z: no line
    empty = figures.flow_elbo_figure([], [])
    assert not empty.data and "no data yet" in empty.layout.annotations[0].text


def test_the_latent_picture_colours_each_draw_by_its_magnetisation():
    fig = figures.flow_latent_figure([[0.0, 1.0], [2.0, 3.0]], [-1.0, 0.5])
    assert list(fig.data[0].x) == [0.0, 2.0] and list(fig.data[0].marker.color) == [-1.0, 0.5]
    assert (fig.data[0].marker.cmin, fig.data[0].marker.cmax) == (-1.0, 1.0)
    assert "no data yet" in figures.flow_latent_figure([], []).layout.annotations[0].text


# ----------------------------------------------------------------------------- the run
def small_config(**changes) -> cfgmod.Config:
    base = replace(cfgmod.Config(), size=16, shared_alpha=True, chains=2, burn_in=10, steps=40)
    return replace(base, **changes)


def test_the_flow_samplers_wait_while_the_others_sample_then_join_from_the_shared_start():
    cfg = small_config(samplers=("barker", "flow-exact", "flow-latent"), flow_steps=3)
    problem = sources.build_problem(cfg)
    job = flow_training.FlowJob(problem.target, cfg.flow_steps, cfg.seed)
    run, messages = state.build_run(cfg, problem, flow=job)
    assert messages == [] and run.comparison.names == ["barker"]
    assert run.flow_waiting == ("flow-exact", "flow-latent")
    state.advance(run, 1.0, max_steps=5)  # training has not started: the others sample
    assert run.n_steps == 5 and run.flow_waiting
    job.start()
    job.wait(60)
    state.advance(run, 1.0, max_steps=3)  # the joiners, furthest behind, catch up first
    assert run.comparison.names == ["barker", "flow-exact", "flow-latent"]
    assert run.flow_joined_at == 5 and run.n_steps == 5
    assert run.sampler_steps() == {"barker": 5, "flow-exact": 3, "flow-latent": 3}
    for name in ("flow-exact", "flow-latent"):
        sampler = run.comparison[name]
        assert sampler.n_steps == 3 and sampler.flow is not job.training.model  # a copy
        steps = run.comparison.traces[name].arrays()["step"]
        assert steps.tolist() == [0, 1, 2, 3]  # their own steps, from their start
    assert "joined at step 5" in flow_view.joined_text(run)
    left = state.leave_flow(run)  # Resume: they leave and wait for the newer flow
    assert left == ("flow-exact", "flow-latent") and run.comparison.names == ["barker"]
    assert run.flow_waiting == left and "wait" in flow_view.joined_text(run)


FLOWS = ("flow-exact", "flow-latent")


def late_flow_run() -> tuple[state.Run, flow_training.FlowJob]:
    """A run whose other samplers take all their steps before the flow's training starts."""
    cfg = small_config(samplers=("barker", *FLOWS), flow_steps=3, size=8, burn_in=4, steps=12)
    problem = sources.build_problem(cfg)
    job = flow_training.FlowJob(problem.target, cfg.flow_steps, cfg.seed)
    run, _ = state.build_run(cfg, problem, flow=job)
    state.advance(run, 5.0)  # training has not started: barker takes all its steps
    assert run.comparison["barker"].n_steps == cfg.total_steps == 16
    return run, job


def test_flow_samplers_that_join_after_the_others_finished_take_the_whole_run_before_it_ends():
    run, job = late_flow_run()
    total, burn_in = run.config.total_steps, run.config.burn_in
    assert not run.finished and state.waits_for_flow(run)  # not complete without them
    assert "Flow (exact): waiting for its flow's training" in run_length.progress_text(run)
    assert state.advance(run, 1.0) == 0  # nothing to sample until their flow is ready
    job.start()
    job.wait(60)
    state.advance(run, 5.0, max_steps=8)
    assert run.flow_joined_at == total and not run.finished
    assert run.sampler_steps() == {"barker": total, "flow-exact": 8, "flow-latent": 8}
    assert "Flow (exact): 8 of 16 steps" in flow_view.joined_text(run)
    for _ in range(100):  # a few seconds at most
        if run.finished:
            break
        state.advance(run, 5.0)
    assert run.finished and run.sampler_steps() == dict.fromkeys(("barker", *FLOWS), total)
    assert run.comparison["barker"].n_steps == total  # the others waited, at the run's length
    for name in FLOWS:
        arrays = run.comparison.traces[name].arrays()
        assert arrays["step"].tolist() == list(range(total + 1))  # their own steps, from 0
        assert arrays["phase"].tolist() == [0] * (burn_in + 1) + [1] * (total - burn_in)
        assert run.comparison.marginals[name].count == run.config.steps  # a burn-in first
    assert "Flow latent (approx.): 16 of 16 steps" in flow_view.joined_text(run)
    assert state.slow_step(run) is None  # no step left for anyone


def test_the_worker_waits_for_the_flow_samplers_and_stops_once_they_have_their_steps():
    run, job = late_flow_run()
    state.start(run)
    time.sleep(0.5)
    assert run.running and run.worker.is_alive()  # waiting, not done
    job.start()
    job.wait(60)
    wait_until(lambda: not run.running)
    assert run.finished and run.error is None
    assert set(run.sampler_steps().values()) == {run.config.total_steps}


def test_a_failed_training_lets_the_flow_samplers_join_on_its_last_finite_weights():
    cfg = small_config(samplers=("gibbs", "flow-exact", "flow-latent"), flow_steps=STEPS)
    problem = sources.build_problem(cfg)
    job = flow_training.FlowJob(NaNAfter(problem.target, calls=3), STEPS, cfg.seed)
    job.start()
    job.wait(60)
    assert job.progress().failed and job.ready
    run, _ = state.build_run(cfg, problem, flow=job)
    state.advance(run, 5.0, max_steps=cfg.burn_in + 4)  # into mixing: marginals recorded
    assert run.comparison.names == ["gibbs", "flow-exact", "flow-latent"]
    assert run.phase == "mixing"
    for name in run.comparison.names:
        assert run.comparison[name].n_steps == cfg.burn_in + 4
        assert run.comparison.marginals[name].count == 4


def test_only_flow_samplers_wait_for_the_flow_before_a_run_can_be_built():
    cfg = small_config(samplers=("flow-latent",), flow_steps=2)
    problem = sources.build_problem(cfg)
    job = flow_training.FlowJob(problem.target, 2, cfg.seed)
    with pytest.raises(ValueError, match="wait for their training"):
        state.build_run(cfg, problem, flow=job)
    job.start()
    job.wait(60)
    run, _ = state.build_run(cfg, problem, flow=job)
    assert run.comparison.names == ["flow-latent"] and run.flow_joined_at == 0
    state.advance(run, 1.0, max_steps=2)
    assert run.comparison["flow-latent"].n_steps == 2
    assert state.leave_flow(run) == ()  # nothing else would be left: they stay


def test_a_paper_case_with_one_alpha_per_chain_leaves_the_flow_samplers_out_in_a_sentence():
    cfg = small_config(samplers=("barker", "flow-exact"), shared_alpha=False)
    run, messages = state.build_run(cfg, sources.build_problem(cfg), flow=None)
    assert run.comparison.names == ["barker"] and run.flow is None and not run.flow_waiting
    assert len(messages) == 1 and "Flow (exact) is left out" in messages[0]
    assert "One α for all chains" in messages[0]


def test_views_that_rebuild_samplers_elsewhere_leave_the_flow_samplers_out():
    names = ["barker", "flow-exact", "flow-latent"]
    assert exact_chain.exact_names(names) == ["barker"]
    assert annealing.anneal_names(names, "run") == ["barker"]
    choices = view_catalogue.link_params()["pt_sampler"].choices
    assert "barker" in choices and not {"flow-exact", "flow-latent"} & set(choices)


# ----------------------------------------------------------------------------- settings and links
def test_training_steps_are_bounded_in_links_and_written_only_with_a_flow_sampler():
    cfg, warnings = cfgmod.validate({"samplers": "barker,flow-latent", "flow_steps": "99999999"})
    assert cfg.flow_steps == cfgmod.MAX_FLOW_STEPS and warnings
    cfg, warnings = cfgmod.validate({"flow_steps": "nan"})
    assert cfg.flow_steps == cfgmod.FLOW_STEPS and warnings
    cfg, _ = cfgmod.validate({"samplers": "flow-exact", "flow_steps": "250"})
    params = cfgmod.to_query_params(cfg)
    assert params["flow_steps"] == "250" and cfgmod.validate(params)[0] == cfg
    assert "flow_steps" not in cfgmod.to_query_params(cfgmod.Config())
    assert "flow_steps" in cfgmod.SAMPLER_FIELDS  # a new length trains a new flow: a new run


# ----------------------------------------------------------------------------- the page
def wait_until(condition, seconds: float = 60.0) -> None:
    end = time.monotonic() + seconds
    while not condition() and time.monotonic() < end:
        time.sleep(0.05)


def test_the_page_trains_stops_resumes_and_draws_the_flow_tab_without_an_error():
    at = open_app(
        samplers="barker,flow-exact,flow-latent", shared_alpha="1", size="16",
        flow_steps="2000", burn_in="10", steps="40", view="Flow",
    )  # fmt: skip
    assert not at.exception and not at.error
    run = at.session_state["_run"]
    assert run.comparison.names == ["barker"] and run.flow_waiting
    labels = [o for o in at.multiselect(key="samplers").options]
    assert any("Flow latent (approx.)" in label for label in labels)
    assert at.number_input(key="flow_steps").value == 2000
    at.button(key="flow_stop").click().run()
    assert run.flow.progress().stopped and not at.exception
    at.run()  # the flow samplers join on the flow as it is
    assert run.comparison.names == ["barker", "flow-exact", "flow-latent"]
    at.button(key="flow_resume").click().run()
    assert run.flow.running and run.comparison.names == ["barker"]
    run.flow.stop()
    at.run()
    assert not at.exception and not at.error
    assert any("approximate" in c.value for c in at.caption)
    assert len(at.get("plotly_chart")) == 2


def test_the_page_says_how_far_each_sampler_is_and_completes_only_with_the_flow_samplers():
    at = open_app(
        samplers="barker,flow-exact,flow-latent", shared_alpha="1", size="8", burn_in="4",
        steps="12", flow_steps="20000", view="Flow",
    )  # fmt: skip
    run = at.session_state["_run"]
    state.advance(run, 5.0)  # the others take all 16 steps while the flow trains
    at.run()
    assert not at.exception and "Run complete" not in " ".join(s.value for s in at.success)
    captions = " ".join(c.value for c in at.caption)
    assert "t/(1+t): 16 of 16 steps" in captions
    assert "Flow (exact): waiting for its flow's training (0 of 16 steps)" in captions
    assert any("the run waits for the flow samplers" in i.value for i in at.info)
    assert not at.button(key="run").disabled
    run.flow.stop()
    at.run()  # they join on the flow as it is
    for _ in range(100):
        if run.finished:
            break
        state.advance(run, 5.0)
    at.run()
    assert not at.exception and not at.error
    assert any("every sampler took its 16 steps" in s.value for s in at.success)
    captions = " ".join(c.value for c in at.caption)
    assert "Flow (exact): 16 of 16 steps · Flow latent (approx.): 16 of 16 steps" in captions
    assert at.button(key="run").disabled


def test_a_new_training_length_rebuilds_the_run_on_a_new_flow():
    at = open_app(samplers="barker,flow-exact", shared_alpha="1", size="16", flow_steps="3")
    job = at.session_state["_run"].flow
    job.wait(60)
    at.number_input(key="flow_steps").set_value(5).run()
    run = at.session_state["_run"]
    assert run.flow is not job and run.flow.goal == 5 and not at.exception
    run.flow.wait(60)
    wait_until(lambda: run.flow.ready)
    at.run()
    assert "flow-exact" in run.comparison.names


def test_the_network_page_does_not_offer_the_flow_samplers():
    assert "barker" in network_targets.SAMPLERS
    assert not {"flow-exact", "flow-latent"} & set(network_targets.SAMPLERS)


def test_the_flow_paper_digit_gets_its_exact_log_z_from_the_transfer_matrix():
    """16 x 16 is past enumeration but one field on a free lattice: the transfer matrix's
    log Z (the flow-diagnose figure, 807.20 for the shipped digit), and the caption's gap."""
    from lsbcore.studies.flows.denoising import denoising_problem

    target = denoising_problem(size=16).target
    assert flow_view.exact_log_z(target) == pytest.approx(807.20, abs=0.01)
    assert flow_view.exact_log_z(lsbcore_ising(torch.zeros(2, 16, 16))) is None  # one per chain
    text = flow_view.gap_text(761.88, 807.20)
    assert "45.32 nats below the exact log Z (807.20)" in text
    assert flow_view.gap_text(761.88, None) is None


def lsbcore_ising(alpha):
    from lsbcore import IsingPosterior

    return IsingPosterior(alpha, 1.0)
