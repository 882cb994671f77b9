"""The numerical constants every path shares (torch steps, compiled kernels, the objective).

One home, so that the torch and compiled backends cannot drift apart: they give the same
chains only while they agree on these.
"""

from __future__ import annotations

import math

# torch.rand gives u <= 1 - 2^-53, and u * c can round up to c. Scaled by (1 - 2^-52), u * c < c
# for every positive normal c, so an inverse-CDF search never runs past the last positive term.
BELOW_ONE = 1.0 - 2.0**-52
# exp() of a proposed g is capped at e^MAX_LOG_G (relative to the chain's scale): such a move has
# A < e^-500 either way, and the cap keeps inf * 0 (padding slots) out of the sums. The learning
# objective caps its exp() arguments at the same value: a proposal whose g exceeds every current
# g by e^600 has T < e^-600 either way, and the cap keeps the loss and its gradient finite.
MAX_LOG_G = 600.0
# Z is kept inside [e^-LOG_RANGE, e^LOG_RANGE] by re-choosing the shift. One step can multiply Z
# by at most 1/u < 2^53 ~ e^37 when accepted, so float64 (e^709) never overflows in between.
LOG_RANGE = 200.0
LOG_2 = math.log(2.0)
# torch.optim's defaults, which the written-out optimisers follow step for step: Adam's betas
# and eps, SGD's momentum (the paper's appendix)
ADAM_BETA1, ADAM_BETA2, ADAM_EPS = 0.9, 0.999, 1e-8
SGD_MOMENTUM = 0.9
# |h_i| + sum_j |J_ij| at most this: log-ratios |s_i| <= 2e6 and log p~ far from overflow, while
# any realistic posterior (|alpha| <= mu / sigma^2 of a few hundred) fits many times over
MAX_LOCAL_FIELD = 1e6
