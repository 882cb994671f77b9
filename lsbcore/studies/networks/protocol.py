"""The LSB paper's UAI experiment (Table 3) as its authors ran it (their public ``UAI`` scripts,
github.com/emsansone/LSB: ``runner.sh``, ``runner.py``, ``self_sampler.py``, ``eval.sh``), and
what its report compares against.

The authors' setup, which is this study's default (``AUTHORS``); each item is an option of the
command whose default is their value:

- burn-in 500 iterations (the learned functions learn), 10,000 sampling iterations, 5 chains,
  5 trials (the arXiv appendix 12; ``runner.sh``);
- every chain starts with all variables at 0 and the evidence set (``start="zeros"``);
- after burn-in every sampler's mixing restarts from the states sqrt(t)'s chains reached at the
  end of its burn-in (``mixing_start="sqrt-burn-in"``);
- LSB 2 is the monotone network ``min{h(t), t h(1/t)}`` of 20 blocks of 20 units, first fitted
  to max(1, t) (``init="max"``), ``h`` increasing by construction and ``t h(1/t)`` kept
  increasing by a finite-difference penalty of weight 1 at ``t ~ U(0, 2)``
  (``monotonicity="penalty"``);
- learning: SGD with momentum 0.9, lr 1e-4 (``runner.py``; the ICML appendix's "SGD, 1e-2"
  is not what the code runs);
- ESS: lag window 400, threshold 0.05 (``eval.sh``, ``ess.py``).
"""

PAPER = {"burn_in": 500, "steps": 10_000, "chains": 5, "trials": 5, "groups": 20, "units": 20}
#: A check of the whole pipeline in seconds, not a reproduction.
QUICK = {"burn_in": 30, "steps": 300, "chains": 5, "escape_chains": 10, "escape_steps": 150}
#: Figure 5's measurement: burn-in iterations traced, and the long sqrt(t) runs for the level.
FIGURE5 = {"iterations": 2_000, "long_chains": 100, "long_steps": 40_000}
FIGURE5_QUICK = {"iterations": 60, "long_chains": 10, "long_steps": 400}
#: The escape measurement of the full run: chains per seed and a step budget.
ESCAPE = {"chains": 50, "steps": 2_000, "seeds": 2}
NETWORKS = ("mn1", "mn2")
#: The samplers' backend: "auto" takes the compiled steps (the full run 3.4 min against 16.9 on
#: torch steps). The fixed functions and LSB 1 give the torch steps' chains; the networks' g
#: is the same function in another order of rounding, so over thousands of steps an acceptance
#: at its threshold can go the other way (one LSB 2 seed's ESS 2.06 -> 2.04 on MN 1).
BACKEND = "auto"
#: Table 3's six columns (LSB 2: the authors' monotone network), then the appendix G variant.
SAMPLERS = ("barker", "sqrt", "min", "max", "lsb1", "lsb2-monotone", "lsb2")
LABELS = {
    "barker": "t/(1+t)",
    "sqrt": "sqrt(t)",
    "min": "min(1, t)",
    "max": "max(1, t)",
    "lsb1": "LSB 1",
    "lsb2-monotone": "LSB 2",
    "lsb2": "LSB 2 (appendix G, 10 units)",
    "max-g0-zero": "max(1, t) with g(0) = 0",
}
#: The g(0) comparison: max(1, t) beside the same function with only g(0) changed (to 0).
G0_PAIR = ("max", "max-g0-zero")
#: Table 3 (arXiv and ICML alike): paper ESS, mean +- sd over 5 trials.
PAPER_TABLE3 = {
    "mn1": {"barker": (2.90, 0.76), "sqrt": (3.41, 0.77), "min": (2.54, 0.32),
            "max": (2.70, 0.63), "lsb1": (3.19, 0.46), "lsb2-monotone": (3.22, 0.38)},
    "mn2": {"barker": (3.43, 0.75), "sqrt": (3.92, 0.94), "min": (3.78, 0.50),
            "max": (3.63, 0.67), "lsb1": (3.52, 0.42), "lsb2-monotone": (3.44, 0.44)},
}  # fmt: skip
#: The authors' setup (module docstring); the command's defaults.
AUTHORS = {
    "start": "zeros",
    "mixing_start": "sqrt-burn-in",
    "lag": 400,
    "optimizer": "sgd",
    "lr": 1e-4,
    "monotonicity": "penalty",
    "init": "max",
}
#: The choices of each option (the first is the authors').
STARTS = ("zeros", "uniform")
MIXING_STARTS = ("sqrt-burn-in", "own")
#: Options that apply to LSB 2 only (the monotone network); lr and optimizer to every learner.
MONOTONE_ONLY = ("monotonicity", "init")

__all__ = [
    "AUTHORS", "ESCAPE", "FIGURE5", "FIGURE5_QUICK", "G0_PAIR", "LABELS", "MIXING_STARTS",
    "MONOTONE_ONLY", "NETWORKS", "PAPER", "PAPER_TABLE3", "QUICK", "SAMPLERS", "STARTS",
]  # fmt: skip
