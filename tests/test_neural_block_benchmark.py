"""The block proposals benchmark's pieces: a convergence trace is wall seconds against the
chains' mean log p~, and the command refuses what it cannot run in a sentence."""

from __future__ import annotations

import pytest
import torch

from lsbcore.studies.block_proposals import benchmark
from lsbcore.targets.ising import IsingPosterior


def test_a_trace_starts_at_the_start_and_moves_up_in_time():
    target = IsingPosterior(torch.full((6, 6), 1.5), 0.5)
    trace = benchmark.trace_for("neural-block", target, {"weights": "exact"}, seconds=0.2)
    times = [t for t, *_ in trace]
    assert times[0] == 0.0 and times == sorted(times) and len(trace) >= 3
    # from a uniform random start towards all +1: the mean log p~ ends well above where it began
    assert trace[-1][1] > trace[0][1] + 10.0


def test_the_samplers_compared_include_block_gibbs_within_its_limit():
    names = [shown for shown, *_ in benchmark.convergence_samplers(4)]
    assert "block-gibbs 12 sites" in names and "neural-block k=4 exact tiles" in names


@pytest.mark.parametrize(
    ("argv", "sentence"),
    [(["--parts", "warp"], "unknown parts: warp"),
     (["--parts", "convergence", "--block-size", "5"], "--block-size must be 2, 3 or 4"),
     (["--parts", "convergence", "--block-size", "3,5"], "--block-size must be 2, 3 or 4"),
     (["--parts", "speed", "--docs", "x.md"], "it needs --parts convergence")],
)  # fmt: skip
def test_the_command_refuses_what_it_cannot_run(argv, sentence, capsys):
    with pytest.raises(SystemExit):
        benchmark.main(argv)
    assert sentence in capsys.readouterr().err
