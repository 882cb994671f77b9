"""Presentation mode: a page a lecturer can project, fitted to a 1280 x 720 or 1600 x 1000
screen. One header row (title, the run's buttons, the switch), larger type and figures, darker
captions, chain strips across the page, one "what you are seeing" sentence at the top of every
view, and the sidebar collapsed as the mode turns on and expanded as it turns off.

The switch is a view link parameter (``present=1``), so a prepared link opens a lecture as it
is (with ``view=<tab>``, on its view); it changes nothing about the run.
"""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from app import page_state
from app.config import SPEEDS
from app.view_links import ViewParam

KEY = page_state.PRESENT.key  # the switch
PARAM = ViewParam(KEY, False, "presentation mode")  # a link parameter: ``present=1``
FONT = 18  # figure text in presentation mode (the page's default is 13)
HEIGHT_SCALE = 1.25
# A figure's height on the projector at most: under the header, the tabs, the status line and
# the view's sentence, it stays whole on a 720-line screen (taller ones shrink to this).
MAX_HEIGHT = 300
# a view whose controls sit above its figure (Which g where, Block proposals): what is left of a
# 720-line screen below its sentence and controls
BELOW_CONTROLS = 230
# The lecture's speed cap (steps per refresh): the default run's 32,000 steps at five refreshes a
# second take about a minute, the chains visibly changing; "auto" took under two seconds.
PACE = "100"
SPEED_KEY = "speed"  # the speed cap's widget (app/sidebar.py)

# Always: a tab keeps the focus after a click, and a later key press (Space runs, S steps and
# opens Proposal) turns on its focus ring, which then stayed on a tab no longer open. Arrow keys
# select the tab they focus, so keyboard users still see the ring on the tab they are on.
_BASE_STYLE = """
<style>
[data-testid="stTab"][aria-selected="false"] {
  box-shadow: none !important; outline: none !important;
}
/* chain tiles arrive at one pixel per site (app/views/chains.py): blown up crisply, apart */
[class*="st-key-chainrow_"] img { image-rendering: pixelated; }
[class*="st-key-chainrow_"] [data-testid="stImage"] { column-gap: 6px; }
</style>
"""

# Presentation mode: large type (a little smaller on a 720-line projector), a one-row header,
# the tab labels large, the chain strips as wide as the page (tiles at most 30% of the screen's
# height, so the first strip stays above the fold), and the view's sentence.
_STYLE = """
<style>
html { font-size: 19px; }
@media (max-height: 820px) {
  html { font-size: 17px; }
  [data-testid="stMain"] [data-testid="stVerticalBlock"] { gap: 0.4rem !important; }
  [class*="st-key-chainrow_"] [data-testid="stImageContainer"] { max-width: 21vh !important; }
  /* the RBM's digit grid, six samplers' rows, whole under the header */
  [class*="st-key-digitrow_"] img { max-height: 8vh; width: auto !important; }
  [data-testid="stMainBlockContainer"] { padding-top: 3.7rem !important; }
  [data-testid="stHeading"] h1 { font-size: 1.45rem !important; }
  .lsb-seeing { font-size: 1.05rem !important; line-height: 1.3 !important;
    padding: 0.15rem 0 0.15rem 0.7rem !important; margin: 0 !important; }
}
/* the switch's column keeps its label whole (the sidebar opened by hand narrows the page) */
[data-testid="stColumn"]:has(.st-key-present) { min-width: max-content; }
/* Space runs and pauses: its key shown once, on Run, leaves the header's row room for Speed */
.st-key-pause kbd { display: none; }
[data-testid="stMainBlockContainer"] { padding-top: 4rem; padding-bottom: 3rem; }
[data-testid="stMain"] [data-testid="stVerticalBlock"] { gap: 0.6rem; }
[data-testid="stHeading"] h1 { font-size: 1.7rem; padding: 0; }
@media (max-width: 1100px) { [data-testid="stHeading"] h1 { font-size: 1.25rem; } }
[data-testid="stHorizontalBlock"]:has(.st-key-run) { gap: 0.6rem; }
[data-testid="stCaptionContainer"], [data-testid="stCaptionContainer"] p {
  color: inherit !important; font-size: 1.05rem !important; opacity: 0.9;
}
[data-testid="stMarkdownContainer"] p { font-size: 1.1rem; }
[data-testid="stTab"] p { font-size: 1.15rem !important; }
[class*="st-key-chainrow_"] [data-testid="stElementContainer"],
[class*="st-key-chainrow_"] [data-testid="stFullScreenFrame"] > div { width: 100% !important; }
[class*="st-key-chainrow_"] [data-testid="stImage"] { flex: 1 1 auto; flex-wrap: wrap; }
[class*="st-key-chainrow_"] [data-testid="stImageContainer"] { flex: 1 1 150px; max-width: 30vh; }
[class*="st-key-chainrow_"] [data-testid="stImageContainer"] > * { width: 100% !important; }
.lsb-seeing { font-size: 1.25rem; line-height: 1.4; border-left: 6px solid #4E79A7;
  padding: 0.3rem 0 0.3rem 0.9rem; margin: 0 0 0.5rem 0; }
</style>
"""


# Clicks the sidebar's own collapse or expand button if the sidebar is not as wanted; tried for
# a second, as the sidebar may be drawn after this element, and once per change (``turn``), even
# if the element is drawn again. A fixed text: no user input reaches it.
_SIDEBAR_SCRIPT = """<script>
(() => {
  const expand = %s, turn = "%s";
  if (window.lsbSidebarTurn === turn) return;
  window.lsbSidebarTurn = turn;
  const act = (left) => {
    const close = document.querySelector('[data-testid="stSidebarCollapseButton"] button');
    const open = document.querySelector('[data-testid="stExpandSidebarButton"]');
    const expanded = close !== null && close.getAttribute("aria-expanded") === "true";
    if (expanded === expand) return;
    if (expand && open) return open.click();
    if (!expand && close) return close.click();
    if (left > 0) setTimeout(() => act(left - 1), 100);
  };
  act(10);
})();
</script>"""


def is_on() -> bool:
    """Whether presentation mode is on for this session: the switch's own state where it has one
    (its callback has set it before the script runs, so the page follows at once), else the
    saved value (a link's ``present=1``)."""
    if page_state.PRESENT.is_set():
        return bool(page_state.PRESENT.get())
    return bool(page_state.link_value(KEY))


def follow_pace() -> None:
    """The speed as the mode turns: "auto" becomes the lecture's pace when it turns on (or a
    link opens it), and that pace, left as it was, "auto" again when it turns off. Called before
    the speed's widget is drawn."""
    on, was_on = is_on(), bool(page_state.PRESENT_WAS_ON.get())
    speed = st.session_state.get(SPEED_KEY, "auto")
    if on and not was_on and speed == "auto":
        st.session_state[SPEED_KEY] = PACE
    elif was_on and not on and speed == PACE:
        st.session_state[SPEED_KEY] = "auto"


def speed_control() -> None:
    """The speed cap in the lecture's header (the sidebar is collapsed): one compact menu."""
    st.selectbox(
        "Speed (steps per refresh)",
        SPEEDS,
        key=SPEED_KEY,
        width=150,
        format_func=lambda v: f"Speed: {v}",
        label_visibility="collapsed",
        help="Steps per refresh (five refreshes a second); auto: as many as fit.",
    )


def switch() -> bool:
    """The toggle, on the page itself (the sidebar is collapsed in presentation mode)."""
    page_state.restore_links((KEY,))
    on = st.toggle(
        "Presentation mode",
        key=KEY,
        help="Large type and figures for a projector, the sidebar collapsed, a sentence per "
        "view. Keys: Space runs or pauses, S takes one step.",
    )
    page_state.remember_links((KEY,), publish=False)
    return bool(on)


def apply() -> None:
    """Page-wide effects of the mode: the style, and the sidebar collapsed when the mode is
    turned on (or opens from a link) and expanded when it is turned off, in the same rerun."""
    on = is_on()
    was_on = page_state.PRESENT_WAS_ON.get()
    # a fresh page takes this state: "auto" (collapsed on a phone) until the mode has been on
    ever_on = bool(page_state.PRESENT_TURNS.get())
    st.set_page_config(
        initial_sidebar_state="collapsed" if on else "expanded" if ever_on else "auto"
    )
    st.html(_BASE_STYLE + (_STYLE if on else ""))
    if on != bool(was_on):
        # The page keeps a sidebar the user opened or closed by hand over the state above, so
        # the change is also made as the user would make it (once, only when it differs).
        turn = page_state.PRESENT_TURNS.set(page_state.PRESENT_TURNS.get() + 1)
        script = _SIDEBAR_SCRIPT % ("false" if on else "true", turn)
        st.sidebar.html(script, unsafe_allow_javascript=True)
    page_state.PRESENT_WAS_ON.set(on)


def seeing(sentence: str) -> None:
    """A view's sentence (its record's ``seeing``, ``app/view_record.py``), in presentation
    mode only."""
    if is_on() and sentence:
        text = sentence.replace("&", "&amp;").replace("<", "&lt;")
        st.html(f'<div class="lsb-seeing"><b>What you are seeing.</b> {text}</div>')


def figure(fig: go.Figure, max_height: int = MAX_HEIGHT) -> go.Figure:
    """``fig`` for the projector: larger text and a taller frame, at most ``max_height`` pixels
    tall (a copy; cached figures stay as they are)."""
    if not is_on():
        return fig
    big = go.Figure(fig)
    height = big.layout.height or 450
    scale = min(HEIGHT_SCALE, max_height / height)
    big.update_layout(font={"size": FONT}, height=int(height * scale))
    if big.layout.width:  # a figure of fixed width (a cell of a wrapping row) scales alike
        big.update_layout(width=int(big.layout.width * scale))
    if big.layout.title.text:
        big.update_layout(title_font_size=FONT + 4)
    big.update_annotations(font_size=FONT)  # panel titles and notes drawn as annotations
    legend = big.layout.legend
    if legend.orientation == "h" and legend.y is not None and legend.y < 0:
        # a legend under the plot sits at the figure's foot, and Plotly makes room for it above:
        # placed a fraction of a shorter plot below, it ran into the x-axis title
        big.update_layout(legend={"yref": "container", "y": 0, "yanchor": "bottom"})
    return big
