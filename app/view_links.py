"""Link parameters of the views that have their own controls (tempering, annealing, importance
sampling): one table of them, parsed and validated like the sidebar's, kept across reruns.

A view's widget uses its parameter's ``key`` as its Session State key. Streamlit drops a widget's
state in a run where the widget is not drawn (a closed tab), so the values also live in a plain
dict under ``SAVED`` that nothing drops: ``restore`` puts them back before the widgets are drawn,
``remember`` saves them after. Links carry only values that differ from the defaults.

No Streamlit import: ``state`` is any mutable mapping (``st.session_state`` in the app).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

from app import link_values
from app.text import quote
from lsbcore.samplers.registry import REGISTRY

SAVED = "_view_links"


@dataclass(frozen=True)
class ViewParam:
    """A number in ``[low, high]`` (whole when ``default`` is an int), or one of ``choices``."""

    key: str
    default: object
    label: str
    low: float | None = None
    high: float | None = None
    choices: tuple = ()

    def parse(self, raw, warnings: list[str]):
        """``raw`` (a link's text or a widget's value) as a valid value, or the default with a
        sentence in ``warnings``."""
        if isinstance(raw, (list, tuple)):
            raw = raw[-1] if raw else None
        if self.choices:
            text = str(raw).strip()
            if text in self.choices:
                return text
            warnings.append(
                f"{self.label}: {quote(raw)} is not one of {', '.join(self.choices)}; "
                "using the default."
            )
            return self.default
        if isinstance(self.default, bool):
            value = link_values.truth(raw)
            if value is None:
                warnings.append(f"{self.label}: {quote(raw)} is not true/false; using the default.")
                return self.default
            return value
        whole = isinstance(self.default, int)
        value = link_values.number(raw, self.label, self.low, self.high, whole, warnings)
        return self.default if value is None else value

    def text(self, value) -> str:
        if isinstance(value, bool):
            return "1" if value else "0"
        if isinstance(value, float):
            return repr(value)
        return str(value)


PARAMS: dict[str, ViewParam] = {}


def register(*params: ViewParam) -> None:
    for param in params:
        if param.key in PARAMS:
            raise ValueError(f"a view parameter called {param.key!r} is registered already.")
        PARAMS[param.key] = param


def is_view_key(key: str) -> bool:
    return key in PARAMS


def from_query_params(params: Mapping) -> tuple[dict, list[str]]:
    """The view values a link carries (validated; others at their defaults) and warnings."""
    warnings: list[str] = []
    values = {key: param.default for key, param in PARAMS.items()}
    for key, raw in params.items():
        if key in PARAMS:
            values[key] = PARAMS[key].parse(raw, warnings)
    return values, warnings


def init(state: MutableMapping, values: Mapping) -> None:
    """Start a session's view values (from ``from_query_params``)."""
    state[SAVED] = dict(values)


def _saved(state: MutableMapping) -> dict:
    if SAVED not in state:
        state[SAVED] = {key: param.default for key, param in PARAMS.items()}
    return state[SAVED]


def restore(state: MutableMapping, keys) -> None:
    """Give the widgets of ``keys`` their saved values where Streamlit dropped them."""
    saved = _saved(state)
    for key in keys:
        if key not in state:
            state[key] = saved.get(key, PARAMS[key].default)


def remember(state: MutableMapping, keys) -> dict:
    """Save the widgets' current values (validated again: a widget bounds them already) and
    return them."""
    saved = _saved(state)
    for key in keys:
        saved[key] = PARAMS[key].parse(state.get(key, saved.get(key)), [])
    return {key: saved[key] for key in keys}


def value(state: MutableMapping, key: str):
    """The saved value of ``key``."""
    return _saved(state).get(key, PARAMS[key].default)


def to_query_params(state: MutableMapping) -> dict[str, str]:
    """The view values that differ from their defaults, as link text."""
    saved = _saved(state)
    return {
        key: param.text(saved[key])
        for key, param in PARAMS.items()
        if key in saved and saved[key] != param.default
    }


def publish(query_params: MutableMapping, state: MutableMapping) -> None:
    """Bring the page's link up to date with the saved view values (a view redrawn inside a
    fragment does not rerun the script that writes the whole link)."""
    wanted = to_query_params(state)
    for key in PARAMS:
        current = query_params.get(key)
        if key in wanted and current != wanted[key]:
            query_params[key] = wanted[key]
        elif key not in wanted and key in query_params:
            del query_params[key]


# ----------------------------------------------------------------------------- the parameters
# One section per view; a view's widgets use these keys. Keys carry the view's prefix.

# The open view (a tab), in three groups: each group's tab strip fits 1280 px in presentation
# mode, where one strip of all thirteen would be cut. A link's ``view=Mixing`` opens that tab.
VIEW = "view"
VIEW_GROUPS = {
    "LSB views": (
        "Chains",
        "Proposal",
        "Balancing functions",
        "Softmax weights",
        "Convergence",
        "Mixing",
        "Segmentation",
    ),
    "Beyond LSB": (
        "Exact chain",
        "Tempering",
        "MAP (annealing)",
        "Importance sampling",
        "Block proposals",
        "Flow",
    ),
    "Results": ("Export", "Compare", "Which g where"),
}
VIEW_NAMES = tuple(name for names in VIEW_GROUPS.values() for name in names)


def group_of(view: str) -> str:
    """The group that holds ``view`` (the first group for an unknown name)."""
    return next((g for g, names in VIEW_GROUPS.items() if view in names), next(iter(VIEW_GROUPS)))


register(ViewParam(VIEW, VIEW_NAMES[0], "view", choices=VIEW_NAMES))

# The open view of an RBM run (app/rbm_panel.py draws these tabs): ``rbm_view=MMD``
RBM_VIEW = "rbm_view"
RBM_VIEW_NAMES = (
    "Digits",
    "MMD",
    "Balancing functions",
    "Softmax weights",
    "Acceptance and hops",
    "Pinned runs",
)
register(ViewParam(RBM_VIEW, RBM_VIEW_NAMES[0], "RBM view", choices=RBM_VIEW_NAMES))

# The open view of a Markov-network run (app/network_panel.py): ``network_view=ESS``
NETWORK_VIEW = "network_view"
NETWORK_VIEW_NAMES = (
    "Network",
    "Trace",
    "ESS",
    "Balancing functions",
    "Softmax weights",
    "Block proposals",
)
register(ViewParam(NETWORK_VIEW, NETWORK_VIEW_NAMES[0], "network view", choices=NETWORK_VIEW_NAMES))

# the Exact chain tab: the window of the posterior that is enumerated
register(
    ViewParam(
        "exact_window", "3 x 3", "exact chain window", choices=("2 x 2", "2 x 3", "3 x 3", "3 x 4")
    )
)
# the Block proposals tab (app/views/block_proposals.py): block size, weights, the chosen tile
register(
    ViewParam("bp_k", 2, "block size", 2, 4),
    ViewParam("bp_weights", "trained", "block proposal weights", choices=("trained", "untrained")),
    ViewParam("bp_row", 1, "block tile row", 1, 4096),
    ViewParam("bp_col", 1, "block tile column", 1, 4096),
)
# the Which g where tab (app/views/which_g_where.py): the map's panel and the chosen point
register(
    ViewParam("wg_panel", 1, "which-g-where panel", 1, 1000),
    ViewParam("wg_lam", 0.0, "which-g-where λ", 0.0, 100.0),
    ViewParam("wg_sigma", 1.0, "which-g-where σ", 1e-3, 100.0),
)
# presentation mode (app/presentation.py): large type, collapsed sidebar, a sentence per view
register(ViewParam("present", False, "presentation mode"))

# --------- importance sampling (app/views/importance.py)
register(
    ViewParam("is_proposal", "field", "Importance proposal", choices=("field", "mean field")),
    ViewParam("is_samples", 5000, "Importance samples", 100, 20_000),
    ViewParam("is_side", 3, "Importance window side", 2, 64),
    ViewParam("is_max_side", 32, "Collapse study largest side", 4, 64),
)

# MAP (annealing): app/views/annealing.py
register(
    ViewParam("anneal_samplers", "both", "Samplers to anneal", choices=("both", "run", "block")),
    ViewParam("anneal_kind", "geometric", "Schedule", choices=("geometric", "linear")),
    ViewParam("anneal_beta_0", 1.0, "Starting β", 0.01, 10.0),
    ViewParam("anneal_beta_max", 100.0, "Final β", 1.0, 1000.0),
    ViewParam("anneal_stages", 30, "Stages", 2, 200),
    ViewParam("anneal_sweeps", 10, "Sweeps per stage", 1, 100),
    ViewParam("anneal_polish", False, "Greedy polish at the end"),
)

# Tempering (app/views/tempering.py)
register(
    ViewParam(
        "pt_sampler",
        "checkerboard",
        "Tempering sampler",
        # not the imported function, nor a flow (trained on one posterior, not on each replica's)
        choices=tuple(
            n
            for n, spec in REGISTRY.items()
            if spec.app and not spec.needs_balancing and not spec.takes_flow
        ),
    ),
    ViewParam("pt_replicas", 8, "Tempering replicas", 2, 16),
    ViewParam("pt_beta_min", 0.3, "Tempering beta_min", 0.05, 0.95),
    ViewParam("pt_adapt", True, "Tempering adapt ladder"),
    ViewParam("pt_sweeps", 1000, "Tempering sweeps", 100, 5000),
    ViewParam("pt_posterior", "preset", "Tempering posterior", choices=("preset", "run")),
)  # fmt: skip
