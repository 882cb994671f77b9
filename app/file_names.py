"""Names made from text the user gave (a photo's file name) or the app chose (a problem's
name): safe characters only, and never cut in the middle of a word.

``file_stem`` is for download names (lower case, letters, digits and dashes) and
``export_stem`` the start of every file a run saves: its problem, the key settings in words, the
seed, a digest of every setting that changes the result and the date, so that two runs' files
never share a name (a setting not spelled out still changes the digest); ``photo_title`` turns
an uploaded file's name into the problem's name, so that a photo's outputs carry the photo's
own name instead of "uploaded image" for every photo.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
from pathlib import PurePosixPath, PureWindowsPath

from app.config import run_settings

__all__ = [
    "UPLOAD_TITLE",
    "cut_at_word",
    "export_stem",
    "file_stem",
    "photo_title",
    "result_settings",
    "settings_digest",
]

UPLOAD_TITLE = "uploaded image"
PHOTO_CHARS = 40  # a photo's name in the problem's name, at most
STEM_CHARS = 48  # the problem's part of a file name, at most (cut at a word boundary)
DIGEST_CHARS = 6  # hex characters of the settings' digest: 16.7 million values
# Configuration fields that change no result: how often the page redraws the run
NOT_RESULTS = ("speed",)
FINGERPRINT = "photo_fingerprint"  # run.cache: (the uploaded bytes, their SHA-256)
MODEL_FINGERPRINT = "model_fingerprint"  # run.cache: an uploaded network's or own RBM's SHA-256


def cut_at_word(words: str, limit: int, sep: str = "-") -> str:
    """``words`` (joined by ``sep``) shortened to at most ``limit`` characters by dropping
    whole words from the end; a first word longer than ``limit`` is cut (no boundary exists)."""
    if len(words) <= limit:
        return words
    head = words[: limit + 1]
    cut = head.rfind(sep)
    return (head[:cut] if cut > 0 else words[:limit]).strip(sep)


def file_stem(text: str, limit: int) -> str:
    """``text`` in lower-case letters, digits and single dashes, at most ``limit`` characters,
    cut between words; empty when nothing usable is left."""
    words = re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")
    return cut_at_word(words, limit)


def _photo_fingerprint(run) -> str | None:
    """SHA-256 of an uploaded photo's bytes (two uploads may share a file name), computed once
    per run; None for a shipped sample, whose name is in the configuration."""
    source = getattr(run, "source", None)
    if not isinstance(source, bytes | bytearray | memoryview):
        return None
    cache = getattr(run, "cache", {})
    held = cache.get(FINGERPRINT)
    if held is None or held[0] is not source:  # charts ask on every redraw: hash only once
        held = cache[FINGERPRINT] = (source, hashlib.sha256(source).hexdigest())
    return held[1]


def _model_fingerprint(run) -> str | None:
    """SHA-256 of a model the user gave (an uploaded network's scopes and tables, their own
    RBM's weights: two may share a name), computed once per run; None for a shipped model or a
    preset, which the settings name."""
    target = run.config.target
    if target not in ("uai", "own"):
        return None
    cache = getattr(run, "cache", {})
    if MODEL_FINGERPRINT not in cache:
        model, digest = run.problem.target, hashlib.sha256()
        if target == "uai":
            parts = [(repr(scope).encode(), table) for scope, table in
                     zip(model.scopes, model.log_tables, strict=True)]  # fmt: skip
        else:
            parts = [(b"", t) for t in (model.W, model.b_visible, model.b_hidden)]
        for head, tensor in parts:
            digest.update(head)
            digest.update(tensor.detach().cpu().double().numpy().tobytes())
        cache[MODEL_FINGERPRINT] = digest.hexdigest()
    return cache[MODEL_FINGERPRINT]


def result_settings(run) -> dict:
    """Every setting that changes what ``run`` produces, as JSON values: the sidebar's
    configuration (all but the redraw speed; an RBM's or a network's run its own fields only,
    ``config.run_settings``), the problem's name (an upload's file name), the fingerprint of an
    uploaded photo, network or the user's own RBM, and an object prompt's box, points and
    refits."""
    if run.config.target != "ising":
        settings = {**run_settings(run.config), "problem": run.problem.name}
        model = _model_fingerprint(run)
        return settings if model is None else {**settings, "model": model}
    settings = {k: v for k, v in run.config.as_dict().items() if k not in NOT_RESULTS}
    settings["problem"] = run.problem.name
    photo = _photo_fingerprint(run)
    if photo is not None:
        settings["photo"] = photo
    data = getattr(run.problem, "data", None)
    prompt = getattr(data, "prompt", None)
    if prompt is not None:
        settings["prompt"] = {"box": prompt.box, "points": prompt.points, "refits": data.refits}
    return settings


def settings_digest(settings: dict) -> str:
    """The first ``DIGEST_CHARS`` hex characters of the SHA-256 of ``settings`` as canonical
    JSON (sorted keys, no spaces): equal settings, equal digest."""
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:DIGEST_CHARS]


def _number(value: float) -> str:
    return f"{float(value):.4g}".replace("+", "")  # 4 digits to read; the digest has the rest


def setting_words(run) -> list[str]:
    """The settings a name spells out: for the Ising posterior the resolution (``n30`` for a
    paper case's n x n lattice, ``128px`` for a photo's longer side), a photo's data model
    (``mixture``, ``threshold`` or ``prompt``), and lambda, mu and sigma; none for the RBM and
    network targets, whose name says which they are."""
    cfg = run.config
    if cfg.target != "ising":
        return []
    if cfg.source == "paper":
        words = [f"n{cfg.size}"]
    else:
        prompted = getattr(getattr(run.problem, "data", None), "prompt", None) is not None
        words = ["prompt" if prompted else file_stem(cfg.model, 16), f"{cfg.size}px"]
    return [*words, f"lam{_number(cfg.lam)}", f"mu{_number(cfg.mu)}", f"sigma{_number(cfg.sigma)}"]


def export_stem(run, day: datetime.date | None = None) -> str:
    """``lsb-<problem>-<settings>-seed<seed>-<digest>-<date>``, e.g.
    ``lsb-case-4-dependent-clean-n30-lam1-mu1-sigma3-seed0-4aa749-2026-11-24``: the problem's
    name in lower-case letters, digits and dashes, cut between words (a photo's own file name
    included, so nothing odd reaches a file name), the key settings (``setting_words``) and
    the digest of every result-changing setting (``result_settings``); within the sidebar's
    bounds, at most about 140 characters."""
    problem = file_stem(run.problem.name, STEM_CHARS) or "run"
    words = "".join(f"-{w}" for w in setting_words(run))
    digest = settings_digest(result_settings(run))
    day = day or datetime.date.today()
    return f"lsb-{problem}{words}-seed{run.config.seed}-{digest}-{day.isoformat()}"


def photo_title(file_name: str | None) -> str:
    """The problem's name for an uploaded photo: its file name's stem in safe characters
    (letters, digits, dashes and underscores, so it is safe in Markdown and in file names)
    and "uploaded image", e.g. ``my-cat, uploaded image``; only "uploaded image" when the name
    gives nothing usable. A path in the name (``../x.png``, ``C:\\x.png``) counts for its last
    part only."""
    if not file_name:
        return UPLOAD_TITLE
    last = PureWindowsPath(PurePosixPath(str(file_name)).name).name
    stem = last.rsplit(".", 1)[0] if "." in last.lstrip(".") else last
    safe = cut_at_word(re.sub(r"[^A-Za-z0-9_]+", "-", stem).strip("-_"), PHOTO_CHARS)
    return f"{safe}, {UPLOAD_TITLE}" if safe else UPLOAD_TITLE
