"""SamplerConfig: a configured sampler as a value (name, options, label), checked once."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lsbcore import Comparison, IsingPosterior, make_sampler
from lsbcore.samplers.config import Options, SamplerConfig, config_of

pytestmark = pytest.mark.usefixtures("single_thread")


def small_target():
    alpha = torch.randn(4, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return IsingPosterior(alpha, 0.5, "free")


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("mala", {}, r"unknown sampler 'mala'; choose one of: barker, "),
        ("gibbs", {"lr": 0.1}, r"the 'gibbs' sampler takes no options, got \['lr'\]\."),
        ("lsb1", {"hidden": 4}, r"unknown options for 'lsb1': \['hidden'\]\."),
        ("lsb1", {"lr": 2.0}, r"lsb1: lr must be between 1e-06 and 1.0, got 2.0\."),
        ("lsb1", {"lr": "fast"}, r"lsb1: lr must be a number, got 'fast'\."),
        ("lsb2", {"hidden": 2.5}, r"lsb2: hidden must be an integer, got 2.5\."),
        ("lsb2", {"hidden": True}, r"lsb2: hidden must be an integer, got True\."),
        ("lsb1", {"optimizer": "rmsprop"}, r"lsb1: optimizer must be one of \("),
        ("hamming-ball", {"block_size": 0}, r"hamming-ball: block_size must be between 1 and"),
    ],
)
def test_bad_configurations_are_refused_when_made(name, options, message):
    with pytest.raises(ValueError, match=message):
        SamplerConfig(name, options)


def test_the_make_sampler_sentences_are_the_same():
    for name, options in (("mala", {}), ("gibbs", {"lr": 0.1}), ("lsb1", {"hidden": 4})):
        with pytest.raises(ValueError) as made:
            make_sampler(name, small_target(), 2, **options)
        with pytest.raises(ValueError) as configured:
            SamplerConfig(name, options)
        assert str(made.value) == str(configured.value)


def test_a_label_must_be_a_non_empty_string():
    with pytest.raises(ValueError, match="label must be a non-empty string"):
        SamplerConfig("gibbs", label="")


def test_configurations_are_values():
    a = SamplerConfig("hamming-ball", {"block_size": 4, "radius": 2})
    b = SamplerConfig("hamming-ball", {"radius": 2, "block_size": 4})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != SamplerConfig("hamming-ball", {"block_size": 4, "radius": 1})
    assert a != SamplerConfig("hamming-ball", {"block_size": 4, "radius": 2}, label="hb")
    with pytest.raises(AttributeError):
        a.name = "gibbs"
    with pytest.raises(TypeError):
        a.options["radius"] = 3
    assert isinstance(a.options, Options) and dict(a.options) == {"block_size": 4, "radius": 2}
    # stored as the option normalises them
    assert SamplerConfig("lsb1", {"lr": 1}).options["lr"] == 1.0
    assert isinstance(SamplerConfig("lsb1", {"lr": 1}).options["lr"], float)


def test_keys_are_the_label_or_the_name_with_the_options_off_their_defaults():
    assert SamplerConfig("gibbs").key == "gibbs"
    assert SamplerConfig("hamming-ball", {"block_size": 10}).key == "hamming-ball"
    assert (
        SamplerConfig("hamming-ball", {"radius": 2, "block_size": 4}).key
        == "hamming-ball(block_size=4, radius=2)"
    )
    assert SamplerConfig("lsb1", {"lr": 0.05}).key == "lsb1(lr=0.05)"
    assert SamplerConfig("block-gibbs", {"block_size": 4}, label="gibbs-4").key == "gibbs-4"


def test_config_of_takes_a_name_or_a_config():
    config = SamplerConfig("lsb1", {"lr": 0.05})
    assert config_of(config) is config
    assert config_of("sqrt") == SamplerConfig("sqrt")


def test_build_is_make_sampler_with_the_options():
    target = small_target()
    built = SamplerConfig("lsb1", {"lr": 0.05}).build(target, 3, seed=4)
    made = make_sampler("lsb1", target, 3, seed=4, lr=0.05)
    assert built.lr == 0.05 and torch.equal(built.x, made.x)
    built.step(5, learn=True)
    made.step(5, learn=True)
    assert torch.equal(built.x, made.x)
    # shared options fill in what the configuration leaves unset; its own win
    assert SamplerConfig("lsb1", {"lr": 0.05}).build(target, 2, lr=0.2).lr == 0.05
    assert SamplerConfig("lsb1").build(target, 2, lr=0.2).lr == 0.2


# ----------------------------------------------------------------------------- in a Comparison
def test_two_configurations_of_one_sampler_race_in_one_comparison():
    target = small_target()
    slow, fast = SamplerConfig("lsb1", {"lr": 0.001}), SamplerConfig("lsb1", {"lr": 0.2})
    small = SamplerConfig("hamming-ball", {"block_size": 2})
    large = SamplerConfig("hamming-ball", {"block_size": 6, "radius": 2})
    c = Comparison([slow, fast, small, large, "gibbs"], target, 3, seed=5, thin=4)
    keys = ["lsb1(lr=0.001)", "lsb1(lr=0.2)", "hamming-ball(block_size=2)",
            "hamming-ball(block_size=6, radius=2)", "gibbs"]  # fmt: skip
    assert c.names == keys and list(c.traces) == keys and list(c.marginals) == keys
    assert c.configs["lsb1(lr=0.2)"] is fast and c.configs["gibbs"] == SamplerConfig("gibbs")
    assert c[keys[0]].lr == 0.001 and c[keys[1]].lr == 0.2
    c.step(12, learn=True)
    c.start_mixing()
    c.step(8)
    assert all(c[key].n_steps == 20 for key in keys)
    # the two hamming balls score blocks of different sizes: different evaluation counts
    assert c[keys[2]].n_target_evals != c[keys[3]].n_target_evals
    for a, b in ((keys[0], keys[1]), (keys[2], keys[3])):
        ta, tb = c.traces[a].arrays(), c.traces[b].arrays()
        assert not np.array_equal(ta["log_p"], tb["log_p"]) or not torch.equal(c[a].x, c[b].x)
        assert c.marginals[a].count == c.marginals[b].count == 2
    # each runs as it would alone, built by make_sampler from the same start and seed
    alone = make_sampler("lsb1", target, 3, seed=5, lr=0.2)
    alone.step(12, learn=True)
    alone.balancing.frozen()
    alone.step(8)
    assert torch.equal(alone.x, c[keys[1]].x)


def test_shared_options_fill_in_what_a_configuration_leaves_unset():
    c = Comparison([SamplerConfig("lsb1", {"lr": 0.05}), "lsb2"], small_target(), 2, lr=0.3)
    assert c["lsb1(lr=0.05)"].lr == 0.05 and c["lsb2"].lr == 0.3


def test_two_configurations_with_one_key_are_refused():
    with pytest.raises(ValueError, match=r"each sampler may appear once, got \['pas', 'pas'\]"):
        Comparison(["pas", SamplerConfig("pas", {"path_length": 3})], small_target(), 2)
    labelled = SamplerConfig("pas", {"path_length": 3}, label="pas-3")
    assert Comparison(["pas", labelled], small_target(), 2).names == ["pas", "pas-3"]
