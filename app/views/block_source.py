"""The block-proposal source's two experiments, as measured here, under the Block proposals tab:
the KL histograms across determinisms and alphas (``assets/block_kl.json``) and the race
against Gibbs and exact block Gibbs (``assets/block_race.json``).

Both are shipped results, read once (cached by path and modification time) with a size cap
and checks; a missing or bad file is one sentence in place of its chart. Nothing is computed
on the page but the verdicts, which read a few numbers of the files.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app import page_state
from app.text import plain
from lsbcore.studies.block_proposals import block_kl, kl_summary, race

ASSETS = Path(__file__).resolve().parent.parent.parent / "assets"
KL_FILE = ASSETS / "block_kl.json"
RACE_FILE = ASSETS / "block_race.json"
TITLE = "The source's experiments, measured here"
RACE_KEY = page_state.BP_RACE.key


@st.cache_data(max_entries=4, show_spinner=False)
def _read(kind: str, path: str, stamp: int) -> tuple[dict | None, str]:
    """``(results, "")`` or ``(None, sentence)``; ``stamp`` (the file's modification time)
    makes a regenerated file read again."""
    return read_asset(kind, path)


def read_asset(kind: str, path) -> tuple[dict | None, str]:
    """The shipped ``kind`` ("kl" or "race") file at ``path``, or the sentence that says why
    it cannot be shown."""
    reader, command = (
        (kl_summary.read_summary, kl_summary.COMMAND)
        if kind == "kl"
        else (race.read_race, race.COMMAND)
    )
    name = Path(path).name
    if not Path(path).is_file():
        return (
            None,
            f"The shipped results {name} are not in this copy; regenerate them with `{command}`.",
        )
    try:
        return reader(path), ""
    except (OSError, ValueError) as err:
        reason = plain(err).rstrip(".")
        return (
            None,
            f"The shipped results cannot be shown ({reason}); regenerate them with `{command}`.",
        )


def _stamp(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def kl_verdicts(summary: dict) -> list[str]:
    """The study's two claims with their verdicts, from the summary's shares and medians."""
    said = (block_kl.near_zero_verdict(summary), block_kl.generalisation_verdict(summary))
    return [
        f"{claim} **{verdict.capitalize()} here.**"
        for claim, (verdict, _) in zip(block_kl.CLAIMS, said, strict=True)
    ]


def race_verdict(figures: dict) -> str:
    """The claim, its verdict and the runs it was judged on, in one sentence."""
    verdict, _ = race.verdict(figures)
    sizes = " and ".join(str(k) for k in sorted({k for _, k in race.runs(figures)})) or "none"
    return (
        f"{race.CLAIM.rstrip('.')}: **{verdict.capitalize()} here** (on the grid-network runs, "
        f"k = {sizes}; docs/reproduction.md has the rule and every figure)."
    )


def race_label(run: tuple[str, int]) -> str:
    return f"{run[0]}, k = {run[1]}"


def render(run=None) -> None:
    """The expander under the tab."""
    from app import charts

    kl_path, race_path = KL_FILE, RACE_FILE  # read now: tests point them elsewhere

    with st.expander(TITLE):
        summary, problem = _read("kl", str(kl_path), _stamp(kl_path))
        if summary is None:
            st.info(problem)
        else:
            charts.show(kl_summary.kl_figure(summary), run, "block-kl-source")
            st.caption(
                f"Regenerate with `{kl_summary.COMMAND}` (about 2.5 minutes on two cores); "
                "docs/reproduction.md has the table. " + " ".join(kl_verdicts(summary))
            )
        figures, problem = _read("race", str(race_path), _stamp(race_path))
        if figures is None:
            st.info(problem)
            return
        shown = race.choices(figures)
        if len(shown) > 1:
            st.selectbox("Race", shown, key=RACE_KEY, format_func=race_label, width=420)
        picked = page_state.BP_RACE.get()
        target, k = tuple(picked) if picked in shown else shown[0]
        charts.show(race.race_figure(figures, target, k), run, "block-race-source")
        st.caption(f"Regenerate with `{race.COMMAND}` (about 5 minutes). " + race_verdict(figures))
