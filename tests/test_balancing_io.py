"""Learned balancing functions as JSON: exact round trips, reuse on another target, refusals."""

from __future__ import annotations

import functools
import io
import json

import numpy as np
import pytest
import torch

from lsbcore import (
    IsingPosterior,
    balancing_to_dict,
    balancing_to_json,
    load_balancing,
    make_balancing,
    make_sampler,
    save_balancing,
)
from lsbcore.balancing.functions import MixtureBalancing, NetworkBalancing

pytestmark = pytest.mark.usefixtures("single_thread")

GRID = torch.linspace(-60, 60, 2401, dtype=torch.float64)
LIMIT = 256 * 1024


@functools.cache
def learned(kind: str, hidden: int = 10, seed: int = 0):
    """A learned function after some learning on a 4x4 target (so not at its start); cached,
    and never modified by the tests."""
    generator = torch.Generator().manual_seed(100 + seed)
    alpha = torch.randn(4, 4, generator=generator, dtype=torch.float64)
    options = {"hidden": hidden} if kind == "lsb2" else {}
    sampler = make_sampler(kind, IsingPosterior(alpha, 0.5, "periodic"), 6, seed=seed, **options)
    sampler.step(15, learn=True)
    return sampler.balancing


def log_g(balancing) -> torch.Tensor:
    with torch.no_grad():
        return balancing.log_g(GRID)


def valid_dict(kind: str = "lsb1") -> dict:
    return json.loads(balancing_to_json(learned(kind)))


# ------------------------------------------------------------------------------ round trips
SOURCES = [
    "dict",
    "json-str",
    "bytes",
    "bytearray",
    "path-str",
    "pathlib",
    "text-file",
    "binary-file",
]


def as_source(balancing, how: str, tmp_path):
    text = balancing_to_json(balancing)
    if how == "dict":
        return balancing_to_dict(balancing)
    if how == "json-str":
        return text
    if how == "bytes":
        return text.encode("utf-8")
    if how == "bytearray":
        return bytearray(text.encode("utf-8"))
    path = tmp_path / "g.json"
    save_balancing(balancing, path)
    if how == "path-str":
        return str(path)
    if how == "pathlib":
        return path
    if how == "text-file":
        return io.StringIO(path.read_text(encoding="utf-8"))
    return io.BytesIO(path.read_bytes())


@pytest.mark.parametrize("how", SOURCES)
@pytest.mark.parametrize(
    ("kind", "hidden"), [("lsb1", 10), ("lsb2", 1), ("lsb2", 5), ("lsb2", 10), ("lsb2", 64)]
)
def test_round_trip_reproduces_log_g_exactly(kind, hidden, how, tmp_path):
    original = learned(kind, hidden)
    loaded = load_balancing(as_source(original, how, tmp_path))
    assert type(loaded) is type(original)
    if kind == "lsb2":
        assert loaded.hidden == hidden
    torch.testing.assert_close(log_g(loaded), log_g(original), rtol=0, atol=1e-15)
    for a, b in zip(loaded.parameters(), original.parameters(), strict=True):
        assert torch.equal(a.detach(), b.detach())
    assert not any(p.requires_grad for p in loaded.parameters()), "loaded functions are frozen"


def test_export_carries_format_version_kind_and_meta():
    data = balancing_to_dict(learned("lsb2"), meta={"case": 3, "note": object()})
    assert data["format"] == "lsb-explorer/balancing" and data["version"] == 1
    assert data["kind"] == "lsb2" and data["parameters"]["hidden"] == 10
    assert data["meta"]["case"] == 3 and isinstance(data["meta"]["note"], str)
    json.dumps(data, allow_nan=False)  # plain JSON
    lsb1 = balancing_to_dict(learned("lsb1"))
    assert lsb1["kind"] == "lsb1" and len(lsb1["parameters"]["theta"]) == 4


@pytest.mark.parametrize("name", ["barker", "sqrt", "min", "max"])
def test_fixed_functions_cannot_be_exported(name, tmp_path):
    with pytest.raises(ValueError, match="only learned balancing functions"):
        balancing_to_dict(make_balancing(name))
    with pytest.raises(ValueError, match="only learned balancing functions"):
        save_balancing(make_balancing(name), tmp_path / "g.json")
    assert not (tmp_path / "g.json").exists()


@pytest.mark.parametrize("kind", ["lsb1", "lsb2"])
def test_function_learned_on_one_target_samples_another_exactly(kind, tmp_path, exact):
    source = learned(kind, seed=3)
    save_balancing(source, tmp_path / "g.json")
    balancing = load_balancing(tmp_path / "g.json")
    other = IsingPosterior(exact.random_alpha((2, 3), 0.7, seed=31), 0.6, "free")
    p = exact.exact_posterior(other)
    chains, draws = 1000, 50
    sampler = make_sampler("learned", other, chains, seed=2, balancing=balancing)
    assert sampler.name == "learned"
    before = log_g(balancing)
    counts = exact.histogram(sampler, 60, 5, draws)
    torch.testing.assert_close(log_g(balancing), before, rtol=0, atol=0)
    distance, threshold = exact.tv(p, counts), exact.tv_threshold(p, chains * draws)
    print(f"{kind} learned elsewhere: TV {distance:.4f}, threshold {threshold:.4f}")
    assert distance < threshold


def test_loaded_function_is_balanced():
    for kind in ("lsb1", "lsb2"):
        loaded = load_balancing(valid_dict(kind))
        s = torch.linspace(-1e3, 1e3, 4001, dtype=torch.float64)
        with torch.no_grad():
            gap = loaded.log_g(s) - (s + loaded.log_g(-s))
        assert gap.abs().max().item() < 1e-9


# ------------------------------------------------------------------------------ refusals
def with_changes(kind: str, /, **changes) -> dict:
    data = valid_dict(kind)
    for key, value in changes.items():
        where = data["parameters"] if key.startswith("p_") else data
        key = key.removeprefix("p_")
        if value is DROP:
            where.pop(key)
        else:
            where[key] = value
    return data


DROP = object()
REFUSED = [
    ("lsb1", {"format": "something-else"}, "'format' must be"),
    ("lsb1", {"format": DROP}, "'format' must be"),
    ("lsb1", {"version": 2}, "unsupported version"),
    ("lsb1", {"version": "1"}, "unsupported version"),
    ("lsb1", {"version": DROP}, "unsupported version"),
    ("lsb1", {"kind": "lsb3"}, "'kind' must be 'lsb1' or 'lsb2'"),
    ("lsb1", {"kind": DROP}, "'kind' must be 'lsb1' or 'lsb2'"),
    ("lsb1", {"parameters": DROP}, "'parameters' must be an object"),
    ("lsb1", {"parameters": [1, 2, 3, 4]}, "'parameters' must be an object"),
    ("lsb1", {"p_theta": DROP}, "'theta' must be a list of 4 numbers"),
    ("lsb1", {"p_theta": [0.0, 1.0, 2.0]}, "'theta' must be a list of 4 numbers"),
    ("lsb1", {"p_theta": [0.0] * 5}, "'theta' must be a list of 4 numbers"),
    ("lsb1", {"p_theta": "0,0,0,0"}, "'theta' must be a list of 4 numbers"),
    ("lsb1", {"p_theta": [0.0, float("nan"), 0.0, 0.0]}, "'theta' must contain only finite"),
    ("lsb1", {"p_theta": [0.0, float("inf"), 0.0, 0.0]}, "'theta' must contain only finite"),
    ("lsb1", {"p_theta": [0.0, "1", 0.0, 0.0]}, "'theta' must contain only finite"),
    ("lsb1", {"p_theta": [0.0, True, 0.0, 0.0]}, "'theta' must contain only finite"),
    ("lsb1", {"p_theta": [0.0, None, 0.0, 0.0]}, "'theta' must contain only finite"),
    ("lsb1", {"p_theta": [0.0, [1.0], 0.0, 0.0]}, "'theta' must contain only finite"),
    ("lsb1", {"p_theta": [-400.0, 400.0, 0.0, 0.0]}, "'theta' spans more than 700"),
    ("lsb2", {"p_hidden": 0}, "'hidden' must be an integer between 1 and 256"),
    ("lsb2", {"p_hidden": 257}, "'hidden' must be an integer between 1 and 256"),
    ("lsb2", {"p_hidden": 10.0}, "'hidden' must be an integer between 1 and 256"),
    ("lsb2", {"p_hidden": "10"}, "'hidden' must be an integer between 1 and 256"),
    ("lsb2", {"p_hidden": True}, "'hidden' must be an integer between 1 and 256"),
    ("lsb2", {"p_hidden": DROP}, "'hidden' must be an integer between 1 and 256"),
    ("lsb2", {"p_hidden": 11}, "'w1' must be a list of 11 numbers"),
    ("lsb2", {"p_w1": [0.5] * 9}, "'w1' must be a list of 10 numbers"),
    ("lsb2", {"p_b1": DROP}, "'b1' must be a list of 10 numbers"),
    ("lsb2", {"p_w2": [0.5] * 11}, "'w2' must be a list of 10 numbers"),
    ("lsb2", {"p_w2": [float("-inf")] + [0.5] * 9}, "'w2' must contain only finite"),
    ("lsb2", {"p_b2": DROP}, "'b2' must contain only finite"),
    ("lsb2", {"p_b2": "0.1"}, "'b2' must contain only finite"),
    ("lsb2", {"p_b2": [0.1]}, "'b2' must contain only finite"),
    ("lsb2", {"p_b2": float("nan")}, "'b2' must contain only finite"),
    ("lsb2", {"p_w1": [1.5e308] + [0.5] * 9}, "'w1' must contain only finite numbers between"),
    ("lsb2", {"p_w2": [1e4 + 1] + [0.5] * 9}, "'w2' must contain only finite numbers between"),
    ("lsb1", {"p_theta": [0.0, 10**400, 0.0, 0.0]}, "'theta' must contain only finite"),
]


@pytest.mark.parametrize(("kind", "changes", "message"), REFUSED)
def test_malformed_content_is_refused_with_a_reason(kind, changes, message):
    data = with_changes(kind, **changes)
    with pytest.raises(ValueError, match=message):
        load_balancing(data)
    # the same content as JSON text is refused alike, NaN / Infinity literals and numbers too
    # long for a float before any conversion
    text = json.dumps(data)
    literal = any(c in text for c in ("NaN", "Infinity")) or "1" + "0" * 400 in text
    as_text = (
        "is not a number a learned function may hold|more than 20 digits" if literal else message
    )
    with pytest.raises(ValueError, match=as_text):
        load_balancing(text.encode("utf-8"))


def oversized_json() -> str:
    data = valid_dict("lsb1")
    data["meta"] = {"padding": "x" * (LIMIT + 10)}
    return json.dumps(data)


@pytest.mark.parametrize("how", ["str", "bytes", "path", "text-file", "binary-file"])
def test_oversized_input_is_refused(how, tmp_path):
    text = oversized_json()
    assert len(text.encode("utf-8")) > LIMIT
    path = tmp_path / "big.json"
    path.write_text(text, encoding="utf-8")
    source = {
        "str": text,
        "bytes": text.encode("utf-8"),
        "path": path,
        "text-file": io.StringIO(text),
        "binary-file": io.BytesIO(text.encode("utf-8")),
    }[how]
    with pytest.raises(ValueError, match="larger than 256 kB"):
        load_balancing(source)


@pytest.mark.parametrize("text", ["x" * 300, "not json at all " * 40])
def test_long_text_that_is_no_path_is_refused_with_a_value_error(text):
    """A string is a path or JSON text; one that is neither must give ValueError, not OSError
    (names longer than the file system allows)."""
    with pytest.raises(ValueError):
        load_balancing(text)


@pytest.mark.parametrize(
    "raw",
    [b"\xff\xfe\x00", b"not json", b'{"format": ', b"", "{not json", '{"a": 1,}'],
    ids=["binary", "words", "truncated", "empty", "str-bad", "str-trailing-comma"],
)
def test_non_json_is_refused(raw):
    with pytest.raises(ValueError, match="not valid JSON|not UTF-8 text"):
        load_balancing(raw)


@pytest.mark.parametrize("raw", [b"[1, 2]", b'"text"', b"3.5", b"null", b"true"])
def test_json_that_is_not_an_object_is_refused(raw):
    with pytest.raises(ValueError, match="must be an object"):
        load_balancing(raw)
    with pytest.raises(ValueError, match="must be an object"):
        load_balancing(io.BytesIO(raw))


@pytest.mark.parametrize("as_bytes", [True, False], ids=["bytes", "str"])
def test_deeply_nested_json_is_refused_with_a_value_error(as_bytes):
    depth = 100_000  # 200 kB: under the size limit, far over Python's recursion limit
    text = '{"format": ' + "[" * depth + "]" * depth + "}"
    assert len(text) < LIMIT
    with pytest.raises(ValueError):
        load_balancing(text.encode("utf-8") if as_bytes else text)


def test_unsupported_sources_and_missing_files_are_refused(tmp_path):
    with pytest.raises(ValueError, match="expected a path, JSON text, bytes or a dict"):
        load_balancing(123)
    with pytest.raises(ValueError, match="expected a path, JSON text, bytes or a dict"):
        load_balancing(None)
    with pytest.raises(ValueError, match="no learned-function file"):
        load_balancing(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="no learned-function file"):
        load_balancing(str(tmp_path))  # a directory is no file


def test_loaded_parameters_are_exactly_the_json_numbers():
    data = valid_dict("lsb2")
    loaded = load_balancing(data)
    assert isinstance(loaded, NetworkBalancing)
    p = data["parameters"]
    np.testing.assert_array_equal(loaded.layer1.weight.detach().view(-1).numpy(), p["w1"])
    np.testing.assert_array_equal(loaded.layer1.bias.detach().numpy(), p["b1"])
    np.testing.assert_array_equal(loaded.layer2.weight.detach().view(-1).numpy(), p["w2"])
    assert loaded.layer2.bias.item() == p["b2"]
    theta = valid_dict("lsb1")["parameters"]["theta"]
    loaded = load_balancing(
        {
            "format": "lsb-explorer/balancing",
            "version": 1,
            "kind": "lsb1",
            "parameters": {"theta": theta},
        }
    )
    assert isinstance(loaded, MixtureBalancing)
    np.testing.assert_array_equal(loaded.theta.detach().numpy(), theta)


@pytest.mark.parametrize(
    ("number", "message"),
    [
        ("1" * 400, "more than 20 digits"),
        ("-" + "9" * 5000, "more than 20 digits"),
        ("1e400", "too large for a float"),
        ("NaN", "NaN is not a number"),
        ("-Infinity", "-Infinity is not a number"),
    ],
)
def test_numbers_in_the_text_are_bounded_before_any_conversion(number, message):
    text = json.dumps(valid_dict("lsb1")).replace('"theta": [', f'"theta": [{number}, ', 1)
    with pytest.raises(ValueError, match=message):
        load_balancing(text)


def test_a_byte_order_mark_is_accepted():
    text = json.dumps(valid_dict("lsb1"))
    plain = load_balancing(text.encode("utf-8"))
    with_bom = load_balancing(b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert torch.equal(plain.theta, with_bom.theta)


def test_weights_in_bounds_give_finite_values_on_both_evaluation_paths():
    data = valid_dict("lsb2")
    hidden = data["parameters"]["hidden"]
    data["parameters"].update(w1=[1e4] * hidden, b1=[-1e4] * hidden, w2=[1e4] * hidden, b2=1e4)
    balancing = load_balancing(data)
    s = torch.linspace(-1e4, 1e4, 5001, dtype=torch.float64)  # the piecewise path
    assert bool(torch.isfinite(balancing.log_g(s)).all())
    assert bool(torch.isfinite(balancing.log_g(s[::50])).all())  # the network as written
