"""The studies' one entry point: every study in the catalogue is a command that parses its
arguments, ``python -m lsbcore.studies`` lists them and refuses an unknown name in a sentence."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from lsbcore.studies import BY_NAME, STUDIES
from lsbcore.studies.__main__ import main


def test_every_study_names_a_module_with_a_main_under_studies_or_the_rbm():
    assert len(BY_NAME) == len(STUDIES)  # names are unique
    for study in STUDIES:
        module = importlib.import_module(study.module)
        assert callable(module.main), study.name
        # a study lives in the studies layer, except the RBM's asset commands beside its model
        assert study.module.startswith(("lsbcore.studies.", "lsbcore.rbm.")), study.module


@pytest.mark.parametrize("study", STUDIES, ids=lambda s: s.name)
def test_each_study_answers_help_through_the_entry_point(study, capsys):
    with pytest.raises(SystemExit) as done:
        main([study.name, "--help"])
    assert done.value.code == 0
    assert "usage" in capsys.readouterr().out.lower()


def test_the_listing_names_every_study_and_an_unknown_name_is_refused(capsys):
    assert main([]) == 0
    listing = capsys.readouterr().out
    assert all(study.name in listing for study in STUDIES)
    assert main(["no-such-study"]) == 2
    err = capsys.readouterr().err
    assert "no study called 'no-such-study'" in err and "experiment" in err


def test_the_experiment_command_users_know_still_runs():
    done = subprocess.run(
        [sys.executable, "-m", "lsbcore.experiment", "--help"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "--case" in done.stdout
