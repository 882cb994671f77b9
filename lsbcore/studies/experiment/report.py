"""The experiment's self-contained HTML report (plotly.js embedded once, opens offline)."""

from __future__ import annotations

import html
import math

import numpy as np

from lsbcore.balancing.functions import make_balancing
from lsbcore.balancing.json_io import load_balancing
from lsbcore.diagnostics.mixing import PAPER_MAX_LAG, autocorrelation
from lsbcore.samplers.registry import REGISTRY

__all__ = ["PAPER_TABLE2", "REPORT_POINTS", "build_report", "fmt", "paper_comparable"]

PAPER_SIZE = 30  # the paper's lattice side

#: Points per drawn series in the report: about one per pixel of its 1,100 px page (the
#: whole run's 32,000 steps at full resolution made most of a 9 MB report).
REPORT_POINTS = 1000

#: Table 2 of the ICML paper: paper ESS mean and std over 30 chains, per case and sampler.
PAPER_TABLE2 = {
    1: {
        "barker": (2.55, 0.30),
        "sqrt": (2.29, 0.23),
        "min": (2.43, 0.22),
        "max": (1.71, 0.13),
        "lsb1": (2.32, 0.27),
        "lsb2": (2.34, 0.23),
    },
    2: {
        "barker": (3.30, 0.36),
        "sqrt": (2.89, 0.28),
        "min": (2.96, 0.30),
        "max": (1.68, 0.11),
        "lsb1": (2.85, 0.28),
        "lsb2": (2.30, 0.29),
    },
    3: {
        "barker": (2.39, 0.98),
        "sqrt": (1.83, 0.56),
        "min": (2.31, 0.92),
        "max": (1.20, 0.10),
        "lsb1": (2.01, 0.70),
        "lsb2": (2.44, 0.96),
    },
    4: {
        "barker": (2.10, 0.91),
        "sqrt": (7.08, 4.07),
        "min": (1.74, 0.26),
        "max": (1.74, 0.51),
        "lsb1": (2.52, 1.11),
        "lsb2": (20.11, 15.58),
    },
}


# ============================================================================ the report
_CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       margin: 0 auto; max-width: 1100px; padding: 1.5rem 2rem 4rem; color: #222; }
h1 { font-size: 1.7rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.25rem; margin-top: 2.2rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
p.note { color: #555; font-size: 0.92rem; max-width: 60rem; }
table { border-collapse: collapse; margin: 0.6rem 0; font-size: 0.9rem; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 0.3rem 0.7rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f6f6f6; font-weight: 600; }
table.text td { text-align: left; }
code { background: #f3f3f3; padding: 0.05rem 0.3rem; border-radius: 3px; font-size: 0.88em; }
.swatch { display: inline-block; width: 0.8em; height: 0.8em; border-radius: 2px;
          margin-right: 0.4em; vertical-align: -0.05em; }
.figure { margin: 0.8rem 0 1.4rem; }
.grid { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
@media (max-width: 900px) { .grid { grid-template-columns: 1fr; } }
"""


def report_page(title: str, body: str, extra_css: str = "") -> str:
    """A self-contained report page: ``body`` under the title, plotly.js embedded once (gzip'd),
    the figures drawn from their JSON by ``DRAW_FIGURES``, a sentence if the browser cannot;
    the reports' style, then ``extra_css``."""
    from lsbcore.studies import figures  # plotly is imported only when reporting

    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{_CSS}{extra_css}</style>
<script type="application/octet-stream" id="plotly-gzip">{figures.plotly_js_gzip_base64()}</script>
</head>
<body>
<h1>{html.escape(title)}</h1>
<p class="note" id="charts-missing" hidden>The charts could not be drawn: this browser cannot
unpack the report's plotly.js (it needs DecompressionStream: Chrome 80, Firefox 113, Safari 16.4
or later).</p>
{body}
<script>{DRAW_FIGURES}</script>
</body>
</html>
"""


# Unpacks the gzip'd plotly.js (4.8 MB as text, 1.9 MB packed), runs it, then draws each
# figure from its JSON in page order, letting the browser paint between two figures so that
# the first screen shows before the last figure is drawn. One copy of the library, no
# network, and a sentence on the page when it fails.
DRAW_FIGURES = """
(async () => {
  try {
    const packed = atob(document.getElementById("plotly-gzip").textContent.trim());
    const bytes = new Uint8Array(packed.length);
    for (let i = 0; i < packed.length; i++) bytes[i] = packed.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    const library = document.createElement("script");
    library.textContent = await new Response(stream).text();
    document.head.appendChild(library);
    const config = {displaylogo: false, responsive: true};
    const painted = () => new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)));
    for (const data of document.querySelectorAll("script[data-figure]")) {
      const figure = JSON.parse(data.textContent);
      await Plotly.newPlot(data.dataset.figure, figure.data, figure.layout, config);
      await painted();
    }
    document.body.dataset.figuresDrawn = "yes";
  } catch (err) {
    const note = document.getElementById("charts-missing");
    note.hidden = false;
    note.textContent += " (" + err + ")";
  }
})();
"""


def fmt(value, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "n/a"
        return f"{value:.{digits}g}" if abs(value) < 10**digits else f"{value:,.0f}"
    return str(value)


def _table(header: list[str], rows: list[list[str]], css: str = "") -> str:
    """An HTML table; every cell is escaped here."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    cls = f' class="{css}"' if css else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def paper_comparable(config: dict) -> bool:
    """Whether the run is one of the paper's cases as the paper ran it (its lambda, mu and
    sigma, a 30 x 30 lattice, the ESS window L = 500): the only runs its Table 2 can be set
    beside. The dashboard keeps ``case`` in its config for photos too, hence ``source``."""
    case = config.get("case")
    if isinstance(case, bool) or case not in PAPER_TABLE2:
        return False
    if config.get("source", "paper") != "paper" or config.get("max_lag") != PAPER_MAX_LAG:
        return False
    from lsbcore.cases import PAPER_CASES

    _, lam, mu, sigma, _ = PAPER_CASES[case]
    shape = config.get("shape") or [config.get("size")] * 2
    given = (config.get("lam", lam), config.get("mu", mu), config.get("sigma", sigma))
    return list(shape) == [PAPER_SIZE, PAPER_SIZE] and all(
        isinstance(v, (int, float)) and math.isclose(v, w)
        for v, w in zip(given, (lam, mu, sigma), strict=True)
    )


def _burnin_series(arrays: dict, field_name: str, x_key: str, burn_in: int) -> dict:
    out = {}
    for name, arrs in arrays.items():
        if field_name not in arrs:
            continue
        mask = arrs["step"] <= burn_in
        out[name] = (arrs[x_key][mask], arrs[field_name][mask])
    return out


def _protocol_text(config: dict, samplers: dict) -> str:
    """One sentence: the protocol, its ESS window, the starts, the objective and the seeds."""
    from lsbcore.studies.figures import sampler_label

    protocol = config.get("protocol", "spec")
    text = f"Protocol {protocol}: burn-in {fmt(config.get('burn_in'))} iterations"
    doubled = [
        sampler_label(n)
        for n, k in (config.get("burnin_steps_per_iteration") or {}).items()
        if isinstance(k, int) and k > 1
    ]
    if doubled:
        text += f" ({', '.join(doubled)}: 2 steps per burn-in iteration)"
    start = config.get("ess_from_step")
    text += ", ESS over the mixing phase" if start is None else f", ESS from iteration {fmt(start)}"
    if config.get("start"):
        text += f", chains start {str(config['start']).replace('_', '-')}"
    objective = (config.get("learning") or {}).get("objective")
    if objective and any(REGISTRY[n].learnable for n in samplers if n in REGISTRY):
        text += f", learning objective {objective}"
    seeds = config.get("seeds_run")
    if seeds and len(seeds) > 1:
        text += f", {len(seeds)} seeds ({seeds[0]}-{seeds[-1]}; ESS mean over seeds and chains)"
    return text + "."


def target_density(target) -> str:
    """What ``p~`` is a density of, in the report's words: an image's or a regression's
    ``posterior``; a Markov network's (or any other target's) ``probability``."""
    from lsbcore.targets.ising import IsingPosterior
    from lsbcore.targets.variable_selection import VariableSelection

    return "posterior" if isinstance(target, (IsingPosterior, VariableSelection)) else "probability"


def build_report(results: dict, runs: dict, problem, burn_in: int, source: str, timings) -> str:
    """The self-contained HTML report (plotly.js embedded once in the head)."""
    from lsbcore.studies import figures  # plotly is imported only there (and only when reporting)

    config = results["config"]
    samplers = results["samplers"]
    lag = config.get("max_lag")
    has_truth = problem.truth is not None

    arrays = {name: run.trace.arrays() for name, run in runs.items()}
    figs: list[tuple[str, str, object]] = []  # (heading, note, figure)
    figs.append(
        (
            "Burn-in: magnetisation against iterations",
            "m(x) = sum of the spins, per chain; the line is the mean over chains, the band the "
            "central 95%. One iteration is one step of every chain of a sampler.",
            figures.band_figure(
                _burnin_series(arrays, "magnetisation", "step", burn_in),
                "Magnetisation during burn-in",
                "magnetisation m(x)",
                max_points=REPORT_POINTS,
            ),
        )
    )
    figs.append(
        (
            "Burn-in: magnetisation against target evaluations",
            "Target evaluations per chain: single-site log-ratio evaluations (a step evaluates the "
            "flipped site's neighbourhood; a learning step also a uniformly flipped one; an exact "
            "resync all sites). This is the paper's cost axis, counted honestly for every sampler.",
            figures.band_figure(
                _burnin_series(arrays, "magnetisation", "target_evals", burn_in),
                "Magnetisation during burn-in",
                "magnetisation m(x)",
                x_label="target evaluations per chain",
                max_points=REPORT_POINTS,
            ),
        )
    )
    density = target_density(problem.target)
    figs.append(
        (
            f"Burn-in: log {density}",
            f"Unnormalised log {density} log p~(x) per chain.",
            figures.band_figure(
                _burnin_series(arrays, "log_p", "step", burn_in),
                "log p~(x) during burn-in",
                "log p~(x)",
                max_points=REPORT_POINTS,
            ),  # fmt: skip
        )
    )
    if has_truth:
        figs.append(
            (
                "Burn-in: accuracy",
                "Fraction of sites equal to the ground truth.",
                figures.band_figure(
                    _burnin_series(arrays, "accuracy", "step", burn_in),
                    "Accuracy during burn-in",
                    "accuracy",
                    max_points=REPORT_POINTS,
                ),  # fmt: skip
            )
        )
    whole = {name: (arrs["step"], arrs["magnetisation"]) for name, arrs in arrays.items()}
    figs.append(
        (
            "Whole run: magnetisation",
            f"Burn-in and mixing (burn-in ends at iteration {burn_in:,}); series longer than "
            f"{REPORT_POINTS:,} points are drawn at every k-th iteration (the statistics use all).",
            figures.band_figure(
                whole, "Magnetisation, whole run", "magnetisation m(x)", max_points=REPORT_POINTS
            ),
        )
    )
    acf = {}
    if lag:
        for name, run in runs.items():
            if run.acf is not None and len(run.acf) == lag + 1:
                acf[name] = run.acf
            else:
                series = run.trace.mixing_series()
                if series.shape[1] > lag:
                    acf[name] = autocorrelation(series, lag)
    figs.append(
        (
            "Mixing: autocorrelation",
            f"Autocorrelation of the magnetisation over the mixing phase, lags 0..{lag}, mean over "
            "chains. Lags above 0.05 count towards the paper ESS.",
            figures.acf_figure(acf, lag),
        )
    )
    paper_ess = (
        "Left: the paper's ESS (Zanella's convention) per window of L+1 draws, mean over chains "
        "with the standard deviation as error bar. "
    )
    if config.get("chains_share_posterior", True):
        ess_note = (
            paper_ess + "Right: rank-normalised bulk ESS pooled over all chains (arviz-stats)."
        )
        ess_fig = figures.ess_figure(samplers)
    else:  # a pooled bulk ESS would mix different posteriors: results hold none
        ess_note = paper_ess + (
            "Right: each chain's own rank-normalised bulk ESS, mean over chains. No pooled bulk "
            "ESS is drawn: every chain has its own noisy α here (as in the paper), so pooling "
            "chains would mix different posteriors."
        )
        per_chain = {
            n: {**s, "ess_bulk": s.get("ess_bulk_chain_mean")} for n, s in samplers.items()
        }
        ess_fig = figures.ess_figure(per_chain, bulk_title="bulk ESS per chain (mean)")
    figs.append(("Mixing: effective sample size", ess_note, ess_fig))
    balancings = {}
    notes = []
    for name, run in runs.items():
        if not REGISTRY[name].balanced:
            continue
        if run.balancing_json is not None:
            try:
                balancings[name] = load_balancing(run.balancing_json)
            except ValueError as err:
                notes.append(f"{name}: the learned function cannot be drawn ({err})")
        else:
            balancings[name] = make_balancing(name)
    t, g, reflected = figures.balancing_curves(balancings)
    figs.append(
        (
            "Balancing functions",
            "g(t) of every locally balanced sampler, the learned ones as learned at the end of "
            "burn-in. The thin black curves are t g(1/t): on g exactly when g is balanced.",
            figures.balancing_figure(t, g, reflected),
        )
    )
    if "lsb1" in runs and runs["lsb1"].history is not None:
        h = runs["lsb1"].history
        weights = h["weights"]
        figs.append(
            (
                "LSB 1: mixture weights",
                "Softmax weights of (t/(1+t), sqrt(t), min(1,t), max(1,t)) over burn-in.",
                figures.weights_area_figure(h["step"], weights),
            )
        )
        final = weights[-1] if len(weights) else np.zeros(0)
        figs.append(("", "", figures.weights_bar_figure(final)))
    histories = {n: r.history for n, r in runs.items() if r.history is not None}
    if histories:
        figs.append(
            (
                "Learning",
                "The learning objective (spec section 5) and eta over burn-in, per learned "
                "sampler.",
                figures.loss_figure(histories),
            )
        )

    # ---------------------------------------------------------------- tables
    paper = PAPER_TABLE2[config["case"]] if paper_comparable(config) else {}
    seeds = config.get("seeds_run", [config.get("seed")])
    shared = config.get("chains_share_posterior", True)
    header = ["sampler", "paper ESS (± over chains)"]
    header += ["seed std of the mean"] if len(seeds) > 1 else []
    header += ["bulk ESS", "R-hat"] if shared else ["bulk ESS per chain"]
    header += ["accept rate"]
    header += ["final accuracy"] if has_truth else []
    header += ["target evals / chain", "burn-in s", "mixing s"]
    header += ["paper Table 2"] if paper else []
    rows = []
    for name, s in samplers.items():
        ess = s["ess_paper_mean"]
        ess_text = "n/a" if ess is None else f"{ess:.2f} ± {fmt(s['ess_paper_std'], 2)}"
        row = [figures.sampler_label(name), ess_text]
        if len(seeds) > 1:
            by_seed = ", ".join(fmt(v, 3) for v in s.get("ess_paper_by_seed") or [])
            row.append(f"{fmt(s.get('ess_paper_seed_std'), 2)} ({by_seed})")
        if shared:
            row += [fmt(s["ess_bulk"], 4), fmt(s["rhat"], 4)]
        else:
            mean, std = s.get("ess_bulk_chain_mean"), s.get("ess_bulk_chain_std")
            row.append("n/a" if mean is None else f"{fmt(mean, 4)} ± {fmt(std, 3)}")
        row.append(fmt(s["accept_rate"]))
        row += [fmt(s["final_accuracy"])] if has_truth else []
        row += [fmt(s["target_evals"]), fmt(s["burnin_seconds"]), fmt(s["mixing_seconds"])]
        if paper:
            p = paper.get(name)
            row.append("" if p is None else f"{p[0]:.2f} ± {p[1]:.2f}")
        rows.append(row)
    summary_table = _table(header, rows)

    config_rows = []
    for key, value in config.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={fmt(v)}" for k, v in value.items())
        elif isinstance(value, list):
            value = " x ".join(map(str, value)) if key == "shape" else ", ".join(map(str, value))
        config_rows.append([key, fmt(value)])
    config_table = _table(["setting", "value"], config_rows, "text")

    timing_rows = [
        [
            n,
            fmt(p["burnin_seconds"]),
            fmt(p["mixing_seconds"]),
            fmt(p["recording_seconds"]),
            fmt(p["csv_seconds"]),
            fmt(p["burnin_steps_per_second"]),
            fmt(p["mixing_steps_per_second"]),
        ]
        for n, p in timings["per_sampler"].items()
    ]
    timing_table = _table(
        ["sampler", "burn-in s", "mixing s", "recording s", "traces.csv s", "burn-in steps/s",
         "mixing steps/s"],
        timing_rows,
    )  # fmt: skip
    env_rows = [["device", results["device"]]] + [[k, v] for k, v in results["versions"].items()]
    env_table = _table(["", ""], env_rows, "text")

    # ---------------------------------------------------------------- page
    parts = []
    for i, (heading, note, fig) in enumerate(figs):
        if heading:
            parts.append(f"<h2>{html.escape(heading)}</h2>")
        if note:
            parts.append(f'<p class="note">{html.escape(note)}</p>')
        height = int(fig.layout.height or 420)
        parts.append(
            f'<div class="figure" id="figure-{i}" style="height:{height}px"></div>'
            f'<script type="application/json" data-figure="figure-{i}">'
            f"{figures.figure_json(fig)}</script>"
        )
    swatches = " ".join(
        f'<span><span class="swatch" style="background:{figures.sampler_colour(n)}"></span>'
        f"{html.escape(figures.sampler_label(n))}</span>"
        for n in samplers
    )
    lag_note = (
        f"{_protocol_text(config, samplers)} "
        f"Paper ESS window L = {lag} lags"
        + (
            f" (clipped from {config.get('max_lag_requested')} because the mixing phase is short)"
            if lag is not None and lag != config.get("max_lag_requested")
            else ""
        )
        + (f"; traces thinned by {config.get('thin')}" if config.get("thin", 1) != 1 else "")
        + "."
        + (
            " The paper describes 30 chains, 30x30, 2000 burn-in and 30 000 mixing steps; its "
            "Table 2 was computed with the authors' own window (--protocol authors, "
            "docs/method.md)."
            if paper
            else ""
        )
    )
    if problem.target.batch > 1:
        notes.append(
            "Every chain has its own noisy image here (as in the paper), so the chains sample "
            "different posteriors: a bulk ESS or R-hat pooled over chains would compare "
            "different targets, so the table gives each chain's own bulk ESS (mean ± std over "
            "chains) and no R-hat; the paper ESS is computed per chain."
        )
    extra = "".join(f'<p class="note">{html.escape(n)}</p>' for n in notes)
    title = f"LSB Explorer experiment: {source}"
    command = config.get("command")
    if command:
        command_line = f'<p class="note">Command: <code>{html.escape(command)}</code></p>'
    else:  # the dashboard's runs say why no command reproduces them, or say nothing
        reason = config.get("command_note")
        command_line = f'<p class="note">{html.escape(reason)}</p>' if reason else ""
    body = f"""{command_line}
<p>{swatches}</p>
<h2>Summary</h2>
{summary_table}
<p class="note">{html.escape(lag_note)} Acceptance rate and target evaluations cover the whole
run (burn-in included); seconds are the samplers' own stepping time, recording excluded.</p>
{extra}
{"".join(parts)}
<h2>Configuration</h2>
{config_table}
<h2>Timings</h2>
{timing_table}
<p class="note">Sampling wall time {html.escape(fmt(timings["sampling_wall_seconds"]))} s with
{html.escape(str(timings["workers"]))} worker(s).</p>
<h2>Environment</h2>
{env_table}
"""
    return report_page(title, body)
