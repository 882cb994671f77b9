"""UAI model files: MARKOV and BAYES texts and files read into the factor graph they describe,
a round trip through the format, and every refusal with the line it names."""

from __future__ import annotations

import math
import time

import pytest
import torch
from hostile_files import contradicting_ring

from lsbcore.exact.states import all_states
from lsbcore.targets.factor_graph import FactorGraph
from lsbcore.targets.uai import MAX_UPLOAD_BYTES, read_uai, read_uai_upload

pytestmark = pytest.mark.usefixtures("single_thread")

# Three variables; a unary factor, a pairwise one and one over all three, the tables spread
# over lines as the competition's files often are, with a zero
MARKOV = """MARKOV
3
2 2 2
3
1 0
2 0 1
3 2 0 1

2
 0.25 0.75
4
 1.0 2.0
 3.0 0.0
8
 1 2 3 4
 5 6 7 8
"""

# A -> C <- B: P(A), P(B), P(C | A, B), the child last in its scope and fastest in its table
BAYES = """BAYES
3
2 2 2
3
1 0
1 1
3 0 1 2
2 0.6 0.4
2 0.3 0.7
8 0.9 0.1 0.5 0.5 0.2 0.8 0.0 1.0
"""


def same_scores(a: FactorGraph, b: FactorGraph) -> bool:
    x = all_states(a.n_sites)
    la, lb = a.log_prob(x), b.log_prob(x)
    finite = torch.isfinite(la)
    return torch.equal(finite, torch.isfinite(lb)) and torch.allclose(
        la[finite], lb[finite], rtol=0, atol=1e-12
    )


def test_a_markov_text_reads_as_the_factor_graph_written_by_hand():
    model = read_uai(MARKOV)
    assert model.kind == "MARKOV" and model.n_variables == 3
    assert model.scopes == ((0,), (0, 1), (2, 0, 1))
    assert torch.equal(model.log_tables[1][3], torch.tensor(-math.inf, dtype=torch.float64))
    by_hand = FactorGraph(
        3,
        [(0,), (0, 1), (2, 0, 1)],
        [
            torch.log(torch.tensor([0.25, 0.75], dtype=torch.float64)),
            torch.log(torch.tensor([1.0, 2.0, 3.0, 0.0], dtype=torch.float64)),
            torch.log(torch.arange(1.0, 9.0, dtype=torch.float64)),
        ],
    )
    graph = FactorGraph.from_uai(MARKOV)
    assert same_scores(graph, by_hand)
    # x = (x0, x1, x2) = (+1, +1, -1): tables 0.75, then 0.0 (zero mass); x1 = -1 instead:
    # 0.75 * 3.0 * (index of (x2, x0, x1) = 010 = 2) 3
    x = torch.tensor([[1.0, 1.0, -1.0], [1.0, -1.0, -1.0]], dtype=torch.float64)
    assert graph.log_prob(x)[0] == -math.inf
    assert graph.log_prob(x)[1].item() == pytest.approx(math.log(0.75 * 3.0 * 3.0), abs=1e-12)


def test_a_bayes_text_reads_as_its_conditional_tables_and_is_normalised():
    model = read_uai(BAYES)
    assert model.kind == "BAYES" and model.scopes == ((0,), (1,), (0, 1, 2))
    graph = FactorGraph.from_uai(BAYES)
    log_p = graph.log_prob(all_states(3))
    assert torch.logsumexp(log_p, 0).abs() < 1e-12  # a product of conditionals sums to one
    # P(A = 1, B = 1, C = 1) = 0.4 * 0.7 * 1.0; P(A = 1, B = 1, C = 0) = 0
    state = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, -1.0]], dtype=torch.float64)
    assert graph.log_prob(state)[0].item() == pytest.approx(math.log(0.28), abs=1e-12)
    assert graph.log_prob(state)[1] == -math.inf


def test_a_file_is_read_from_its_path_as_a_string_a_path_or_bytes(tmp_path):
    path = tmp_path / "network.uai"
    path.write_text(BAYES)
    expected = FactorGraph.from_uai(BAYES)
    for source in (str(path), path, BAYES.encode()):
        assert same_scores(FactorGraph.from_uai(source), expected)


def write_uai(graph: FactorGraph) -> str:
    """The MARKOV text of a factor graph, every number written exactly (repr of a float)."""
    lines = ["MARKOV", str(graph.n_variables), " ".join(["2"] * graph.n_variables)]
    lines.append(str(graph.n_factors))
    lines += [" ".join(str(v) for v in [len(s), *s]) for s in graph.scopes]
    for table in graph.log_tables:
        lines.append(str(len(table)))
        lines.append(" ".join(repr(v) for v in table.exp().tolist()))
    return "\n".join(lines) + "\n"


def test_a_factor_graph_survives_a_round_trip_through_the_format():
    g = torch.Generator().manual_seed(0)
    scopes, tables = [], []
    for k in (1, 2, 3, 4, 2, 0):
        scopes.append(torch.randperm(7, generator=g)[:k].tolist())
        table = torch.randn(2**k, generator=g, dtype=torch.float64)
        table[torch.rand(2**k, generator=g) < 0.15] = -math.inf
        tables.append(table)
    graph = FactorGraph(7, scopes, tables)
    again = FactorGraph.from_uai(write_uai(graph))
    assert again.scopes == graph.scopes
    assert same_scores(again, graph)


def with_line(text: str, line: int, replacement: str) -> str:
    lines = text.split("\n")
    lines[line - 1] = replacement
    return "\n".join(lines)


@pytest.mark.parametrize(
    "text, message",
    [
        ("MARKOVIAN\n1\n2\n0\n", r"line 1 of the UAI file: the type must be MARKOV or BAYES"),
        (with_line(MARKOV, 2, "3.0"), r"line 2 .*number of variables must be a whole number"),
        (with_line(MARKOV, 2, "0"), r"line 2 .*number of variables must be between 1"),
        (with_line(MARKOV, 3, "2 3 2"), r"line 3 .*variable 1 has 3 values; only binary"),
        (with_line(MARKOV, 4, "x"), r"line 4 .*number of factors must be a whole number"),
        (with_line(MARKOV, 6, "2 0 3"), r"line 6 .*variable 2 of the scope of factor 1 must be"),
        (with_line(MARKOV, 6, "2 1 1"), r"line 6 .*factor 1 names variable 1 twice"),
        (
            with_line(MARKOV, 6, "17 0 1"),
            r"line 6 .*scope size of factor 1 must be between 0 and 16",
        ),
        (
            with_line(MARKOV, 11, "3"),
            r"line 11 .*table of factor 1 has 3 entries; .* needs 2\^2 = 4",
        ),
        (with_line(MARKOV, 12, " 1.0 -2.0"), r"line 12 .*entry 2 of the table of factor 1 is -2.0"),
        (
            with_line(MARKOV, 13, " 3.0 abc"),
            r"line 13 .*entry 4 of the table of factor 1 must be a",
        ),
        (
            with_line(MARKOV, 13, " 3.0 nan"),
            r"line 13 .*entry 4 of the table of factor 1 must be a",
        ),
        (with_line(MARKOV, 13, " 3.0 1e999"), r"line 13 .*entry 4 .* finite and non-negative"),
        (MARKOV.rsplit("\n", 2)[0] + "\n", r"ends at line 15 before entry 5 of the 8 in the table"),
        ("MARKOV\n2\n2", r"ends at line 3 before the number of values of variable 1"),
        (MARKOV + "9\n", r"line 17 .*unexpected '9' after the last factor's table"),
        (with_line(BAYES, 5, "0"), r"line 5 .*scope size of factor 0 must be between 1 and 16"),
    ],
)
def test_a_malformed_file_is_refused_in_a_sentence_that_names_the_line(text, message):
    with pytest.raises(ValueError, match=message):
        read_uai(text)


def test_a_malformed_file_on_disk_names_its_line_too(tmp_path):
    path = tmp_path / "bad.uai"
    path.write_text(with_line(MARKOV, 3, "2 2 4"))
    with pytest.raises(ValueError, match=r"line 3 .*variable 2 has 4 values"):
        FactorGraph.from_uai(path)


@pytest.mark.parametrize(
    "source, message",
    [
        ("3\n2 2 2\n", "must begin with its type, MARKOV or BAYES"),
        ("", "must begin with its type"),
        ("/no/such/network.uai", "neither a UAI model's text .* nor an existing file"),
        (42, "path_or_text must be a file path or a UAI model's text, got int"),
        (b"MARKOV\n1\n\xff\xfe", "not UTF-8"),
    ],
)
def test_what_is_not_a_model_file_is_refused_in_a_sentence(source, message):
    with pytest.raises(ValueError, match=message):
        read_uai(source)


# ----------------------------------------------------------------- hostile files (issue 25)
def test_hostile_wrong_counts_are_refused_in_a_sentence():
    """More or fewer factors, variables or table entries than the file holds."""
    cases = [
        # 4 factors declared, 3 given: the reader takes the first table for the fourth scope
        (with_line(MARKOV, 4, "4"), r"^line 10 .*scope of factor 3 must be a whole number"),
        # 2 declared, 3 given: the third scope is read as the first table
        (with_line(MARKOV, 4, "2"), r"^line 7 .*table of factor 0 has 3 entries; its scope of 1 "),
        # 4 variables declared, 3 cardinalities given: the factor count is read as one
        (with_line(MARKOV, 2, "4"), r"^line 4 .*variable 3 has 3 values; only binary"),
        # 2 declared, 3 used: a scope names a variable beyond them
        (with_line(MARKOV, 2, "2"), r"^line 6 .*scope of factor 0 must be between 0 and 1, got 2"),
        (with_line(MARKOV, 9, "3"), r"^line 9 .*table of factor 0 has 3 entries; .* 2\^1 = 2"),
        (with_line(MARKOV, 11, "5"), r"^line 11 .*table of factor 1 has 5 entries; .* 2\^2 = 4"),
    ]
    for text, message in cases:
        with pytest.raises(ValueError, match=message):
            read_uai(text)


def test_hostile_truncated_files_are_refused_at_every_cut():
    """Every prefix of a valid file (cut after each token) is refused in a sentence that says
    where it ends, never another exception."""
    tokens = MARKOV.split()
    for cut in range(1, len(tokens)):
        with pytest.raises(ValueError, match=r"^the UAI file ends at line \d+ before "):
            read_uai(" ".join(tokens[:cut]))
    for cut in range(1, len(tokens)):  # the upload path too, as bytes
        with pytest.raises(ValueError, match=r"ends at line"):
            read_uai_upload("\n".join(tokens[:cut]).encode(), "cut.uai")


def test_hostile_cardinality_3_is_refused_in_a_sentence():
    text = with_line(MARKOV, 3, "2 2 3")
    with pytest.raises(ValueError, match=r"^line 3 .*variable 2 has 3 values; only binary"):
        read_uai(text)
    with pytest.raises(ValueError, match=r"variable 2 has 3 values"):
        read_uai_upload(text.encode(), "three.uai")


def test_hostile_a_billion_variables_declared_is_refused_at_once():
    """10^9 variables declared (a small file): refused at the count, before anything is sized
    by it."""
    text = "MARKOV\n1000000000\n" + "2 " * 10 + "\n0\n"
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"^line 2 .*number of variables must be between 1 and"):
        read_uai(text)
    with pytest.raises(ValueError, match=r"got 1,000,000,000"):
        read_uai_upload(text.encode(), "huge.uai")
    assert time.perf_counter() - start < 1.0
    with pytest.raises(ValueError, match=r"number of factors must be between 0 and 1,000,000"):
        read_uai("MARKOV\n1\n2\n1000000000\n")


@pytest.mark.parametrize(
    ("count", "digits"), [("9" * 5_000, 5_000), ("-" + "1" * 4_400, 4_400), ("0" * 5_000 + "2", 1)]
)
def test_hostile_a_5000_digit_count_is_refused_in_the_readers_words(count, digits):
    """Issue 47: Python's int() refuses 4,300 digits with "Exceeds the limit (4300 digits)";
    the reader counts the digits first and names the line and the range. Leading zeros count
    for nothing (5,000 of them before a 2 are the number 2)."""
    text = f"MARKOV\n{count}\n2 2\n0\n"
    if digits == 1:
        assert read_uai(text).n_variables == 2
        return
    with pytest.raises(ValueError) as refused:
        read_uai_upload(text.encode(), "digits.uai")
    assert str(refused.value) == (
        "line 2 of the UAI file: the number of variables must be between 1 and 4,200,000, got "
        f"a number of {digits:,} digits."
    )


@pytest.mark.parametrize("entry", ["-0.5", "-1e-300", "-inf"])
def test_hostile_tables_with_negative_entries_are_refused_in_a_sentence(entry):
    text = with_line(MARKOV, 12, f" 1.0 {entry}")
    pattern = (
        rf"^line 12 of the UAI file: entry 2 of the table of factor 1 (is {entry}; entries must "
        r"be finite and non-negative|must be a number)"
    )
    with pytest.raises(ValueError, match=pattern):
        read_uai(text)
    with pytest.raises(ValueError, match=pattern):
        read_uai_upload(text.encode(), "negative.uai")


@pytest.mark.parametrize("entry", ["nan", "NaN", "-nan", "NAN"])
def test_hostile_tables_with_nan_entries_are_refused_in_a_sentence(entry):
    text = with_line(MARKOV, 13, f" 3.0 {entry}")
    pattern = r"^line 13 of the UAI file: entry 4 of the table of factor 1 must be a number"
    with pytest.raises(ValueError, match=pattern):
        read_uai(text)
    with pytest.raises(ValueError, match=pattern):
        read_uai_upload(text.encode(), "nan.uai")


def test_an_upload_is_read_and_described_in_a_sentence():
    model = read_uai_upload(MARKOV.encode(), "three.uai")
    assert model.n_zero_entries == 1 and model.n_factors == 3
    assert model.describe() == (
        "a MARKOV network of 3 binary variables and 3 factors, 1 of its 14 table entries zero"
    )
    graph = FactorGraph.from_uai(model)
    assert same_scores(graph, FactorGraph.from_uai(MARKOV))
    no_zero = read_uai_upload(BAYES.replace("0.0 1.0", "0.5 0.5").encode(), "b.uai")
    assert no_zero.describe().endswith("3 factors, none of its table entries zero")
    assert no_zero.describe().startswith("a BAYES network of 3 binary variables")


@pytest.mark.parametrize(
    "data, name, message",
    [
        (b"MARKOV\n" + b" " * MAX_UPLOAD_BYTES, "big.uai", r"holds 4.0 MB; at most 4.0 MB"),
        (b"", "empty.uai", r"the upload 'empty.uai' is empty"),
        (b"   \n", "blank.uai", r"is empty"),
        (b"\xff\xfe\x00", "binary.uai", r"is not UTF-8 text"),
        (b"3\n2 2 2\n", "typeless.uai", r"does not begin with a model type, MARKOV or BAYES"),
        ("MARKOV\n1\n2\n0\n", "text.uai", r"must be given as bytes, got str"),
        (b"MARKOV\n1\n2\n0\n", 7, r"name must be the upload's file name"),
    ],
)
def test_a_bad_upload_is_refused_in_a_sentence(data, name, message):
    with pytest.raises(ValueError, match=message):
        read_uai_upload(data, name)


def test_the_upload_cap_fits_the_competitions_networks():
    """A 10 x 10 grid network written as a BAYES file is a few kB, far below the cap."""
    from lsbcore.networks.presets import preset

    text = write_uai(preset("mn1"))
    assert len(text.encode()) < MAX_UPLOAD_BYTES / 100
    model = read_uai_upload(text.encode(), "mn1.uai")
    assert model.n_variables == 100 and model.n_factors == 100


def test_hostile_a_network_with_no_state_of_mass_is_refused_within_the_search_budget():
    """2,000 variables in a 48 kB file whose factors contradict each other only all together:
    the start search ran 20 restarts of 8,010 flips (minutes of CPU) before refusing; its budget
    of seconds now ends it, in a sentence that says how far it went and what that suggests."""
    text = contradicting_ring(2_000)
    assert len(text.encode()) < 50_000
    graph = FactorGraph.from_uai(read_uai_upload(text.encode(), "ring.uai"))
    begin = time.perf_counter()
    with pytest.raises(ValueError) as refused:
        graph.start(1, torch.Generator().manual_seed(0), seconds=1.0)  # the dashboard's budget
    assert time.perf_counter() - begin < 2.0  # a budget of 1 s, and at most one restart's draws
    assert str(refused.value).startswith(
        "found no state of positive probability for a factor graph of 2,000 binary variables "
        "and 2,000 factors within the search's 1 s: "
    )
    assert str(refused.value).endswith(
        "each factor alone allows some values, so the network may have no state of positive "
        "probability at all."
    )
    # a chain moved into the support from zero mass (an experiment's shared start) is too
    x = torch.ones(2, 2_000, dtype=torch.float64)
    begin = time.perf_counter()
    with pytest.raises(ValueError, match=r"within the search's 0.25 s: \d+ of its 20 restarts"):
        graph.into_support(x, torch.Generator().manual_seed(0), seconds=0.25)
    assert time.perf_counter() - begin < 1.5


def test_a_small_impossible_network_still_runs_every_restart_within_the_budget():
    """The same ring on 5 variables: all 20 restarts end inside the budget, and the sentence
    says so; a budget of seconds that is not a positive number is refused."""
    graph = FactorGraph.from_uai(contradicting_ring(5))
    with pytest.raises(ValueError, match=r"20 restarts of a search over 3 chains \(30 repairing"):
        graph.start(3, torch.Generator().manual_seed(0), seconds=60)
    for seconds in (0, -1.0, math.inf, math.nan, True, "1"):
        with pytest.raises(ValueError, match="seconds must be a positive"):
            graph.start(3, torch.Generator().manual_seed(0), seconds=seconds)
