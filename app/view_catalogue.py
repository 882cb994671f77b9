"""Every view of the dashboard, one record each, on the page of its kind of target.

The Ising page's tabs and their groups, the RBM and network pages' tabs, the links' ``view``,
``rbm_view`` and ``network_view`` parameters and each view's own link parameters, and
presentation mode's sentence per view are all read from the records here (``app/view_record.py``
says what a record holds). A new view is one record on its page.

A record names its view's module, which is imported when the view is first drawn (``_later``):
the first page waits only for the views it opens. The views' own link parameters are in
``app/view_params.py``, so that the link table is built without them. Nothing below the page (a
view, the link table, presentation mode) imports this module at import time.
"""

from __future__ import annotations

from importlib import import_module

from app import network_run, presentation, view_links, view_params
from app.target_kind import TargetKind
from app.view_links import VIEW, ViewParam
from app.view_record import Draw, Page, View

# The Ising page's groups: each group's tab strip fits 1280 px in presentation mode, where one
# strip of all sixteen would be cut.
LSB, BEYOND, RESULTS = "LSB views", "Beyond LSB", "Results"

PROPOSAL = "Proposal"  # the tab the Step button opens (a slow-motion step shows there)

# presentation mode's sentences of the views that two pages share
BALANCING_SEEING = (
    "The curves g(t) that turn a flip's probability ratio t into a proposal weight; LSB learns "
    "its own curve during burn-in."
)
WEIGHTS_SEEING = (
    "LSB 1's mixture of the four fixed functions: how much of each it uses, and how that share "
    "changes while it learns."
)
EXPORT_SEEING = (
    "Everything to keep: the results, the data behind the charts, the learned functions and a "
    "link that reopens this page."
)
BLOCKS_SEEING = (
    "A network trained once on random blocks proposes a whole k x k block of the grid at once: "
    "its guess beside the exact answer for the block, and how close it comes over every block."
)


def _later(module: str, name: str) -> Draw:
    """The function ``name`` of the view module ``app.views.<module>``, imported on its first
    draw: a view's module brings its own machinery (scipy's sparse solvers, the sweep store, the
    experiment reports, plotly figures, ...), seconds of imports that a first page which does not
    open the view need not wait for."""

    def draw(run) -> None:
        getattr(import_module(f"app.views.{module}"), name)(run)

    draw.__qualname__ = f"{module}.{name}"
    return draw


def _explained(draw: Draw) -> Draw:
    """``draw``, then the "why" panel (what each balancing function's shape does) under it."""
    why = _later("why", "render")

    def with_why(run) -> None:
        draw(run)
        why(run)

    return with_why


ISING = Page(
    TargetKind.ISING,
    VIEW,
    "view",
    (
        View(
            "Chains",
            _later("chains", "render"),
            "Each strip is one chain's current segmentation; every sampler starts from the "
            "same noisy states and flips sites until the picture settles.",
            LSB,
            controls=_later("chains", "controls"),
        ),
        View(
            PROPOSAL,
            _explained(_later("proposal", "render")),
            "Where each sampler wants to flip next: bright sites are likely proposals. "
            "Informed samplers look at the object's edge; max(1,t) looks almost everywhere.",
            LSB,
        ),
        View(
            "Balancing functions", _explained(_later("balancing", "render")), BALANCING_SEEING, LSB
        ),
        View("Softmax weights", _later("weights", "render"), WEIGHTS_SEEING, LSB),
        View(
            "Convergence",
            _later("convergence", "render"),
            "How far each sampler's chains are from agreement: the log-probability and the "
            "magnetisation of every chain against steps.",
            LSB,
        ),
        View(
            "Mixing",
            _later("mixing", "render"),
            "How fast the chains forget where they were: the autocorrelation against the lag "
            "and the effective sample size per sampler (higher is better).",
            LSB,
        ),
        View(
            "Segmentation",
            _later("segmentation", "render"),
            "The posterior's answer: each pixel's probability of being object, and where the "
            "chains still disagree.",
            LSB,
        ),
        View(
            "Exact chain",
            _later("exact_chain", "render_run"),
            "No sampling noise: every state of a tiny window is enumerated and each sampler's "
            "exact distance to the target drawn against steps.",
            BEYOND,
            params=view_params.EXACT_CHAIN,
        ),
        View(
            "Tempering",
            _later("tempering", "render_run"),
            "Where every local sampler fails, and the remedy: one chain stuck in one of two "
            "equally likely pictures, against a ladder of hotter copies that swap states and "
            "carry the cold chain across.",
            BEYOND,
            params=view_params.TEMPERING,
        ),
        View(
            "MAP (annealing)",
            _later("annealing", "render_run"),
            "Cooling the posterior towards its single likeliest segmentation: each sampler's "
            "energy falls as the temperature drops, against the exact optimum from a minimum "
            "cut.",
            BEYOND,
            params=view_params.ANNEALING,
        ),
        View(
            "Importance sampling",
            _later("importance", "render_run"),
            "No chain at all: independent draws from a one-coin-per-site guess, each weighted "
            "by how much likelier the posterior finds it; as the lattice grows, one draw ends "
            "up carrying all the weight.",
            BEYOND,
            params=view_params.IMPORTANCE,
        ),
        View(
            "Block proposals",
            _later("block_proposals", "render_live"),
            BLOCKS_SEEING,
            BEYOND,
            # a state taken once: nothing live to redraw
            controls=_later("block_proposals", "render_run"),
            params=view_params.BLOCK_PROPOSALS,
        ),
        View(
            "Flow",
            _later("flow", "render"),
            "A flow trained on this posterior while you watch: its lower bound on log Z "
            "climbing step by step, and its draws gathering into the posterior's modes, "
            "coloured by magnetisation. The flow samplers run on it once it is trained.",
            BEYOND,
        ),
        View(
            "Export",
            _later("export", "render"),
            EXPORT_SEEING,
            RESULTS,
        ),
        View(
            "Compare",
            _later("compare", "render"),
            "Pinned runs side by side: what differs in their settings, and how that changes the "
            "mixing and the learned balancing functions.",
            RESULTS,
        ),
        View(
            "Which g where",
            _later("which_g_where", "render_live"),
            "A sweep's verdict: for each coupling and noise level, the balancing function that "
            "mixes best per target evaluation, and where the seeds cannot tell two apart; click "
            "a point to open it live.",
            RESULTS,
            controls=_later("which_g_where", "render"),  # a sweep's map: nothing of the run in it
            params=view_params.WHICH_G_WHERE,
        ),
    ),
)

# An RBM has no image to segment and no lattice: the views about the Ising posterior are not
# offered (one sentence says so).
RBM = Page(
    TargetKind.RBM,
    "rbm_view",
    "RBM view",
    (
        View(
            "Digits",
            _later("digits", "render"),
            "Each row is one sampler's chains drawn as images, now: all started from the same "
            "random noise, and a sampler that mixes well draws recognisable handwritten digits.",
        ),
        View(
            "MMD",
            _later("rbm_mmd", "render"),
            "How far each sampler's chains are from exact samples of the model, against the "
            "target evaluations spent; the dashed line is where exact sampling itself would "
            "sit.",
        ),
        View("Balancing functions", _later("rbm_balancing", "render"), BALANCING_SEEING),
        View("Softmax weights", _later("weights", "render"), WEIGHTS_SEEING),
        View(
            "Acceptance and hops",
            _later("rbm_moves", "render"),
            "How often each sampler's proposals are accepted, and how many pixels a chain "
            "changes per step.",
        ),
        View("Export", _later("rbm_export", "render"), EXPORT_SEEING),
        View(
            "Pinned runs",
            _later("rbm_pins", "render"),
            "The MMD curves of earlier runs of this model, pinned, under this run's: which "
            "settings reach the exact samples' level sooner.",
        ),
    ),
    not_offered="The segmentation, posterior, proposal-map, exact-chain, tempering, annealing "
    "and importance-sampling views are about the Ising posterior of an image, so an RBM run "
    "does not offer them.",
)

# A network has no image and no lattice of pixels: the views about the Ising posterior of an
# image are not offered (one sentence says so).
NETWORK = Page(
    TargetKind.NETWORK,
    "network_view",
    "network view",
    (
        View(
            "Network",
            _later("network_graph", "render"),
            "The network's variables, joined where they share a factor, each coloured by how "
            "often one sampler's chains have it at +1: near-deterministic factors lock "
            "neighbours together, and a sampler that mixes well keeps crossing between the "
            "locked patterns.",
            offered=network_run.draws_a_network,
        ),
        View(
            "Inclusion",
            _later("inclusion", "render"),
            "How often each sampler's chains put each feature in the regression model: the truly "
            "informative features should stand out near 1, the others stay low.",
            offered=network_run.is_selection_run,
        ),
        View(
            "Trace",
            _later("convergence", "render_by_evaluations"),
            "Each sampler's log-probability and magnetisation against the target evaluations "
            "it spent: chains that are stuck show as flat lines.",
        ),
        View(
            "ESS",
            _later("network_ess", "render"),
            "Effective draws per window of each sampler, the paper's Table 3 measure: higher is "
            "better, and the bars show the spread over chains.",
        ),
        View(
            "Balancing functions",
            _later("network_balancing", "render"),
            BALANCING_SEEING,
            offered=network_run.draws_a_network,
        ),
        View("Softmax weights", _later("weights", "render"), WEIGHTS_SEEING),
        View(
            "Block proposals",
            _later("block_proposals", "render_network"),
            BLOCKS_SEEING,
            params=view_params.BLOCK_PROPOSALS,
            offered=network_run.draws_a_network,
        ),
        View(
            "Export",
            _later("export", "render"),
            EXPORT_SEEING,
        ),
        View(
            "Pinned runs",
            _later("network_pins", "render"),
            "The ESS of earlier runs of this network, pinned, beside this run's: which "
            "settings (ε, chains, learning, samplers) mix the near-deterministic factors best.",
        ),
    ),
    not_offered="The segmentation, pixels, proposal-map, exact-chain, tempering, annealing and "
    "importance-sampling views are about the Ising posterior of an image, so a network run "
    "does not offer them.",
    left_out="they draw a Markov network's factors, which variable selection does not have.",
)

PAGES = {page.kind: page for page in (ISING, RBM, NETWORK)}


def link_params() -> dict[str, ViewParam]:
    """Every link parameter of the views by key: each page's open tab, presentation mode, then
    each view's own (a view on two pages brings the same parameters)."""
    table: dict[str, ViewParam] = {}
    pages = tuple(PAGES.values())
    params = [*(page.link_param() for page in pages), presentation.PARAM]
    params += [param for page in pages for view in page.views for param in view.params]
    for param in params:
        if table.get(param.key, param) != param:
            raise ValueError(f"two link parameters are called {param.key!r}.")
        table[param.key] = param
    return table


# the link table the lower modules read (app/view_links.py), handed down once
view_links.register(link_params())
