"""What the app knows about a view and a page, in one record each.

A ``View`` is a tab: its label (also its value in the page's link parameter), what draws it,
what draws its own controls once per page run above the live part, the sentence presentation
mode shows above it, its own link parameters, and on the Ising page its group of tabs. A
``Page`` is the views of one kind of target (the Ising, RBM and network pages) and the link
parameter that names its open tab. The pages themselves are in ``app/view_catalogue.py``; the
tabs (``app/live.py``, ``app/panel_tabs.py``), the links (``app/view_links.py``) and
presentation mode (``app/presentation.py``) are built from them.

No Streamlit here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.target_kind import TargetKind
from app.view_links import ViewParam

Draw = Callable[[object], None]  # draws a view of a run (``app.state.Run``)


@dataclass(frozen=True)
class View:
    """One tab of a page."""

    label: str  # the tab's label, and the page's link parameter's value (``view=Mixing``)
    draw: Draw  # the view; on the Ising page inside the live fragment (5 redraws a second)
    seeing: str  # presentation mode's "what you are seeing" sentence, in words a room follows
    group: str = ""  # the Ising page's group of tabs ("LSB views", ...); "" on other pages
    # the view's own widgets that need not follow the run, drawn once per page run above the
    # live fragment (issue 29: widgets re-sent five times a second cost the browsers more than
    # the images beside them)
    controls: Draw | None = None
    params: tuple[ViewParam, ...] = ()  # its own link parameters (share links)
    # whether a run's target has what the view draws (None: every run of its page); a page's
    # run of another target (variable selection on the network page) leaves it out
    offered: Callable[[object], bool] | None = None

    def offers(self, run) -> bool:
        return self.offered is None or bool(self.offered(run))


@dataclass(frozen=True)
class Page:
    """The views of one kind of target, in tab order, and the link parameter (``link``, a
    ``ViewParam`` key) that names the open one."""

    kind: TargetKind
    link: str  # "view", "rbm_view", "network_view"
    link_label: str  # what a link's warning calls it ("view", "RBM view", ...)
    views: tuple[View, ...]
    not_offered: str = ""  # the sentence under the tabs: the views this page does not offer
    left_out: str = ""  # why a view a run's target does not offer (``View.offered``) is left out

    def __post_init__(self):
        labels = self.labels
        if len(set(labels)) != len(labels):
            raise ValueError(f"the {self.kind} page names a view twice: {labels}")
        if any(bool(v.group) != bool(self.views[0].group) for v in self.views):
            raise ValueError(f"the {self.kind} page's views are grouped all or none")

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(v.label for v in self.views)

    def view(self, label: str) -> View:
        """The view called ``label`` (a ``KeyError`` when the page has none)."""
        for view in self.views:
            if view.label == label:
                return view
        raise KeyError(label)

    @property
    def groups(self) -> dict[str, tuple[View, ...]]:
        """The views by group, the groups in the order of their first view (empty when the
        page's views are not grouped)."""
        groups: dict[str, list[View]] = {}
        for view in self.views:
            if view.group:
                groups.setdefault(view.group, []).append(view)
        return {group: tuple(views) for group, views in groups.items()}

    def group_of(self, label: str) -> str:
        """The group that holds the view ``label`` (the first group for an unknown one)."""
        groups = self.groups
        first = next(iter(groups), "")
        return next((g for g, vs in groups.items() if any(v.label == label for v in vs)), first)

    def link_param(self) -> ViewParam:
        """The link parameter that names the open tab (the first tab by default)."""
        return ViewParam(self.link, self.labels[0], self.link_label, choices=self.labels)
