"""Link parameters of the views: the open tab of each page, and the parameters of the views that
have their own controls (tempering, annealing, importance sampling, ...): one table of them,
parsed and validated like the sidebar's, kept across reruns. The table is the view records'
(``app/view_catalogue.py``: each view's ``params``, each page's open tab, presentation mode).

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

SAVED = "_view_links"
VIEW = "view"  # the Ising page's open view (a link's ``view=Mixing`` opens that tab)


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


# Every link parameter of the views by key. The view records (``app/view_catalogue.py``) import
# the views, which use this module, so the catalogue hands its table down when it is imported
# (``register``) rather than this module reaching up for it.
PARAMS: dict[str, ViewParam] = {}


def register(params: Mapping[str, ViewParam]) -> None:
    """Take the views' link parameters (``view_catalogue.link_params()``)."""
    PARAMS.clear()
    PARAMS.update(params)


def all_params() -> dict[str, ViewParam]:
    """Every link parameter of the views by key (``app/view_catalogue.py``'s records)."""
    if not PARAMS:
        raise RuntimeError("no view link parameters: import app.view_catalogue first.")
    return PARAMS


def is_view_key(key: str) -> bool:
    return key in all_params()


def from_query_params(params: Mapping) -> tuple[dict, list[str]]:
    """The view values a link carries (validated; others at their defaults) and warnings."""
    warnings: list[str] = []
    table = all_params()
    values = {key: param.default for key, param in table.items()}
    for key, raw in params.items():
        if key in table:
            values[key] = table[key].parse(raw, warnings)
    return values, warnings


def init(state: MutableMapping, values: Mapping) -> None:
    """Start a session's view values (from ``from_query_params``)."""
    state[SAVED] = dict(values)


def _saved(state: MutableMapping) -> dict:
    if SAVED not in state:
        state[SAVED] = {key: param.default for key, param in all_params().items()}
    return state[SAVED]


def restore(state: MutableMapping, keys) -> None:
    """Give the widgets of ``keys`` their saved values where Streamlit dropped them, and write
    the others again: a run stopped for a rerun keeps the value of a widget it did not draw
    while the browser dropped the widget, which would come back at its default unless its
    value is written in the run that draws it (``page_state.state_again``)."""
    saved = _saved(state)
    for key in keys:
        state[key] = state[key] if key in state else saved.get(key, all_params()[key].default)


def remember(state: MutableMapping, keys) -> dict:
    """Save the widgets' current values (validated again: a widget bounds them already) and
    return them."""
    saved = _saved(state)
    for key in keys:
        saved[key] = all_params()[key].parse(state.get(key, saved.get(key)), [])
    return {key: saved[key] for key in keys}


def value(state: MutableMapping, key: str):
    """The saved value of ``key``."""
    return _saved(state).get(key, all_params()[key].default)


def to_query_params(state: MutableMapping) -> dict[str, str]:
    """The view values that differ from their defaults, as link text."""
    saved = _saved(state)
    return {
        key: param.text(saved[key])
        for key, param in all_params().items()
        if key in saved and saved[key] != param.default
    }


def publish(query_params: MutableMapping, state: MutableMapping) -> None:
    """Bring the page's link up to date with the saved view values (a view redrawn inside a
    fragment does not rerun the script that writes the whole link)."""
    wanted = to_query_params(state)
    for key in all_params():
        current = query_params.get(key)
        if key in wanted and current != wanted[key]:
            query_params[key] = wanted[key]
        elif key not in wanted and key in query_params:
            del query_params[key]
