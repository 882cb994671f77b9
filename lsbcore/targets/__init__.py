"""The targets: what a sampler may ask of a distribution over {-1, +1}^n, and the models.

``base.Target`` is the protocol (any binary model); ``pairwise_target.PairwiseTarget`` the
pairwise models the compiled and device kernels serve (``ising``, ``pairwise``); ``rbm`` and
``factor_graph`` are models beyond pairwise.
"""
