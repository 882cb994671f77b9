"""The hostile-file corpus (issue 47): every file handed to the reader a visitor's upload or a
command uses, refused in its sentence (or read as what it really holds) within 100 MB of
Python memory. The seconds each takes are the benchmark's
(``python -m lsbcore.studies.benchmarks.hostile``), not a timed test's."""

from __future__ import annotations

import tracemalloc

import pytest

from lsbcore.studies.benchmarks.hostile_files import CORPUS, outcome

MAX_PYTHON_MB = 100


@pytest.mark.parametrize("case", CORPUS, ids=lambda case: case.name)
def test_each_hostile_file_is_refused_in_its_sentence_within_100_mb(case, tmp_path):
    path = case.build(tmp_path / case.name)
    tracemalloc.start()
    try:
        refused, sentence = outcome(case, path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (refused, case.expect in sentence) == (case.refused, True), sentence
    assert "Traceback" not in sentence and "Exceeds the limit" not in sentence
    assert peak < MAX_PYTHON_MB * 2**20, f"{case.name}: {peak / 2**20:.0f} MB of Python memory"


def test_the_corpus_has_a_file_for_every_reader():
    readers = {case.reader.split(" ")[0].rsplit(".", 1)[-1] for case in CORPUS}
    expected = {"read_results", "from_toml", "load_balancing", "read_uai_upload"}
    expected |= {"load_binary_data", "load_photo", "load_flow", "load_proposal"}
    assert readers == expected
    names = [case.name for case in CORPUS]
    assert len(set(names)) == len(names)
