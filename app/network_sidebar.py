"""The sidebar's Markov-network part: which network, its epsilon or its file, and the samplers.

A preset (MN 1, MN 2) is built once per server for each epsilon. An uploaded ``.uai`` file is
read once (``network_targets.read_upload``: size-capped, every refusal a sentence) and kept in
the session, so that leaving the upload box (another target) and coming back finds it again; a
refused file changes nothing: the network in use, if any, stays, and so does the run.

The samplers offered are the registry's that run on the chosen network: the gradient ones are
refused by the registry where a table has exact zeros, so they are not offered there.
"""

from __future__ import annotations

import logging

import streamlit as st

from app import config as cfgmod
from app import network_targets, selection_target
from app.config import BOUNDS, Config
from app.page_state import ensure, ensure_in_range
from app.text import plain, quote
from lsbcore import REGISTRY
from lsbcore.targets.uai import MAX_UPLOAD_BYTES

log = logging.getLogger(__name__)

UPLOAD_KEY = "network_upload"
KEPT = "_kept_network"  # (file_id, name, graph, summary line) of the last file read well
ERROR = "_network_error"  # (file_id, sentence) of the last file refused
SEEN = "_network_seen"  # the file_id last read (a file is read once)


@st.cache_resource(show_spinner=False, max_entries=16)
def preset_graph(target: str, epsilon: float):
    """A preset network at ``epsilon``, built once per server (every session shares it)."""
    return network_targets.preset(target, epsilon)


def _read(file) -> None:
    """Read a newly uploaded file: keep it when it is good, else note why not."""
    state = st.session_state
    state[SEEN] = file.file_id
    try:
        # the name goes into the sentences raw; they are escaped once, on the page
        graph, line = network_targets.read_upload(file.getvalue(), file.name)
    except ValueError as err:
        state[ERROR] = (file.file_id, f"This file cannot be sampled: {plain(err)}")
        return
    except Exception as err:  # anything else the file provokes is a refusal, not a crash
        log.exception(".uai upload failed")
        state[ERROR] = (
            file.file_id,
            f"This file cannot be sampled: it cannot be read ({type(err).__name__}).",
        )
        return
    state.pop(ERROR, None)
    state[KEPT] = (file.file_id, file.name, graph, line)


@st.cache_resource(show_spinner=False, max_entries=16)
def selection(features: int, informative: int, seed: int):
    """The variable-selection target on its synthetic data, built once per server."""
    return selection_target.SyntheticSelection(features, informative, seed)


def _whole(sb, label: str, key: str, low: int, high: int, help: str) -> int:
    """A whole-number input kept within ``[low, high]``; a value moved into range says so."""
    state = st.session_state
    value = state.get(key)
    kept = ensure_in_range(key, int(getattr(Config(), key)), low, high)
    if value is not None and value != kept:
        sb.caption(f"{cfgmod.LABELS[key].capitalize()}: {value} is outside [{low}, {high}]; "
                   f"using {kept}.")  # fmt: skip
    state[key] = int(state[key])
    return int(sb.number_input(label, low, high, step=1, key=key, help=help))


def _selection(sb, inputs) -> None:
    """The synthetic regression's size and seed, and the target built on it."""
    _, low, high = BOUNDS["features"]
    k = _whole(
        sb, "Features k", "features", int(low), int(high),
        f"Candidate features of the regression, {int(low)} to {int(high)}; each is in or out "
        f"of the model (x_i = +1: in). Up to {selection_target.MAX_EXACT_FEATURES} the exact "
        "inclusion probabilities are drawn too.",
    )  # fmt: skip
    m = _whole(
        sb, "Informative features m", "informative", 1, k,
        "Features with a nonzero slope in the data (at most k); the view marks them.",
    )  # fmt: skip
    _, low, high = BOUNDS["data_seed"]
    seed = _whole(
        sb, "Data seed", "data_seed", int(low), int(high),
        "Seeds the synthetic data: the features, which of them are informative, the response.",
    )  # fmt: skip
    try:
        target = selection(k, m, seed)
    except ValueError as err:
        sb.error(f"This data set cannot be drawn: {plain(err)}")
        return
    sb.caption(selection_target.describe(target))
    inputs.network, inputs.image_id = target, f"selection:{k}:{m}:{seed}"
    inputs.name = "variable selection"


def _epsilon(sb) -> float:
    kind, low, high = BOUNDS["epsilon"]
    ensure_in_range("epsilon", network_targets.DEFAULT_EPSILON, low, high)
    st.session_state["epsilon"] = float(st.session_state["epsilon"])
    return sb.number_input(
        "ε: probability off the favoured value",
        low,
        high,
        step=1e-3,
        format="%.4g",
        key="epsilon",
        help="Each near-deterministic table puts 1 − ε on its favoured value and ε on the "
        "other (the paper's networks: small). 0 makes them exact zeros: states of zero "
        "probability, which a sampler must never enter (the gradient samplers are then not "
        "offered: log p̃ has no gradient there).",
    )


def model(sb, inputs) -> None:
    """Describe the chosen network and put it (and what identifies it) in ``inputs``."""
    state = st.session_state
    target = state["target"]
    if target == selection_target.TARGET:
        sb.header("The regression")
        _selection(sb, inputs)
        return
    sb.header("The network")
    if target in network_targets.PRESETS:
        epsilon = float(_epsilon(sb))
        try:
            graph = preset_graph(target, epsilon)
        except ValueError as err:
            sb.error(f"This network cannot be built: {plain(err)}")
            return
        sb.caption(network_targets.preset_description(target, epsilon))
        zeros, entries = network_targets.zero_entries(graph)
        sb.caption(f"{zeros:,} of {entries:,} table entries are exact zeros.")
        inputs.network, inputs.image_id = graph, f"network:{target}"
        inputs.name = network_targets.TARGET_LABELS[target].removeprefix("Markov network: ")
        return
    sb.file_uploader(
        "Upload a UAI model (.uai)",
        type=["uai"],
        key=UPLOAD_KEY,
        help="A MARKOV or BAYES file of the UAI inference competition's format, binary "
        f"variables only, up to {MAX_UPLOAD_BYTES // 2**20} MB and "
        f"{network_targets.MAX_VARIABLES:,} variables. A file that cannot be sampled is refused "
        "in a sentence and the network in use stays.",
    )
    file = state.get(UPLOAD_KEY)
    if file is not None and state.get(SEEN) != file.file_id:
        _read(file)
    error = state.get(ERROR)
    kept = state.get(KEPT)
    if error is not None and file is not None and error[0] == file.file_id:
        sb.error(error[1])
        if kept is not None:
            sb.caption(f"Still sampling {quote(kept[1])}, the last file read.")
    if kept is None:
        return
    file_id, name, graph, line = kept
    if file is None:
        sb.caption(f"Using {quote(name)}; upload another file to replace it.")
    sb.caption(plain(line))
    inputs.network, inputs.image_id, inputs.name = graph, f"uai:{file_id}", name


def option_label(name: str) -> str:
    spec = REGISTRY[name]
    note = (
        "learned" if spec.learnable else {"block": "block", "gradient": "gradient"}.get(spec.family)
    )
    return f"{spec.label}  ({note})" if note else spec.label


def samplers(sb, graph) -> None:
    """The multiselect of the samplers that run on ``graph`` (all offered ones before a
    network is chosen)."""
    state = st.session_state
    if graph is None:
        offered, refused = network_targets.SAMPLERS, {}
    else:
        offered, refused = network_targets.runnable(graph)
    ensure(
        "samplers",
        [n for n in network_targets.DEFAULT_SAMPLERS if n in offered],
        lambda v: isinstance(v, list),
    )
    state["samplers"] = [n for n in state["samplers"] if n in offered]
    sb.multiselect(
        "Samplers to compare",
        offered,
        format_func=option_label,
        key="samplers",
        help="\n".join(f"- **{REGISTRY[n].label}**: {REGISTRY[n].description}" for n in offered)
        + "\n\nThe learned ones learn during burn-in; all start from one shared state of "
        "positive probability.",
    )
    why = {
        "gradient": "move by the gradient of log p̃, which a network with exact zeros does not have",
        "pairwise": "needs a pairwise model (its colouring into independent sets)",
    }
    for need, labels in refused.items():
        sb.caption(f"Not offered on this target: {', '.join(labels)}: {why[need]}.")


def learners() -> str:
    """The labels of the learned samplers a network run offers (the Learning expander's)."""
    return ", ".join(REGISTRY[n].label for n in network_targets.SAMPLERS if REGISTRY[n].learnable)
