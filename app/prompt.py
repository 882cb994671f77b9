"""Tell it what the object is: a box dragged around the object on the photo, and object or
background points clicked on it.

The photo is drawn as a Plotly image with box and point selection (Streamlit's
``st.plotly_chart(..., on_select=...)``). A faint grid of invisible markers covers it so that a
click selects the nearest grid point (Plotly selects markers, not image pixels). The prompt is
kept in Session State per image (``STATE``) in fractions of the width and height, so it
survives reruns and a change of working resolution; another image's prompt is kept aside
(``KEPT``), so choosing an image again brings its prompt back. It
is validated by ``lsbcore.make_prompt`` and on the working lattice before it is kept; a refusal
is one sentence under the figure, and the previous prompt stays.

The prompt is part of the posterior: ``session.ensure_run`` reads ``current`` and rebuilds the
run when it changes, saying so; the segmentation then fits colour mixtures to the regions it
marks (``lsbcore.segmentation.prompted``) and refits them from the marginal while the run goes
on, on the library's schedule (``colour_refits``).
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import streamlit as st

import lsbcore
from app.colour_refits import REFIT_SWEEPS, REFITS
from app.text import plain
from app.views import pixels

STATE = "_prompt"  # {"image": id, "shape": (H, W), "box", "points", "error", "version"}
KEPT = "_prompts_kept"  # {image id: entry}: the prompts of images not shown now
KEPT_IMAGES = 8  # prompts kept at most (the oldest goes first)
FIGURE = "prompt_figure"  # the chart's key (with the version: a new key clears its selection)
MODE = "prompt_mode"  # what the pointer does on the figure
MODES = ("box", "object", "background")
MODE_LABELS = {
    "box": "drag a box",
    "object": "click object points",
    "background": "click background points",
}
GRID = 48  # click targets per side at most
HEIGHT = 320
COLOURS = {1: "rgb(230,60,40)", -1: "rgb(40,120,230)"}  # object: the mask's tint


def _entry(image_id: str | None, shape: tuple[int, int] | None = None) -> dict:
    """The stored prompt of ``image_id``: the one it had when last shown (kept in ``KEPT``
    while another image is shown), else a new, empty one."""
    entry = st.session_state.get(STATE)
    if entry is None or entry.get("image") != image_id:
        kept = st.session_state.setdefault(KEPT, {})
        version = 0 if entry is None else entry.get("version", 0) + 1
        if entry is not None and (entry["box"] is not None or entry["points"]):
            kept[entry["image"]] = entry
            while len(kept) > KEPT_IMAGES:
                kept.pop(next(iter(kept)))  # the oldest
        entry = kept.pop(image_id, None) or {
            "image": image_id, "box": None, "points": [], "error": None
        }  # fmt: skip
        entry["version"] = version  # a new chart key: the figure draws the prompt afresh
        st.session_state[STATE] = entry
    if shape is not None:
        entry["shape"] = tuple(shape)
    return entry


def current(image_id: str | None) -> lsbcore.Prompt | None:
    """The prompt for the image ``image_id`` (None: no prompt, or points that do not yet mark
    both classes; the automatic model is used)."""
    if image_id is None:
        return None
    entry = _entry(image_id)
    try:
        return lsbcore.make_prompt(entry["box"], entry["points"])
    except ValueError:  # points without a box, not yet of both classes
        return None


def _pending(box, points) -> bool:
    """Points without a box that do not yet mark both classes: kept, not yet used."""
    return box is None and bool(points) and {p[2] for p in points} != {1, -1}


def _keep(entry: dict, box, points) -> None:
    """Keep the candidate prompt when it is valid on the working lattice, or when it is points
    still waiting for the other class; else say why and keep the previous one."""
    if not _pending(box, points):
        try:
            prompt = lsbcore.make_prompt(box, points)
            if prompt is not None and entry.get("shape"):
                prompt.regions(entry["shape"])
        except ValueError as err:
            entry["error"] = plain(err)
            return
    # a new chart key: the figure redraws with the prompt and forgets the selection it sent
    entry.update(box=box, points=list(points), error=None, version=entry["version"] + 1)


def _fraction(value: float, size: int) -> float:
    """A figure coordinate (pixel centres at 0 .. size - 1) as a fraction of the side."""
    return min(max((float(value) + 0.5) / size, 0.0), 1.0)


def from_selection(selection, shape, box, points, mode: str = "object"):
    """The prompt after one selection event on the figure: ``(box, points)``, or None when the
    event says nothing new. A dragged box replaces the box (points are kept); a click adds a
    point of class ``mode``. Figure coordinates have pixel centres at 0 .. size - 1."""
    height, width = shape
    selection = selection or {}
    boxes = [b for b in selection.get("box") or () if len(b.get("x", ())) == 2]
    if boxes:
        xs, ys = boxes[-1]["x"], boxes[-1]["y"]
        corners = (min(xs), min(ys), max(xs), max(ys))
        sizes = (width, height, width, height)
        return tuple(_fraction(v, n) for v, n in zip(corners, sizes, strict=True)), list(points)
    clicked = selection.get("points") or ()
    if (
        mode not in ("object", "background")
        or not clicked
        or clicked[-1].get("x") is None
        or clicked[-1].get("y") is None
    ):
        return None
    label = 1 if mode == "object" else -1
    mark = (_fraction(clicked[-1]["x"], width), _fraction(clicked[-1]["y"], height), label)
    return box, [*points, mark]


def _on_select() -> None:
    """A box was dragged or a point clicked on the figure."""
    entry = st.session_state.get(STATE)
    event = st.session_state.get(f"{FIGURE}_{entry['version']}") if entry else None
    if not entry or not entry.get("shape") or not event:
        return
    mode = st.session_state.get(MODE, "box")
    new = from_selection(
        event.get("selection"), entry["shape"], entry["box"], entry["points"], mode
    )
    if new is not None:
        _keep(entry, *new)


def _on_clear() -> None:
    entry = st.session_state.get(STATE)
    if entry is not None:
        entry.update(box=None, points=[], error=None, version=entry.get("version", 0) + 1)


def _on_undo_point() -> None:
    entry = st.session_state.get(STATE)
    if entry is not None and entry["points"]:
        entry.update(points=entry["points"][:-1], error=None, version=entry["version"] + 1)


def figure(image: np.ndarray, box, points, mode: str = "box") -> go.Figure:
    """The photo ``[H, W]`` or ``[H, W, 3]`` in [0, 1] with the prompt drawn on it, and an
    invisible grid of click targets. In "box" mode a drag draws a box; otherwise a click
    selects the nearest grid point (Streamlit turns clicks into selections only when the figure
    leaves the drag mode to it) and the axes are fixed, so a drag does nothing."""
    rgb = pixels.colour_image(image)  # uint8 [H, W, 3]
    height, width = rgb.shape[:2]
    # the photo as a PNG source: plotly.py 6+ sends z as a typed array, which the browser's
    # image trace cannot scale ("t.slice is not a function")
    fig = go.Figure(go.Image(source=pixels.data_uri(rgb), hoverinfo="skip"))
    step = max(1, math.ceil(max(height, width) / GRID))
    rows, cols = np.mgrid[step // 2 : height : step, step // 2 : width : step]
    fig.add_trace(
        go.Scatter(
            x=cols.ravel(),
            y=rows.ravel(),
            mode="markers",
            marker={"size": 10, "color": "rgba(0,0,0,0)"},
            hoverinfo="none",
            showlegend=False,
        )
    )
    if box is not None:
        left, top, right, bottom = box
        fig.add_shape(
            type="rect",
            x0=left * width - 0.5,
            x1=right * width - 0.5,
            y0=top * height - 0.5,
            y1=bottom * height - 0.5,
            line={"color": "rgb(255,215,0)", "width": 3},
        )
    for label, name in ((1, "object"), (-1, "background")):
        marks = [(x, y) for x, y, lab in points if lab == label]
        if marks:
            fig.add_trace(
                go.Scatter(
                    x=[x * width - 0.5 for x, _ in marks],
                    y=[y * height - 0.5 for _, y in marks],
                    mode="markers",
                    name=name,
                    marker={
                        "size": 12,
                        "color": COLOURS[label],
                        "symbol": "circle" if label == 1 else "x",
                        "line": {"color": "white", "width": 1.5},
                    },
                    hoverinfo="skip",
                )
            )
    fixed = mode != "box"
    fig.update_xaxes(visible=False, range=[-0.5, width - 0.5], fixedrange=fixed)
    fig.update_yaxes(visible=False, range=[height - 0.5, -0.5], scaleanchor="x", fixedrange=fixed)
    fig.update_layout(
        height=HEIGHT,
        margin={"l": 0, "r": 0, "t": 0, "b": 0},
        legend={"orientation": "h", "y": -0.02},
        **({"dragmode": "select"} if mode == "box" else {}),
        newselection={"line": {"color": "rgb(255,215,0)"}},
    )
    return fig


def describe(run, entry: dict | None = None) -> str:
    """What the data model is, for the page: the prompt and its refits, or the automatic model
    (and why, when points are waiting for the other class)."""
    data = run.problem.data
    prompt = getattr(data, "prompt", None)
    if prompt is None:
        if entry and _pending(entry["box"], entry["points"]):
            marked = lsbcore.Prompt(points=tuple(entry["points"])).describe()
            missing = "background" if entry["points"][0][2] == 1 else "object"
            return (
                f"Marked: {marked}. Mark a {missing} point too (without a box both classes "
                "are needed); until then the automatic model is used."
            )
        return (
            "No prompt: the automatic model (two colour classes fitted to the whole photo) is "
            "used. Drag a box around the object, or click object and background points."
        )
    text = (
        f"Your prompt: {prompt.describe()}. The object's and the background's colours are "
        "fitted from it (a mixture of up to 5 Gaussians each); outside the box is background. "
        "The sidebar's data model and object choices do not apply while a prompt is in use."
    )
    if data.refits:
        text += (
            f" Refitted {data.refits} time{'s' if data.refits > 1 else ''} from the marginal "
            "(soft GrabCut), each time continuing from the chains' states."
        )
    else:
        text += (
            f" While the run goes on the colours are refitted from its marginal every "
            f"{REFIT_SWEEPS} sweeps (at most {REFITS} times, until a refit leaves the mask as "
            "it was); then the run settles on the last field."
        )
    return text


def render(run, image_id: str | None) -> None:
    """The figure and its controls, for image sources; nothing for paper cases."""
    photo = run.photo
    if photo is None or image_id is None:
        return
    image = photo.rgb if photo.is_colour else photo.luma
    entry = _entry(image_id, image.shape[:2])
    with st.expander("Mark the object: drag a box, or click points", expanded=True):
        left, middle, right = st.columns([3, 2, 2], vertical_alignment="center")
        if MODE not in st.session_state or st.session_state[MODE] not in MODES:
            st.session_state[MODE] = "box"
        mode = left.radio(
            "On the photo",
            MODES,
            format_func=MODE_LABELS.get,
            key=MODE,
            horizontal=True,
            help="drag a box: around the object; everything outside it is background. "
            "click points: each click marks the object or the background there (a small "
            "disc). A box and points can be combined; a new box replaces the old one.",
        )
        middle.button(
            "Undo last point",
            on_click=_on_undo_point,
            disabled=not entry["points"],
            key="prompt_undo",
        )
        right.button(
            "Clear prompt",
            on_click=_on_clear,
            disabled=entry["box"] is None and not entry["points"],
            key="prompt_clear",
        )
        st.plotly_chart(
            figure(image, entry["box"], entry["points"], mode),
            key=f"{FIGURE}_{entry['version']}",
            on_select=_on_select,
            selection_mode=("box", "points"),
            theme=None,  # a photo: Plotly's plain layout, no chart theme
            config={"displaylogo": False, "modeBarButtonsToRemove": ["lasso2d"]},
        )
        if entry.get("error"):
            st.error(f"That prompt was not used: {entry['error']}")
        st.caption(describe(run, entry))
