"""A pytest plugin (``-p tools.gpu.outcomes``) that appends, the moment each is known, one JSON
line per collected test and per outcome to ``$LSB_OUTCOMES``: a run killed at its time limit
still says which tests passed, failed or never ran (``tools.gpu.rerun``)."""

from __future__ import annotations

import json
import os


def _write(record: dict) -> None:
    path = os.environ.get("LSB_OUTCOMES")
    if not path:
        return
    with open(path, "a") as file:
        file.write(json.dumps(record) + "\n")
        file.flush()
        os.fsync(file.fileno())


def pytest_collection_finish(session):
    _write({"collected": [item.nodeid for item in session.items]})


def pytest_runtest_logreport(report):
    failed_setup = report.when == "setup" and report.outcome != "passed"
    if report.when == "call" or failed_setup:
        message = None
        if report.failed:
            message = str(report.longrepr).strip().splitlines()[-1][:400]
        _write(
            {
                "test": report.nodeid,
                "outcome": report.outcome,
                "seconds": round(report.duration, 2),
                "message": message,
            }
        )
