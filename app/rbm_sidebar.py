"""The sidebar's RBM part: which model, and which of the RBM comparison's samplers.

The model is a shipped one (digits 8 x 8 or 16 x 16, loaded once per server) or the user's own,
trained in this session (``app/rbm_training.py``). The samplers are the variant labels of
``lsbcore.rbm.variants`` (a registry sampler with its options: ``gibbs-2`` is block Gibbs on
blocks of 2 sites).
"""

from __future__ import annotations

import streamlit as st

from app import rbm_targets, rbm_training
from app.page_state import TARGET, ensure

# the RBM comparison's samplers that learn during burn-in
LEARNERS = "LSB 1, LSB 2, FLSB 1, FLSB 2"


@st.cache_resource(show_spinner=False)
def shipped_model(target: str):
    """A shipped RBM, read once per server (the same object serves every session)."""
    return rbm_targets.load_shipped(target)


def model(sb, inputs) -> None:
    """Describe the chosen RBM and put it (and what identifies it) in ``inputs``."""
    target = TARGET.get()
    sb.header("The model")
    if target in rbm_targets.SHIPPED:
        try:
            rbm = shipped_model(target)
        except ValueError as err:
            sb.error(f"The shipped model cannot be read: {err}")
            return
        sb.caption(rbm_targets.model_description(target))
        inputs.rbm, inputs.image_id = rbm, f"rbm:{target}"
        return
    trained = rbm_training.sidebar(sb)
    if trained is not None:
        inputs.rbm, inputs.image_id = trained


def _label(label: str) -> str:
    from lsbcore.rbm.variants import display_name

    return display_name(label)


def samplers(sb) -> None:
    """The multiselect of the RBM comparison's samplers."""
    offered = rbm_targets.labels()
    ensure(
        "samplers",
        list(rbm_targets.DEFAULT_SAMPLERS),
        lambda v: isinstance(v, list) and all(n in offered for n in v),
    )
    sb.multiselect(
        "Samplers to compare",
        offered,
        format_func=_label,
        key="samplers",
        help="\n".join(f"- **{n}**: {rbm_targets.describe(n)}" for n in offered)
        + "\n\nThe learned ones learn during burn-in; all start from one shared random state.",
    )
