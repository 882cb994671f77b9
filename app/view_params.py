"""The link parameters of the views that have their own controls (exact chain, tempering,
annealing, importance sampling, block proposals, which g where), one tuple per view.

They live apart from the views so that the link table (``app/view_catalogue.py``) is built without
importing the views: a view module pulls in its own machinery (scipy's sparse solvers, the sweep
store, the experiment reports), seconds of imports a first page that does not open it need not
wait for. Each view reads its tuple from here.
"""

from __future__ import annotations

from app.page_state import BP_COL, BP_K, BP_ROW, BP_WEIGHTS, WG_LAM, WG_PANEL, WG_SIGMA
from app.view_links import ViewParam
from lsbcore import REGISTRY

# the exact chain's windows: label (width x height, as the page writes every size) -> (rows,
# columns)
EXACT_WINDOWS = {"2 x 2": (2, 2), "2 x 3": (3, 2), "3 x 3": (3, 3), "3 x 4": (4, 3)}
# the exact chain's link parameter: the window of the posterior that is enumerated
EXACT_CHAIN = (
    ViewParam("exact_window", "3 x 3", "exact chain window", choices=tuple(EXACT_WINDOWS)),
)

TEMPERING = (
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

ANNEALING = (
    ViewParam("anneal_samplers", "both", "Samplers to anneal", choices=("both", "run", "block")),
    ViewParam("anneal_kind", "geometric", "Schedule", choices=("geometric", "linear")),
    ViewParam("anneal_beta_0", 1.0, "Starting β", 0.01, 10.0),
    ViewParam("anneal_beta_max", 100.0, "Final β", 1.0, 1000.0),
    ViewParam("anneal_stages", 30, "Stages", 2, 200),
    ViewParam("anneal_sweeps", 10, "Sweeps per stage", 1, 100),
    ViewParam("anneal_polish", False, "Greedy polish at the end"),
)

IMPORTANCE = (
    ViewParam("is_proposal", "field", "Importance proposal", choices=("field", "mean field")),
    ViewParam("is_samples", 5000, "Importance samples", 100, 20_000),
    ViewParam("is_side", 3, "Importance window side", 2, 64),
    ViewParam("is_max_side", 32, "Collapse study largest side", 4, 64),
)

BLOCK_WEIGHTS = ("trained", "untrained")  # the block proposals' networks: trained or not
# block size, weights, the chosen tile
BLOCK_PROPOSALS = (
    ViewParam(BP_K.key, BP_K.default, "block size", 2, 4),
    ViewParam(BP_WEIGHTS.key, BP_WEIGHTS.default, "block proposal weights", choices=BLOCK_WEIGHTS),
    ViewParam(BP_ROW.key, BP_ROW.default, "block tile row", 1, 4096),
    ViewParam(BP_COL.key, BP_COL.default, "block tile column", 1, 4096),
)

WHICH_G_WHERE = (  # the map's panel and the chosen point
    ViewParam(WG_PANEL.key, WG_PANEL.default, "which-g-where panel", 1, 1000),
    ViewParam(WG_LAM.key, WG_LAM.default, "which-g-where λ", 0.0, 100.0),
    ViewParam(WG_SIGMA.key, WG_SIGMA.default, "which-g-where σ", 1e-3, 100.0),
)
