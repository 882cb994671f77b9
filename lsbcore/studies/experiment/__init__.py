"""Run a sampler comparison from the command line and write results, traces and a report.

    python -m lsbcore.experiment --case 3 --out runs/case3
    python -m lsbcore.experiment --case 4 --protocol authors --seeds 5 --out runs/case4-authors
    python -m lsbcore.experiment --image photo.png --lam 1 --mu 1 --sigma 0.5 --out runs/photo

Every sampler runs ``--burn-in`` iterations (the learnable ones learn, the others just run),
then ``--steps`` mixing iterations; one iteration advances every chain of a sampler by one step.
``--protocol`` (``lsbcore.studies.experiment.paper_protocol``) says which table is being reproduced:
``spec`` (default, the published protocol: burn-in 2000, ESS of the mixing phase with L = 500,
no sampler gets extra steps) or ``authors`` (the authors' scripts: burn-in 2000/800/2000/800 for
cases 1-4, ESS of the series after iteration 1000/400/1000/400 with L = 500/400/500/100, LSB 2
stepped twice per burn-in iteration). An explicit ``--burn-in`` overrides the protocol's
(``authors`` then opens the ESS window at half of it); ``config.burn_in_source`` says which. The
paper cases start every chain from its own random state by default (``--start per-chain``, as
the authors' runner; ``shared``: one state for all). ``--seeds N`` reruns seeds ``--seed`` ..
``--seed + N - 1`` (problem, starts and samplers) and aggregates them in ``results.json``
(``lsbcore.studies.experiment.seeds``). DIR receives:

- ``results.json``: the schema of ``lsbcore.studies.results`` (config with the command line, device,
  versions, per-sampler ESS, R-hat, acceptance, accuracy, target evaluations, seconds), plus
  ``"timings"`` (wall seconds per stage of this command);
- ``traces.csv``: the thinned traces of every chain, long format (what
  ``lsbcore.write_traces_csv`` writes): every burn-in record and every ``--csv-thin``-th
  (default 10) mixing record; steps are the sampler's own (LSB 2 under ``authors`` reaches
  step ``2 * burn_in`` at the end of burn-in); first seed only;
- ``learned_<name>.json`` per learned sampler (``lsbcore.balancing_to_json``), first seed only;
- ``report.html``: one self-contained page (plotly.js embedded once, opens offline); its
  table holds the aggregated numbers, its traces and autocorrelations the first seed's.

Samplers are independent (each has its own generator seeded with ``--seed``, all start from the
problem's ``x0``), so each runs as its own task (a one-sampler ``Comparison``): in this
process (``--workers 1``) or in spawned worker processes (``torch`` on one thread in each), with
identical results either way and identical to one ``Comparison`` of all of them. A task also
computes its mixing diagnostics and writes its rows of ``traces.csv``, so that work is spread
over the workers too; the longest tasks start first.

Recording. Every sampler keeps its own running statistics (``log p~``, magnetisation, agreement
with the truth) and writes them after every step into a buffer (``Sampler.step``'s
``trace``); ``Comparison.step`` turns every ``thin``-th row into a record. ``RecordingComparison``
stores the records in growable arrays (``ArrayTrace``) and skips the posterior marginals.

The package, by the architecture: ``lsbcore.studies.experiment.run`` runs the samplers and records
them (``run_experiment``), ``lsbcore.studies.experiment.report`` builds the self-contained HTML
report
(``build_report``), ``lsbcore.studies.experiment.cli`` parses and checks the command line
(``main``),
``lsbcore.studies.experiment.paper_protocol`` resolves a protocol's burn-in and ESS window;
``python -m lsbcore.experiment`` runs ``main``.
"""

from lsbcore.studies.experiment.cli import CHOICES, DEFAULT_SAMPLERS, build_parser, main
from lsbcore.studies.experiment.report import PAPER_TABLE2, build_report
from lsbcore.studies.experiment.run import (
    ArrayTrace,
    RecordingComparison,
    SamplerRun,
    build_problem,
    run_experiment,
    thin_for_csv,
)

__all__ = [
    "CHOICES",
    "DEFAULT_SAMPLERS",
    "PAPER_TABLE2",
    "ArrayTrace",
    "RecordingComparison",
    "SamplerRun",
    "build_parser",
    "build_problem",
    "build_report",
    "main",
    "run_experiment",
    "thin_for_csv",
]
