"""Statistics of runs: traces and marginals, ESS, R-hat and autocorrelation."""
