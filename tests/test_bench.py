"""The speed benchmark reports a figure that cannot be taken on this machine (a device kernel its
Triton cannot compile, as on the GPU machines' Triton 3.6) in words, and takes the others."""

from __future__ import annotations

from lsbcore.studies.benchmarks import samplers as bench


def test_a_failing_step_is_reported_in_words_and_a_working_one_timed():
    def broken(n):
        raise RuntimeError("compiling the kernel\nPassManager::run failed")

    assert bench.measured(broken, 20, 1) == "failed: PassManager::run failed"
    steps = []
    rate = bench.measured(lambda n: steps.append(n), 20, 2)
    assert isinstance(rate, float) and rate > 0 and sum(steps) >= 40


def test_the_report_prints_failed_figures_beside_the_timed_ones(monkeypatch, capsys):
    figures = {"samplers (steps/s)": {"lsb1 learning": "failed: PassManager::run failed",
                                      "barker": 1234.4}}  # fmt: skip
    monkeypatch.setattr(bench, "run", lambda *args: figures)
    monkeypatch.setattr("lsbcore.samplers.warmup.compile_kernels", lambda: None)
    assert bench.main(["--repeats", "1", "--steps", "10"]) == 0
    out = capsys.readouterr().out
    assert "lsb1 learning" in out and "failed: PassManager::run failed" in out
    assert "1234" in out
