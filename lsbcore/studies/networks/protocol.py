"""The LSB paper's UAI protocol (the arXiv version's appendix 12, the ICML version's appendix G)
and its Table 3: what the Markov-network experiment runs and what its report compares against.

The paper's hyperparameters for UAI: burn-in K = 500 iterations (learning), 10,000 sampling
iterations, batch N = 5 chains, 5 repeated trials, the monotone network 20 blocks of 20 units.
Its learning rate is given twice and differently (the arXiv appendix: SGD with momentum,
lr 1e-4; the ICML appendix: SGD, lr 1e-2); we use the product's default, Adam with lr 1e-2, and
the report says so.
"""

PAPER = {"burn_in": 500, "steps": 10_000, "chains": 5, "trials": 5, "groups": 20, "units": 20}
#: A check of the whole pipeline in seconds, not a reproduction.
QUICK = {"burn_in": 30, "steps": 300, "chains": 5, "escape_chains": 10, "escape_steps": 150}
#: The escape measurement of the full run: chains per seed and a step budget.
ESCAPE = {"chains": 50, "steps": 2_000, "seeds": 2}
NETWORKS = ("mn1", "mn2")
#: Table 3's columns, then LSB 2' (the arXiv version's monotone network; not in Table 3).
SAMPLERS = ("barker", "sqrt", "min", "max", "lsb1", "lsb2", "lsb2-monotone")
LABELS = {
    "barker": "t/(1+t)",
    "sqrt": "sqrt(t)",
    "min": "min(1, t)",
    "max": "max(1, t)",
    "lsb1": "LSB 1",
    "lsb2": "LSB 2",
    "lsb2-monotone": "LSB 2'",
}
#: Table 3 (arXiv and ICML alike): paper ESS, mean +- sd over 5 trials.
PAPER_TABLE3 = {
    "mn1": {"barker": (2.90, 0.76), "sqrt": (3.41, 0.77), "min": (2.54, 0.32),
            "max": (2.70, 0.63), "lsb1": (3.19, 0.46), "lsb2": (3.22, 0.38)},
    "mn2": {"barker": (3.43, 0.75), "sqrt": (3.92, 0.94), "min": (3.78, 0.50),
            "max": (3.63, 0.67), "lsb1": (3.52, 0.42), "lsb2": (3.44, 0.44)},
}  # fmt: skip
LEARNING = {"optimizer": "adam", "lr": 1e-2}

__all__ = ["ESCAPE", "LABELS", "LEARNING", "NETWORKS", "PAPER", "PAPER_TABLE3", "QUICK", "SAMPLERS"]
