"""User text on the page: quoted as plain, shortened text, never as Markdown or HTML.

Streamlit renders messages as Markdown, so a link parameter like ``[Log in](https://…)`` or
``![](https://…/x.png)`` would become a real link or make the browser fetch an image. Every
ASCII punctuation character is backslash-escaped (CommonMark shows an escaped character as
itself), which also breaks HTML tags; bare URLs and e-mail addresses get an invisible word
joiner, since the browser's autolinker matches them even when escaped.
"""

from __future__ import annotations

import re

QUOTE_CHARS = 40  # a quoted value is shortened to this many characters
_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")
# The page's Markdown links bare URLs and e-mail addresses even where their punctuation is
# escaped (seen in Chromium: "https\\://e.org" became a link); a zero-width word joiner after
# the scheme, after "www" and after "@" leaves nothing for the autolinker to match.
_AUTOLINK = re.compile(r"(?i)(?:https?|ftp|mailto):|www(?=\.)|@")
WORD_JOINER = "\u2060"


def escape(text: str) -> str:
    """``text`` shown literally by Markdown: punctuation escaped, line breaks as spaces, and
    the browser's URL and e-mail autolinks broken by an invisible word joiner."""
    text = _AUTOLINK.sub(lambda m: m.group(0) + WORD_JOINER, _CONTROL.sub(" ", str(text)))
    return _PUNCTUATION.sub(r"\\\1", text)


def shorten(text: str, limit: int = QUOTE_CHARS) -> str:
    text = _CONTROL.sub(" ", str(text))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quote(value, limit: int = QUOTE_CHARS) -> str:
    """A user's value inside a message: shortened, escaped, in quotation marks."""
    return f"“{escape(shorten(value, limit))}”"


def plain(message, limit: int = 300) -> str:
    """A whole message that may quote user input (an error from a file), shown literally."""
    return escape(shorten(message, limit))


def grid_size(height: int, width: int) -> str:
    """A lattice's or a picture's size as the page writes it everywhere: width × height
    (``48 × 32`` for 32 rows of 48 sites), the order of a photo's size in pixels, so that a
    lattice and the photo it came from read alike."""
    return f"{width:,} × {height:,}"


def counted(n: int, noun: str) -> str:
    """``n`` and its noun in the right number: "1 chain", "4 chains"."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"
