"""How the page shows a figure: Plotly's toolbar with one button, "download", which saves the
figure as PNG or SVG (the Export tab chooses) under a name that carries the run's problem, seed
and date. Plotly draws the file in the browser, so saving costs the server nothing."""

from __future__ import annotations

import streamlit as st

from app.widgets import ensure

FORMATS = ("png", "svg")
FORMAT_KEY = "figure_format"
# every Plotly toolbar button except the image download (zoom and pan stay on the mouse)
_HIDDEN = [
    "zoom2d", "pan2d", "select2d", "lasso2d", "zoomIn2d", "zoomOut2d", "autoScale2d",
    "resetScale2d", "hoverClosestCartesian", "hoverCompareCartesian", "toggleSpikelines",
    "zoom3d", "pan3d", "orbitRotation", "tableRotation", "resetCameraDefault3d",
    "resetCameraLastSave3d", "hoverClosest3d", "hoverClosestGl2d", "hoverClosestPie",
    "toggleHover", "resetViews", "sendDataToCloud", "resetGeo", "hoverClosestGeo",
]  # fmt: skip


def figure_format() -> str:
    return ensure(FORMAT_KEY, "png", lambda v: v in FORMATS)


def config(stem: str, name: str) -> dict:
    """Plotly's config for a figure saved as ``<stem>-<name>.<png|svg>``."""
    return {
        "displaylogo": False,
        "modeBarButtonsToRemove": _HIDDEN,
        "toImageButtonOptions": {
            "format": figure_format(),
            "filename": f"{stem}-{name}",
            "scale": 2,
        },
    }


def show(fig, run, name: str, where=None) -> None:
    """Draw ``fig`` in ``where`` (the page by default) with its download button."""
    from app.views.export import export_stem  # the views import this module

    (where or st).plotly_chart(fig, config=config(export_stem(run), name))
