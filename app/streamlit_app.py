"""LSB Explorer: locally balanced MCMC on the Ising segmentation posterior, live.

Run with ``streamlit run app/streamlit_app.py``. The page reads top to bottom like this script:
sidebar inputs, the posterior, the controls, then the live views.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `streamlit run` puts app/ on the path, not the project root
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402
import torch  # noqa: E402

from app import (  # noqa: E402
    config,
    late_imports,
    live,
    page_state,
    pin_controls,
    presentation,
    prompt,
    rbm_targets,
    reload,
    selection_target,
    session,
    sidebar,
    sources,
    state,
)
from app.target_kind import TargetKind, kind_of  # noqa: E402
from app.text import plain, quote  # noqa: E402
from app.views import about, posterior  # noqa: E402

log = logging.getLogger("app")

st.set_page_config(page_title="LSB Explorer", layout="wide")
# One step touches a few hundred numbers: intra-op threads only add hand-offs, and on a busy
# machine (or with several sessions) they oversubscribe the cores and slow sampling a hundredfold.
torch.set_num_threads(1)


@st.cache_resource
def compiled_kernels():
    """Compile the CPU kernels (or load them from numba's cache) once per server, in the
    background: runs take the torch steps until they are ready (same chains either way)."""
    from lsbcore.samplers import warmup

    return warmup.compile_in_background()


def main() -> None:
    page_state.count_page_run()
    samples = sources.sample_names()
    link_warnings = sidebar.init_from_link(samples)
    resumed = reload.resume()  # a reloaded page: its run, where the server still holds it
    presentation.follow_pace()  # a lecture runs at a pace a room can watch
    present = presentation.is_on()
    inputs = sidebar.render(samples, speed_here=not present)
    presentation.apply()

    if present:  # a lecture: one compact row of title, run controls and speed, and switch
        title, controls, switch = st.columns([1.8, 7, 2.6], vertical_alignment="center")
    else:
        (title, switch), controls = st.columns([3, 2], vertical_alignment="bottom"), None
    title.title("LSB Explorer")
    with switch:
        presentation.switch()
    kind = kind_of(inputs.config.target)
    rbm, network = kind is TargetKind.RBM, kind is TargetKind.NETWORK
    if not present:
        st.caption(
            "Locally balanced samplers, fixed and learned (LSB, Sansone 2022), "
            + (
                "sampling which features a linear regression needs (Bayesian variable "
                "selection, the flow paper's Table 3, on synthetic data). "
                if inputs.config.target == selection_target.TARGET
                else {
                    TargetKind.RBM: "sampling a restricted Boltzmann machine (the paper's "
                    "handwritten digits, or your own data). ",
                    TargetKind.NETWORK: "sampling a Markov network with near-deterministic "
                    "factors (the paper's Table 3: MN 1 and MN 2 as generated here, or your own "
                    "UAI file). ",
                }.get(kind, "segmenting an image under an Ising prior. ")
            )
            + "Configure in the sidebar, press Run (or Space), watch the tabs."
        )
        about.render()
    for warning in link_warnings:
        st.warning(f"Link: {warning}")
    for sentence in resumed:
        st.info(sentence)

    cfg, notes = config.cap_workload(inputs.config)
    for note in notes:
        st.info(note)
    if not cfg.samplers:
        st.info("Select at least one sampler in the sidebar.")
        return
    if rbm and inputs.rbm is None:
        st.info("Upload binary data and train a model in the sidebar (or pick a digits RBM).")
        old = page_state.RUN.get()
        if old is not None:  # no model yet: the previous target's run does not sample on
            state.pause(old, wait=False)
        return
    if network and inputs.network is None:
        st.info(
            "Upload a UAI model file (.uai) in the sidebar, or pick MN 1 or MN 2. The previous "
            "run is kept as it was, paused: choose its target again to go on with it."
        )
        old = page_state.RUN.get()
        if old is not None:
            state.pause(old, wait=False)
        return
    if kind is TargetKind.ISING and cfg.source != "paper" and inputs.image is None:
        st.info("Upload an image in the sidebar (or choose a paper case or a sample image).")
        return
    run = session.ensure_run(cfg, inputs)
    if run is None:
        return
    st.query_params.from_dict(
        {
            **config.to_query_params(cfg),
            **page_state.link_query_params(),
            **pin_controls.link_params(),
            **reload.hold(run),
        }
    )

    session.pending_step(run)
    if rbm or network:  # no posterior image and no prompt: the controls, then the target's views
        with controls if controls is not None else st.container():
            if controls is None:
                label = rbm_targets.TARGET_LABELS[cfg.target]
                if cfg.target == "uai":
                    label = f"Markov network {quote(run.problem.name)}"
                st.caption(f"{label}: {run.problem.target.describe()}")
            live.controls(run, speed=present)
        live.panel(run)
        return
    if controls is not None:  # presentation mode: the views first, the posterior folded below
        with controls:
            live.controls(run, speed=True)
    else:
        left, right = st.columns([3, 2], vertical_alignment="center")
        with left:
            posterior.render(run)
        with right:
            live.controls(run)
        prompt.render(run, inputs.image_id)  # photos: say what the object is (a box, points)
    live.panel(run)
    if controls is not None:
        with st.expander("The posterior at a glance"):
            posterior.render(run)
            prompt.render(run, inputs.image_id)


with late_imports.drawing():  # no library import half done while this run draws a figure
    try:
        main()
    except Exception as err:  # no traceback reaches the page: say what failed, log the rest
        log.exception("LSB Explorer failed")
        st.error(
            f"Something went wrong: {plain(err)}. Change a setting or press Reset to continue."
        )

# After the page, not before: importing numba and loading the kernels holds the interpreter for
# seconds, and the first visitor's page (which steps with torch until they are ready) would wait
# for it.
compiled_kernels()
late_imports.in_background()  # likewise: the tables and the worker's diagnostics
