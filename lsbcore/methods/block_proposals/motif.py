"""The motif: a ``k x k`` block of a grid model, and its exact conditional given its boundary.

On a grid whose interactions are local (the Ising posterior, any pairwise lattice, the grid
Bayesian networks of ``lsbcore.targets.grid_network``), the conditional of a block ``B`` given
everything else is a binary model on the block alone,

    log p(x_B | x_-B) = sum_{S in terms} c_S prod_{i in S} x_i  -  log Z(c),

whose coefficients ``c`` (the *context*) gather the block's own interactions and, in the
single-site terms, the pull of its boundary. The terms are those a grid model's factors leave
inside a block, sites numbered row-major (``i = r k + c``):

- ``k^2`` single sites;
- ``k (k - 1)`` horizontal pairs ``(r, c)-(r, c + 1)`` and as many vertical ``(r, c)-(r + 1, c)``;
- ``(k - 1)^2`` anti-diagonal pairs ``(r, c + 1)-(r + 1, c)`` and as many triangles
  ``{(r, c + 1), (r + 1, c), (r + 1, c + 1)}``: a grid network's variable with its upper and
  left parents. A pairwise lattice leaves these zero.

``k = 2, 3, 4`` (``2^(k^2)`` states: 16, 512, 65,536) are enumerated exactly here: the targets
that train the proposal and the reference its KL is measured against.
"""

from __future__ import annotations

import functools

import torch

from lsbcore.checks import integer

#: Block sides the motif enumerates (2^16 states at most).
BLOCK_SIDES = (2, 3, 4)
#: The kinds of terms, in the order ``terms`` lists them.
TERM_KINDS = ("site", "horizontal", "vertical", "anti-diagonal", "triangle")
#: Exact conditionals built at once: instances x states (2^24 float64: 128 MiB).
MAX_EXACT_VALUES = 1 << 24


def check_side(k) -> int:
    k = integer(k, "block_size", 2, max(BLOCK_SIDES))
    return k


class GridMotif:
    """The ``k x k`` block: its terms, its states and its exact conditional.

    ``terms`` is ``[T, 3]`` (site indices; a term of fewer sites is padded with index ``k^2``,
    a constant +1 appended to the block), ``kinds`` the kind of each term (``TERM_KINDS``).
    """

    def __init__(self, k: int):
        self.k = check_side(k)
        self.n = self.k * self.k
        self.n_states = 2**self.n
        terms, kinds = _terms(self.k)
        self.terms = torch.tensor(terms, dtype=torch.long)  # [T, 3]
        self.kinds = tuple(kinds)
        self.n_terms = len(terms)
        # the last site of each term (row-major): the autoregressive order closes a term there,
        # where the conditional of that site first sees it
        real = torch.where(self.terms < self.n, self.terms, -1)
        self.last = real.max(1).values  # [T]

    def __repr__(self) -> str:
        return f"GridMotif(k={self.k}: {self.n} sites, {self.n_terms} terms)"

    def term_slice(self, kind: str) -> slice:
        """Where the terms of ``kind`` lie in ``terms``."""
        first = self.kinds.index(kind)
        count = self.kinds.count(kind)
        return slice(first, first + count)

    # ----------------------------------------------------------------- features
    def features(self, x: torch.Tensor) -> torch.Tensor:
        """``prod_{i in S} x_i`` of every term, ``[..., T]``, for block states ``[..., k^2]``."""
        one = torch.ones_like(x[..., :1])
        return torch.cat([x, one], -1)[..., self.terms].prod(-1)

    def log_weights(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """``sum_S c_S prod_S x``: the block's unnormalised log-conditional, ``[...]``, for
        states ``x [..., k^2]`` and coefficients ``c [..., T]`` (broadcast)."""
        return (self.features(x.to(c.dtype)) * c).sum(-1)

    @functools.cached_property
    def states(self) -> torch.Tensor:
        """Every block state, ``[2^(k^2), k^2]`` float64 of +-1: bit ``i`` of row ``m`` set means
        site ``i`` is +1 (the state codes of ``lsbcore.exact.states``)."""
        bits = (torch.arange(self.n_states).unsqueeze(1) >> torch.arange(self.n)) & 1
        return (2 * bits - 1).to(torch.float64)

    @functools.cached_property
    def state_features(self) -> torch.Tensor:
        """``features(states)``, ``[2^(k^2), T]`` float64."""
        return self.features(self.states)

    def codes(self, x: torch.Tensor) -> torch.Tensor:
        """The row of ``states`` that each block state ``[..., k^2]`` is, ``[...]``."""
        powers = 2 ** torch.arange(self.n, device=x.device)
        return ((x > 0).long() * powers).sum(-1)

    # ----------------------------------------------------------------- the exact conditional
    def exact_log_probs(self, c: torch.Tensor) -> torch.Tensor:
        """``log p(x_B = states[m] | context c)`` for every state, ``[N, 2^(k^2)]`` float64, from
        coefficients ``c [N, T]``: the enumerated conditional, in chunks of instances."""
        c = c.to(torch.float64)
        features = self.state_features.to(c.device)
        out = torch.empty(c.shape[0], self.n_states, dtype=torch.float64, device=c.device)
        chunk = max(1, MAX_EXACT_VALUES // self.n_states)
        for first in range(0, c.shape[0], chunk):
            log_w = c[first : first + chunk] @ features.T  # [n, M]
            out[first : first + chunk] = torch.log_softmax(log_w, 1)
        return out

    def exact_samples(self, c: torch.Tensor, generator: torch.Generator, draws: int = 1):
        """``draws`` exact samples of the block per instance, ``[N, draws, k^2]``, from the
        enumerated conditional (inverse CDF on the generator's uniforms)."""
        log_p = self.exact_log_probs(c)  # [N, M]
        index = torch.multinomial(log_p.exp(), draws, replacement=True, generator=generator)
        return self.states.to(c.device)[index]


def _terms(k: int) -> tuple[list[list[int]], list[str]]:
    """The motif's terms as site triples (padded by repetition) and their kinds."""
    site = lambda r, c: r * k + c  # noqa: E731 (a one-line index map)
    terms, kinds = [], []

    def add(kind, *sites):
        padded = list(sites) + [k * k] * (3 - len(sites))
        terms.append(padded)
        kinds.append(kind)

    for r in range(k):
        for c in range(k):
            add("site", site(r, c))
    for r in range(k):
        for c in range(k - 1):
            add("horizontal", site(r, c), site(r, c + 1))
    for r in range(k - 1):
        for c in range(k):
            add("vertical", site(r, c), site(r + 1, c))
    for r in range(k - 1):
        for c in range(k - 1):
            add("anti-diagonal", site(r, c + 1), site(r + 1, c))
    for r in range(k - 1):
        for c in range(k - 1):
            add("triangle", site(r, c + 1), site(r + 1, c), site(r + 1, c + 1))
    return terms, kinds
