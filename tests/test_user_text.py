"""No user text reaches the page as Markdown or HTML: link parameters, file names and the
fields of a learned-function JSON are quoted as plain, shortened text, so the page holds no
link or image it did not put there (the red team's `?boundary=[Click to login](…)` and
`![](https://evil.example/x.png)=1`)."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app import config as cfgmod
from app.text import escape, plain, quote
from lsbcore import load_balancing

APP = Path(__file__).resolve().parent.parent / "app" / "streamlit_app.py"
HOSTILE = [
    "[Click to login](https://evil.example/login)",
    "![](https://evil.example/x.png)",
    "<img src=https://evil.example/y.png>",
    "<a href='https://evil.example'>x</a>",
    "https://evil.example/bare",
    "www.evil.example",
    "`code` **bold** $x^2$ | table |",
    "x" * 5000,
]
_TAG = re.compile(r"(?<!\\)<\s*[a-zA-Z/!]")
_LINK = re.compile(r"(?<!\\)\]\s*\(")


def unsafe(text: str) -> list[str]:
    """What in Markdown source ``text`` could become a link, an image or an HTML tag."""
    found = []
    if "evil.example" in text:  # an unescaped host: a link, an image or an autolink
        found.append("host")
    if _TAG.search(text):
        found.append("tag")
    if _LINK.search(text):
        found.append("link")
    return found


def page_texts(at: AppTest) -> list[str]:
    kinds = ("warning", "error", "info", "success", "caption", "markdown", "exception")
    return [str(e.value) for kind in kinds for e in at.get(kind)]


def test_escape_leaves_no_markup_and_quote_shortens():
    for text in HOSTILE:
        assert unsafe(escape(text)) == [], text
        assert len(quote(text)) < 2 * 40 + 10
    assert unsafe("see [this](https://evil.example)") == ["host", "link"]  # the check works
    assert plain("a\nb\x00c") == "a b c"


@pytest.mark.parametrize("value", HOSTILE, ids=lambda v: v[:20])
def test_hostile_link_values_and_keys_show_as_plain_text(value):
    keys = [f.name for f in fields(cfgmod.Config)]
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update({key: value for key in keys})
    at.query_params[value[:200]] = "1"  # an unknown key made of the same text
    at.run()
    assert not at.exception
    texts = page_texts(at)
    assert any("ignored" in t or "using the default" in t for t in texts)  # it was quoted
    for text in texts:
        assert unsafe(text) == [], text[:300]
        assert len(text) < 4000, text[:300]


def valid_lsb1() -> dict:
    return {
        "format": "lsb-explorer/balancing",
        "version": 1,
        "kind": "lsb1",
        "parameters": {"theta": [0.0, 0.0, 0.0, 0.0]},
    }


@pytest.mark.parametrize("field", ["format", "version", "kind", "parameters", "theta"])
@pytest.mark.parametrize("value", HOSTILE, ids=lambda v: v[:20])
def test_hostile_json_fields_give_a_plain_short_message(field, value):
    data = valid_lsb1()
    if field == "theta":
        data["parameters"]["theta"] = [value, 0.0, 0.0, 0.0]
    else:
        data[field] = value
    with pytest.raises(ValueError) as err:
        load_balancing(json.dumps(data).encode("utf-8"))
    shown = f"This learned function cannot be used: {plain(str(err.value))}"  # the sidebar's
    assert unsafe(shown) == [] and len(shown) < 500


def lsb2_text(**changes) -> str:
    hidden = 4
    params = {"hidden": hidden, "w1": [0.5] * hidden, "b1": [0.0] * hidden}
    params |= {"w2": [0.5] * hidden, "b2": 0.0} | changes
    data = {"format": "lsb-explorer/balancing", "version": 1, "kind": "lsb2"}
    return json.dumps(data | {"parameters": params})


# Every field of an uploaded learned function, hostile text in each, and the numbers the red
# team sent: (what the file holds, what the sidebar must say)
UPLOADS = [
    *[
        (json.dumps(valid_lsb1() | {field: value}).encode(), "cannot be used")
        for field in ("format", "version", "kind", "parameters")
        for value in HOSTILE
    ],
    *[
        (lsb2_text(**{key: [value] * 4}).encode(), "cannot be used")
        for key in ("w1", "b1")
        for value in HOSTILE[:3]
    ],
    *[(lsb2_text(hidden=value).encode(), "cannot be used") for value in HOSTILE[:2]],
    (lsb2_text(w1=[1.5e308] * 4).encode(), "between ±10,000"),
    (lsb2_text().replace('"b2": 0.0', '"b2": ' + "9" * 400).encode(), "more than 20 digits"),
    (lsb2_text().replace('"b2": 0.0', '"b2": ' + "9" * 5000).encode(), "more than 20 digits"),
    (lsb2_text().replace('"b2": 0.0', '"b2": 1e400').encode(), "too large for a float"),
    (lsb2_text().replace('"b2": 0.0', '"b2": NaN').encode(), "NaN is not a number"),
    (lsb2_text().replace('"b2": 0.0', '"b2": -Infinity').encode(), "-Infinity is not a number"),
]


def test_every_field_of_an_uploaded_learned_function_is_shown_as_plain_short_text():
    """One app session, each file uploaded in turn: the sidebar refuses it with a sentence, the
    page keeps its Reset button and holds no link, image or tag it did not put there."""
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params["samplers"] = "barker,learned"
    at.run()
    uploader = next(u for u in at.get("file_uploader") if u.key == "learned_file")
    for raw, expected in UPLOADS:
        uploader.set_value(("learned.json", raw, "application/json"))
        at.run()
        assert not at.exception, raw[:80]
        texts = page_texts(at)
        refusals = [t for t in texts if "This learned function cannot be used" in t]
        assert len(refusals) == 1 and expected in refusals[0].replace("\\", ""), (raw[:80], texts)
        assert not any("Something went wrong" in t or "int_max_str" in t for t in texts)
        assert any(b.key == "reset" for b in at.button), raw[:80]
        for text in texts:
            assert unsafe(text) == [], text[:300]
            assert len(text) < 4000, text[:300]
        uploader = next(u for u in at.get("file_uploader") if u.key == "learned_file")
    # the check can fail: a valid file is accepted and no refusal is shown
    uploader.set_value(("learned.json", lsb2_text().encode(), "application/json"))
    at.run()
    assert not any("cannot be used" in t for t in page_texts(at))
