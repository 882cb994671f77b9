"""A sweep's grid: axes from text, the grid's checks, its cells in order, keys that name every
number deciding a cell, and the TOML file with its refusals."""

from __future__ import annotations

import dataclasses
import itertools
import os
from pathlib import Path

import pytest

from lsbcore.studies.sweep import grid as grid_module
from lsbcore.studies.sweep.grid import (
    MAX_CELLS,
    PROTOCOL_BOUNDS,
    Cell,
    Protocol,
    SweepGrid,
    parse_axis,
    seeds_from,
)


# ----------------------------------------------------------------------------- parse_axis
def test_a_range_gives_count_evenly_spaced_values_with_both_ends():
    assert parse_axis("0:2:5", "lam") == (0.0, 0.5, 1.0, 1.5, 2.0)
    assert parse_axis(" 1:4:4 ", "sigma") == (1.0, 2.0, 3.0, 4.0)


def test_a_range_of_count_one_is_its_start():
    assert parse_axis("0.5:2:1", "lam") == (0.5,)


def test_a_descending_range_keeps_its_order():
    assert parse_axis("2:0:3", "lam") == (2.0, 1.0, 0.0)


def test_a_range_value_keys_as_the_same_number_typed_by_hand():
    """0:1:11 computes 3 * 0.1 = 0.30000000000000004; the axis must hold 0.3, so that a cell
    of this grid has the key a grid typed as "0.3" gives (resume finds it)."""
    from_range = parse_axis("0:1:11", "lam")
    assert 0.1 in from_range and 0.3 in from_range and 0.7 in from_range
    assert from_range[3] == parse_axis("0.3", "lam")[0] == 0.3
    assert repr(from_range[3]) == "0.3"
    a = Cell("square", from_range[3], 1.0, 3.0, "barker", 0)
    b = Cell("square", parse_axis("0.3", "lam")[0], 1.0, 3.0, "barker", 0)
    assert a.key == b.key


def test_lists_numbers_and_comma_text_give_the_same_axis():
    assert parse_axis("0, 0.5,1", "lam") == parse_axis([0, 0.5, 1.0], "lam") == (0.0, 0.5, 1.0)
    assert parse_axis(2, "sigma") == parse_axis(2.0, "sigma") == (2.0,)
    assert parse_axis("-0.0", "mu") == (0.0,)  # no -0.0 in a key


@pytest.mark.parametrize(
    ("spec", "name", "words"),
    [
        ("-1", "lam", "lambda must be within [0, 100]"),
        ("101", "lam", "lambda must be within [0, 100]"),
        ("0", "sigma", "sigma must be within [0.001, 100]"),
        ("-100.5", "mu", "mu must be within [-100, 100]"),
        ("nan", "lam", "lambda must be within"),
        ("inf", "sigma", "sigma must be within"),
        ("0:1", "lam", "'start:stop:count'"),
        ("0:1:2:3", "lam", "'start:stop:count'"),
        ("0:1:2.5", "lam", "'start:stop:count'"),
        ("a,b", "lam", "'start:stop:count'"),
        ("0:1:0", "lam", "a range takes 1 to 1000 values, got 0"),
        ("0:1:1001", "lam", "a range takes 1 to 1000 values, got 1001"),
        ("", "lam", "at least one number"),
        (" , ", "lam", "at least one number"),
        (True, "lam", "must be numbers"),
        (None, "lam", "must be numbers"),
        ([], "lam", "non-empty list of numbers"),
        ([1, "a"], "lam", "non-empty list of numbers"),
        ([1, True], "lam", "non-empty list of numbers"),
        ("1,0.5,1", "lam", "lambda lists 1 more than once"),
        ("0.1,0.10000000001", "lam", "lists 0.1 more than once"),  # equal once keyed
        (list(range(1001)), "lam", "at most 1000 values"),
    ],
)
def test_a_bad_axis_is_refused_in_one_sentence_naming_the_axis(spec, name, words):
    with pytest.raises(ValueError) as err:
        parse_axis(spec, name)
    message = str(err.value)
    assert words in message
    assert message.endswith(".") and "\n" not in message


# ----------------------------------------------------------------------------- the grid
def test_the_grid_checks_targets_samplers_and_seeds():
    cases = [
        ({"targets": ("moon",)}, "unknown target 'moon'"),
        ({"targets": ()}, "at least one of the targets"),
        ({"targets": ("square", "square")}, "targets lists square more than once"),
        ({"samplers": ("barker", "warp")}, "unknown sampler(s) 'warp'"),
        ({"samplers": ("sqrt", "sqrt")}, "samplers lists sqrt more than once"),
        ({"samplers": ()}, "at least one of the samplers"),
        ({"seeds": ()}, "at least one seed"),
        ({"seeds": (0, 0)}, "a seed more than once"),
        ({"seeds": (-1,)}, "a seed must be from 0"),
        ({"seeds": (2**31,)}, "a seed must be from 0"),
        ({"seeds": (1.5,)}, "a seed must be an integer"),
        ({"seeds": (True,)}, "a seed must be an integer"),
        ({"lam": (1.0, 1.0)}, "lambda lists 1 more than once"),
        ({"sigma": (0.0,)}, "sigma must be within"),
    ]
    for kwargs, words in cases:
        with pytest.raises(ValueError) as err:
            SweepGrid(**kwargs)
        assert words in str(err.value), (kwargs, str(err.value))
    # the shipped samples are targets; the samplers named in the error are the sweepable ones
    SweepGrid(targets=("square", "horse"))
    with pytest.raises(ValueError) as err:
        SweepGrid(samplers=("warp",))
    for name in grid_module.SAMPLERS:
        assert name in str(err.value)


def test_a_grid_over_max_cells_is_refused():
    lam = tuple(i / 10 for i in range(1000))
    sigma = tuple(1 + i / 100 for i in range(1000))  # 1000 x 1000 x 1 sampler = 1e6 cells
    assert SweepGrid(lam=lam, sigma=sigma, samplers=("barker",)).n_cells == MAX_CELLS
    with pytest.raises(ValueError, match="at most 1,000,000"):
        SweepGrid(lam=lam, sigma=sigma, samplers=("barker", "sqrt"))


def test_cells_come_seed_by_seed_then_target_lambda_mu_sigma_sampler():
    grid = SweepGrid(
        targets=("square", "horse"),
        lam=(0.0, 1.0),
        mu=(1.0,),
        sigma=(1.0, 2.0, 3.0),
        samplers=("barker", "max"),
        seeds=(4, 7),
    )
    cells = grid.cells()
    assert len(cells) == grid.n_cells == 2 * 2 * 1 * 3 * 2 * 2
    expected = list(
        itertools.product((4, 7), ("square", "horse"), (0.0, 1.0), (1.0,), (1.0, 2.0, 3.0),
                          ("barker", "max"))
    )  # fmt: skip
    got = [(c.seed, c.target, c.lam, c.mu, c.sigma, c.sampler) for c in cells]
    assert got == expected
    assert all(c.protocol == grid.protocol for c in cells)
    # a sweep stopped half-way has every point of the first seed
    assert {c.seed for c in cells[: len(cells) // 2]} == {4}


def test_every_cell_of_a_grid_has_its_own_key():
    grid = SweepGrid(
        targets=("square", "horse"),
        lam=parse_axis("0:1:11", "lam"),
        mu=(-1.0, 1.0),
        sigma=(0.5, 1.0),
        samplers=("barker", "sqrt", "min"),
        seeds=(0, 1),
    )
    keys = [c.key for c in grid.cells()]
    assert len(set(keys)) == len(keys) == grid.n_cells


def test_a_cell_key_changes_with_every_number_that_decides_it():
    base = Cell("square", 0.5, 1.0, 3.0, "barker", 0, Protocol())
    changes = {
        "target": "horse",
        "lam": 0.6,
        "mu": -1.0,
        "sigma": 2.0,
        "sampler": "sqrt",
        "seed": 1,
    }
    for name, value in changes.items():
        assert dataclasses.replace(base, **{name: value}).key != base.key, name
    for name, (default, _low, high) in PROTOCOL_BOUNDS.items():
        other = default + 1 if default + 1 <= high else default - 1
        changed = dataclasses.replace(base, protocol=Protocol(**{name: other}))
        assert changed.key != base.key, name
    # and the same numbers give the same key
    assert Cell("square", 0.5, 1.0, 3.0, "barker", 0, Protocol()).key == base.key


def test_a_cell_as_dict_holds_its_parameters_and_protocol_flat():
    cell = Cell("horse", 1.5, 1.0, 2.0, "min", 3, Protocol(size=12, chains=4))
    assert cell.as_dict() == {
        "target": "horse", "lam": 1.5, "mu": 1.0, "sigma": 2.0, "sampler": "min", "seed": 3,
        "size": 12, "chains": 4, "burn_in": 1000, "steps": 5000, "max_lag": 500,
    }  # fmt: skip
    assert cell.point == ("horse", 1.5, 1.0, 2.0)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"size": 2}, "size must be from 3 to 128, got 2"),
        ({"size": 129}, "size must be from 3 to 128"),
        ({"chains": 0}, "chains must be from 1 to 1,000"),
        ({"burn_in": -1}, "burn-in must be from 0"),
        ({"steps": 9}, "steps must be from 10"),
        ({"max_lag": 100_001}, "max-lag must be from 1 to 100,000"),
        ({"size": 16.0}, "size must be an integer"),
        ({"chains": True}, "chains must be an integer"),
    ],
)
def test_a_protocol_out_of_bounds_is_refused(kwargs, words):
    with pytest.raises(ValueError) as err:
        Protocol(**kwargs)
    assert words in str(err.value)


def test_seeds_from_a_count_or_a_list():
    assert seeds_from(3) == (0, 1, 2)
    assert seeds_from([5, 9]) == (5, 9)
    for bad in (0, 1001, True, [], "3", [1.5], [-1]):
        with pytest.raises(ValueError, match="seed"):
            seeds_from(bad)


# ----------------------------------------------------------------------------- TOML
GOOD_TOML = """
targets = ["square", "horse"]
lam = "0:2:5"
sigma = [1.0, 3.0]
mu = 1.0
samplers = "barker, sqrt"
seeds = 3
[protocol]
size = 12
chains = 4
burn_in = 100
steps = 500
max_lag = 50
"""


def test_a_toml_file_gives_its_grid(tmp_path):
    path = tmp_path / "sweep.toml"
    path.write_text(GOOD_TOML, encoding="utf-8")
    grid = SweepGrid.from_toml(path)
    assert grid.targets == ("square", "horse")
    assert grid.lam == (0.0, 0.5, 1.0, 1.5, 2.0)
    assert grid.sigma == (1.0, 3.0) and grid.mu == (1.0,)
    assert grid.samplers == ("barker", "sqrt")
    assert grid.seeds == (0, 1, 2)
    assert grid.protocol == Protocol(size=12, chains=4, burn_in=100, steps=500, max_lag=50)
    assert grid.n_cells == 2 * 5 * 2 * 1 * 2 * 3
    # the grid written out reads back the same (a run's record of its grid)
    assert SweepGrid.from_dict(grid.as_dict()) == grid


def test_a_toml_file_leaves_unnamed_keys_at_their_defaults(tmp_path):
    path = tmp_path / "sweep.toml"
    path.write_text("lam = [0.5]\n[protocol]\nsteps = 200\n", encoding="utf-8")
    grid = SweepGrid.from_toml(path)
    assert grid.lam == (0.5,) and grid.protocol.steps == 200
    assert grid.samplers == SweepGrid().samplers and grid.protocol.size == Protocol().size


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("lambda = 1.0\n", "unknown key(s) lambda"),
        ("lam = 1.0\n[protocol]\nthreads = 2\n", "unknown protocol key(s) threads"),
        ("lam = [1.0\n", "is not valid TOML"),
        ('targets = ["moon"]\n', "unknown target 'moon'"),
        ("samplers = [1, 2]\n", "samplers must be a list of names"),
        ("protocol = 3\n", "protocol must be a table"),
        ("[protocol]\nsize = 1000\n", "size must be from 3 to 128, got 1,000"),
        ("[protocol]\nchains = 0\n", "chains must be from 1"),
        ("[protocol]\nsteps = 1.5\n", "steps must be an integer"),
        ("seeds = 0\n", "seeds must be from 1 to 1,000"),
        ("lam = true\n", "lambda must be numbers"),
        ('sigma = "1:2"\n', "'start:stop:count'"),
    ],
)
def test_a_bad_toml_file_is_refused_in_a_sentence_naming_the_file(tmp_path, text, words):
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as err:
        SweepGrid.from_toml(path)
    message = str(err.value)
    assert str(path) in message and words in message, message


def test_a_toml_file_over_one_megabyte_missing_or_not_text_is_refused(tmp_path):
    big = tmp_path / "big.toml"
    big.write_text("# padding\n" * 110_000, encoding="utf-8")  # 1.1 MB of comments
    with pytest.raises(ValueError, match="over 1 MB"):
        SweepGrid.from_toml(big)
    with pytest.raises(ValueError, match="cannot read"):
        SweepGrid.from_toml(tmp_path / "missing.toml")
    with pytest.raises(ValueError, match="cannot read"):
        SweepGrid.from_toml(tmp_path)  # a folder
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"lam = 1\n\xff\xfe")
    with pytest.raises(ValueError, match="not UTF-8 text"):
        SweepGrid.from_toml(binary)


def test_a_device_or_a_pipe_as_the_grid_file_is_refused_without_reading_it(tmp_path):
    """Issue 47: ``--config /dev/zero`` read until memory ran out; a FIFO hung for ever."""
    with pytest.raises(ValueError, match="is not a regular file"):
        SweepGrid.from_toml(Path("/dev/zero"))
    fifo = tmp_path / "grid.toml"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="is not a regular file"):
        SweepGrid.from_toml(fifo)
