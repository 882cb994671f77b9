"""How the page shows a figure: Plotly's toolbar with one button, "download", which saves the
figure as PNG or SVG (the Export tab chooses) under a name that carries the run's problem, seed
and date. Plotly draws the file in the browser, so saving costs the server nothing. Figures meant
side by side go in a ``row``: cells of at least ``MIN_CELL_PX`` that wrap one under the other on
a narrow page instead of squeezing titles into legends."""

from __future__ import annotations

import streamlit as st

from app import page_state, presentation
from app.file_names import export_stem
from app.page_state import ensure

FORMATS = ("png", "svg")
FORMAT_KEY = page_state.FIGURE_FORMAT.key  # the Export tab's choice (a widget)
# every Plotly toolbar button except the image download (zoom and pan stay on the mouse)
_HIDDEN = [
    "zoom2d", "pan2d", "select2d", "lasso2d", "zoomIn2d", "zoomOut2d", "autoScale2d",
    "resetScale2d", "hoverClosestCartesian", "hoverCompareCartesian", "toggleSpikelines",
    "zoom3d", "pan3d", "orbitRotation", "tableRotation", "resetCameraDefault3d",
    "resetCameraLastSave3d", "hoverClosest3d", "hoverClosestGl2d", "hoverClosestPie",
    "toggleHover", "resetViews", "sendDataToCloud", "resetGeo", "hoverClosestGeo",
]  # fmt: skip


MIN_CELL_PX = 440
ROW_STYLE = f"""
<style>
div[class*="st-key-chart_row_"] > div {{ flex: 1 1 {MIN_CELL_PX}px !important;
  min-width: min({MIN_CELL_PX}px, 100%) !important; }}
</style>
"""


def row(name: str, n: int = 2) -> list:
    """``n`` containers side by side, each at least ``MIN_CELL_PX`` wide (they wrap). The
    row's direct children are Streamlit's wrappers of the cells: those are the flex items."""
    st.html(ROW_STYLE)
    outer = st.container(horizontal=True, key=f"chart_row_{name}", gap="medium")
    return [outer.container(key=f"chart_cell_{name}_{k}") for k in range(n)]


def figure_format() -> str:
    """The format chosen on the Export tab. Streamlit drops a widget's state in a run that does
    not draw it, so the choice is also kept under a plain key for the other tabs' charts."""
    chosen = page_state.FIGURE_FORMAT_CHOSEN
    if page_state.FIGURE_FORMAT.get() in FORMATS:
        chosen.set(page_state.FIGURE_FORMAT.get())
    return ensure(FORMAT_KEY, chosen.get(), lambda v: v in FORMATS)


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


def show(fig, run, name: str, where=None, width="stretch", max_height=None) -> None:
    """Draw ``fig`` in ``where`` (the page by default) with its download button; ``width``
    "content" keeps the figure's own width; ``max_height``: its height at most in presentation
    mode (``presentation.MAX_HEIGHT`` by default)."""
    fig = presentation.figure(fig, max_height or presentation.MAX_HEIGHT)
    (where or st).plotly_chart(fig, width=width, config=config(export_stem(run), name))


def customdata_pair(point) -> list | None:
    """The two values a clicked Plotly point carries in its ``customdata`` (a list, or a
    mapping by position as the browser may send it), unchecked; None when it carries none."""
    if not isinstance(point, dict):
        return None
    data = point.get("customdata")
    if isinstance(data, dict):
        data = [data.get(i, data.get(str(i))) for i in range(2)]
    if isinstance(data, (list, tuple)) and len(data) >= 2:
        return list(data[:2])
    return None
