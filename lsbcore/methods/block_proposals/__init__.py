"""Learned block proposals (Wang, Wu, Moore and Russell, "Meta-learning MCMC proposals", 2018).

A network trained once on random instances of a motif (a ``k x k`` block of a grid model given
its boundary) proposes whole blocks; the ``neural-block`` sampler accepts them by
Metropolis-Hastings with the exact target ratio, so it is exact whatever the network's quality.

- ``motif``: the block, its interaction terms and its exact conditional (enumeration);
- ``proposal``: the autoregressive network ``q(x_B | context)``, exact to sample and evaluate;
- ``tiling``: where the blocks of a step lie, and which of them can move at once;
- ``pairwise_context`` / ``factor_context``: a target's block conditional as motif coefficients;
- ``instances``, ``train``, ``held_out``: meta-training and what it learned.
"""
