"""`python -m tools.live_speed --browser-cpu N`: the browser on one CPU, the server on the rest."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tools.live_speed import on_cpus, split_cpus

CPUS = os.sched_getaffinity(0)
needs_two = pytest.mark.skipif(len(CPUS) < 2, reason="a split needs two CPUs")


@needs_two
def test_the_server_gets_every_cpu_but_the_browsers():
    browser = max(CPUS)
    server, chromium = split_cpus(browser)
    assert chromium == {browser} and server == CPUS - {browser}


def test_no_split_without_the_option_and_a_clear_message_for_a_cpu_not_ours():
    assert split_cpus(None) == (None, None)
    with pytest.raises(SystemExit, match="may use CPUs"):
        split_cpus(max(CPUS) + 1)


@needs_two
def test_a_process_started_in_the_block_stays_on_its_cpus_and_ours_come_back():
    one = {min(CPUS)}
    with on_cpus(one):
        assert os.sched_getaffinity(0) == one
        child = subprocess.run(
            [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
            capture_output=True,
            text=True,
            check=True,
        )
    assert child.stdout.strip() == str(sorted(one))
    assert os.sched_getaffinity(0) == CPUS
