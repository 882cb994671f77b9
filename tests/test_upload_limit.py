"""The upload boxes' help states the size the browser accepts: Streamlit's own limit
(``.streamlit/config.toml``) where it is below the reader's cap. An RBM help that said 25 MB
while the browser refused a 20.0 MB file was the bug."""

from __future__ import annotations

import tomllib
from pathlib import Path

from app_support import open_app, stop_runs_fixture  # noqa: F401  (autouse)

from app import upload_limit

CONFIG_MB = tomllib.loads(
    (Path(__file__).resolve().parent.parent / ".streamlit" / "config.toml").read_text()
)["server"]["maxUploadSize"]


def test_the_limit_is_the_smaller_of_streamlits_and_the_readers(monkeypatch):
    monkeypatch.setattr(upload_limit.st, "get_option", lambda name: 20)
    assert upload_limit.upload_limit_mb(25_000_000) == 20  # Streamlit refuses first
    assert upload_limit.upload_limit_mb(4_500_000) == 4  # the reader refuses first


def _upload_help(at, key: str) -> str:
    boxes = [e for e in at.sidebar if getattr(e, "key", None) == key]
    (box,) = boxes
    return box.proto.help


def test_the_rbm_and_photo_boxes_state_the_browsers_limit():
    at = open_app(target="own")
    assert f"Up to {CONFIG_MB} MB," in _upload_help(at, "rbm_upload")
    at = open_app(source="upload")
    help_text = _upload_help(at, "upload")
    assert f"up to {CONFIG_MB} MB." in help_text and f"over {CONFIG_MB} MB are refused" in help_text
