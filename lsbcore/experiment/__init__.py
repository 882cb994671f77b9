"""Run a sampler comparison from the command line and write results, traces and a report.

    python -m lsbcore.experiment --case 3 --out runs/case3
    python -m lsbcore.experiment --image photo.png --lam 1 --mu 1 --sigma 0.5 --out runs/photo

Every sampler runs ``--burn-in`` iterations (the learnable ones learn, the others just run),
then ``--steps`` mixing iterations; one iteration advances every chain of a sampler by one step
(no sampler gets extra steps). DIR receives:

- ``results.json``: the schema of ``lsbcore.results`` (config with the command line, device,
  versions, per-sampler ESS, R-hat, acceptance, accuracy, target evaluations, seconds), plus
  ``"timings"`` (wall seconds per stage of this command);
- ``traces.csv``: the thinned traces of every chain, long format (what
  ``lsbcore.write_traces_csv`` writes): every burn-in record and every ``--csv-thin``-th
  (default 10) mixing record;
- ``learned_<name>.json`` per learned sampler (``lsbcore.balancing_to_json``);
- ``report.html``: one self-contained page (plotly.js embedded once, opens offline).

Samplers are independent (each has its own generator seeded with ``--seed``, all start from the
problem's shared ``x0``), so each runs as its own task (a one-sampler ``Comparison``): in this
process (``--workers 1``) or in spawned worker processes (``torch`` on one thread in each), with
identical results either way and identical to one ``Comparison`` of all of them. A task also
computes its mixing diagnostics and writes its rows of ``traces.csv``, so that work is spread
over the workers too; the longest tasks start first.

Recording. Every sampler keeps its own running statistics (``log p~``, magnetisation, agreement
with the truth) and writes them after every step into a buffer (``Sampler.step``'s
``trace``); ``Comparison.step`` turns every ``thin``-th row into a record. ``RecordingComparison``
stores the records in growable arrays (``ArrayTrace``) and skips the posterior marginals.

The package, by the architecture: ``lsbcore.experiment.run`` runs the samplers and records
them (``run_experiment``), ``lsbcore.experiment.report`` builds the self-contained HTML report
(``build_report``), ``lsbcore.experiment.cli`` parses and checks the command line (``main``);
``python -m lsbcore.experiment`` runs ``main``.
"""

from lsbcore.experiment.cli import CHOICES, DEFAULT_SAMPLERS, build_parser, main
from lsbcore.experiment.report import PAPER_TABLE2, build_report
from lsbcore.experiment.run import (
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
