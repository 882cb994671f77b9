"""The largest upload a page takes: Streamlit's own limit (``server.maxUploadSize`` in
``.streamlit/config.toml``; its uploader counts megabytes of 10^6 bytes and refuses a larger
file in the browser) or the reader's cap, whichever is smaller. Help texts state this one, so
that no page promises a size the browser then refuses."""

from __future__ import annotations

import streamlit as st


def upload_limit_mb(reader_bytes: int) -> int:
    """Whole megabytes a file may have to reach a reader that accepts ``reader_bytes``."""
    return min(int(st.get_option("server.maxUploadSize")), reader_bytes // 1_000_000)
