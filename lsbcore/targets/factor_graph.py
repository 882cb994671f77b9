"""Binary factor graphs: any product of factors over small scopes, zeros included.

A ``FactorGraph`` on ``n`` binary variables is

    log p~(x) = sum_f T_f[index_f(x)],        T_f: a log-table over the scope of factor f,

with up to 16 variables per scope. The table of a scope ``(v_1, ..., v_k)`` is indexed by the
bits ``u = (1 + x) / 2`` of its values, **the last variable of the scope changing fastest** (the
order of the UAI inference competition's files): ``index = sum_p u_{v_p} 2^(k - p)``. Entries of
``-inf`` are states of zero probability and are handled exactly, by counting them apart from the
finite part of the sum:

- ``log_prob(x)`` is ``-inf`` where any factor is at a zero entry, never NaN;
- a log-ratio (``flip_log_ratios``, ``log_ratio``) from a state of positive probability is
  ``-inf`` for a move into zero mass, so such a move is never accepted; from a state of zero
  probability (which a sampler never holds: its chains start where ``p~ > 0``) it is ``+inf`` for
  a move into positive mass and ``0`` for a move that stays in zero mass (``0/0`` read as 1:
  neither state is preferred), so a Gibbs update there leaves zero mass where it can;
- ``"gradient"`` is provided where every table is finite: the multilinear extension of each
  log-table over its scope (exact at the corners of ``[-1, 1]^k``), differentiated by autograd;
  linear in each variable, so at a state of +-1 the first-order ratios ``-2 x_i d_i`` are the
  exact flip log-ratios (the compiled FLSB and GWG steps rest on it);
- ``start()`` finds states of positive probability (draws in index order from the factors each
  variable completes, exact ancestral sampling for a Bayesian network numbered parents first,
  then greedy repair with random restarts, within a budget of seconds), or says in a sentence
  that it found none.

Factors are grouped by arity and scored for all chains and all factors of a group at once.
``from_uai`` reads the competition's ``MARKOV`` and ``BAYES`` files (``lsbcore.targets.uai``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from lsbcore.checks import integer
from lsbcore.targets.base import MAX_LOCAL_FIELD, MAX_SITES, MAX_VALUES, Target, check_layout
from lsbcore.targets.factor_moves import (
    Incidence,
    Neighbourhoods,
    build_incidence,
    build_neighbourhoods,
    move_change,
    update_flip_scores,
)
from lsbcore.targets.uai import MAX_ARITY, MAX_FACTORS, UAIModel, read_uai

# The search of start(): restarts from fresh draws, each followed by this many repairing flips
# per variable (plus a few), and the share of its flips that go to a random variable of a violated
# factor instead of the best one (the random walk that leaves a local minimum)
START_RESTARTS = 20
START_FLIPS_PER_VARIABLE = 4
START_NOISE = 0.2
# ... and the wall-clock seconds that the whole search (start's, or into_support's) may take before
# it gives up: a file whose factors each allow some values but together forbid every state would
# otherwise keep the search going for minutes (20 restarts of 4n + 10 flips: 146 s for 2,000
# variables). The library's default is generous, so that a loaded machine never turns a search
# that succeeds into a refusal; a page that waits on a visitor's upload passes its own (the
# dashboard: 1 s). The budget only decides when the search gives up; a search that ends within
# it finds the same states with or without it.
START_SECONDS = 30.0
# into_support's repair from a chain's own state stops after this many flips without progress
REPAIR_PATIENCE = 50
# A move is rescored from the factors it touches when at most 1 / LOCAL_SHARE of the chains'
# sites changed; beyond that, the whole network's few large gathers are cheaper
LOCAL_SHARE = 8


@dataclass(frozen=True)
class SupportMoves:
    """What ``FactorGraph.into_support`` did: the chains it ``moved`` (those at zero mass, in
    order), the repairing ``flips`` each of them took (restarts' flips included), those that
    ``restarted`` from fresh draws and those that took another chain's state (``donated``)."""

    moved: tuple[int, ...]
    flips: tuple[int, ...]
    restarted: tuple[int, ...]
    donated: tuple[int, ...]
    n_chains: int

    def sentence(self) -> str | None:
        """One sentence for a page, or None when no chain moved."""
        if not self.moved:
            return None
        k, n = len(self.moved), self.n_chains
        where = "chain" if n == 1 else "chains"  # "1 of 5 chains", "1 of 1 chain"
        each = "it was" if k == 1 else "each was"
        mean = sum(self.flips) / k
        how = f"greedy repair, {mean:.3g} flips on average"
        if k == 1:
            flips = self.flips[0]
            how = f"greedy repair, {flips} {'flip' if flips == 1 else 'flips'}"
        others = []
        if self.restarted:
            others.append(f"{len(self.restarted)} of them after a restart from fresh draws")
        if self.donated:
            others.append(f"{len(self.donated)} by taking a state another chain found")
        extra = f" ({'; '.join(others)})" if others else ""
        return (
            f"{k} of {n} {where} started where p~ = 0 (a hard zero of the network); {each} moved "
            f"to a state of positive probability by {how}{extra}, before sampling began, and "
            "those moves are not counted as steps or evaluations."
        )


@dataclass(frozen=True)
class _Arity:
    """The factors of one arity ``k``, laid out for gathers (``F`` factors)."""

    k: int
    scopes: torch.Tensor  # [F, k] variable indices
    finite: torch.Tensor  # [F * 2^k] the log-tables with -inf read as 0
    zero: torch.Tensor  # [F * 2^k] 1 where a table is -inf (zero mass), else 0
    offsets: torch.Tensor  # [F] where each factor's table starts in the flat tables
    place: torch.Tensor  # [k] 2^(k - 1 - p): the last variable of a scope is the lowest bit

    def to(self, device: torch.device) -> _Arity:
        scopes, finite, zero, offsets, place = (
            t.to(device) for t in (self.scopes, self.finite, self.zero, self.offsets, self.place)
        )
        return _Arity(self.k, scopes, finite, zero, offsets, place)


class FactorGraph(Target):
    """A binary factor graph (see the module docstring).

    ``scopes`` is a sequence of ``F`` sequences of distinct variable indices in ``[0, n)`` (0 to
    16 each); ``log_tables`` the ``F`` log-tables, of ``2^k`` entries each (``-inf`` allowed,
    ``NaN`` and ``+inf`` not). ``shape`` lays the variables out for drawing (by default a row).
    """

    def __init__(self, n_variables: int, scopes, log_tables, shape=None):
        n = integer(n_variables, "n_variables", 1, MAX_SITES)
        scopes, tables = _check_factors(n, scopes, log_tables)
        self.n_sites = self.n_variables = n
        self.shape = check_layout(shape, n, "variables")
        self.scopes = tuple(tuple(int(v) for v in scope) for scope in scopes)
        self.log_tables = tuple(tables)
        finite = all(bool(torch.isfinite(t).all()) for t in tables)
        self.provides = frozenset({"incremental", "gradient"} if finite else {"incremental"})
        self._has_zeros = not finite
        self._groups = {torch.device("cpu"): _group(self.scopes, self.log_tables)}
        self._incidence: dict[torch.device, Incidence] = {}  # built on the first move
        self._neighbourhoods: Neighbourhoods | None = None  # built for the first compiled step
        self._ratio_bound: float | None = None

    @classmethod
    def from_uai(cls, path_or_text) -> FactorGraph:
        """A factor graph from a UAI competition ``MARKOV`` or ``BAYES`` file (a path), its
        text, or a ``UAIModel`` read already (``read_uai_upload``); see ``lsbcore.targets.uai``
        for what is read and what is refused."""
        model = path_or_text if isinstance(path_or_text, UAIModel) else read_uai(path_or_text)
        return cls(model.n_variables, model.scopes, model.log_tables)

    @property
    def n_factors(self) -> int:
        return len(self.scopes)

    def describe(self) -> str:
        return (
            f"a factor graph of {self.n_variables:,} binary variables and "
            f"{self.n_factors:,} factors"
        )

    def same_graph(self, other: Target) -> bool:
        return isinstance(other, FactorGraph) and (other.scopes, other.shape) == (
            self.scopes,
            self.shape,
        )

    def _on(self, device: torch.device) -> list[_Arity]:
        if device not in self._groups:
            self._groups[device] = [g.to(device) for g in self._groups[torch.device("cpu")]]
        return self._groups[device]

    def _moves_on(self, device: torch.device) -> Incidence:
        if device not in self._incidence:
            cpu = torch.device("cpu")
            if cpu not in self._incidence:
                self._incidence[cpu] = build_incidence(self.n_sites, self.scopes, self.log_tables)
            self._incidence[device] = self._incidence[cpu].to(device)
        return self._incidence[device]

    def incidence(self) -> Incidence:
        """Which factors touch which variables, on the CPU (the compiled steps read it)."""
        return self._moves_on(torch.device("cpu"))

    def neighbourhoods(self) -> Neighbourhoods:
        """Each variable's neighbourhood through its factors, on the CPU (built once)."""
        if self._neighbourhoods is None:
            self._neighbourhoods = build_neighbourhoods(self.incidence())
        return self._neighbourhoods

    def ratio_bound(self) -> float:
        """A bound on every finite flip log-ratio ``|s_i|``: the largest, over the variables, sum
        of the spans (largest minus smallest finite entry) of the tables that hold them (the
        compiled learning kernels' range check)."""
        if self._ratio_bound is None:
            span = torch.zeros(self.n_sites, dtype=torch.float64)
            for scope, table in zip(self.scopes, self.log_tables, strict=True):
                finite = table[torch.isfinite(table)]
                if len(scope) and finite.numel():
                    span[list(scope)] += finite.max() - finite.min()
            self._ratio_bound = float(span.max())
        return self._ratio_bound

    def _local(self, x_old: torch.Tensor, x_new: torch.Tensor) -> bool:
        """Whether a move is rescored from the factors it touches: on the CPU (elsewhere the
        whole network in a few kernels, with no host read), when few sites changed."""
        if x_old.device.type != "cpu":
            return False
        return int((x_old != x_new).sum()) * LOCAL_SHARE <= x_old.numel()

    # ----------------------------------------------------------------- scores
    def _scores(self, flat: torch.Tensor):
        """Finite part ``[B]`` and number of zero-mass factors ``[B]`` of each state."""
        finite = flat.new_zeros(flat.shape[0])
        zeros = flat.new_zeros(flat.shape[0])
        bits = (flat > 0).long()
        for g in self._on(flat.device):
            index = g.offsets + (bits[:, g.scopes] * g.place).sum(2)  # [B, F]
            finite += g.finite[index].sum(1)
            zeros += g.zero[index].sum(1)
        return finite, zeros

    def _zero_counts(self, flat: torch.Tensor) -> torch.Tensor:
        """The number of zero-mass factors ``[B]`` of each state (from the groups that have
        zero entries)."""
        zeros = flat.new_zeros(flat.shape[0])
        if not self._has_zeros:
            return zeros
        bits = (flat > 0).long()
        for g in self._on(flat.device):
            if bool(g.zero.any()):
                zeros += g.zero[g.offsets + (bits[:, g.scopes] * g.place).sum(2)].sum(1)
        return zeros

    def _flip_scores(self, flat: torch.Tensor):
        """``_scores`` of the states and the change of both under each single flip ``[B, n]``."""
        b = flat.shape[0]
        finite = flat.new_zeros(b)
        zeros = flat.new_zeros(b)
        d_finite = torch.zeros_like(flat)
        d_zeros = torch.zeros_like(flat)
        bits = (flat > 0).long()
        for g in self._on(flat.device):
            index = g.offsets + (bits[:, g.scopes] * g.place).sum(2)  # [B, F]
            finite += g.finite[index].sum(1)
            zeros += g.zero[index].sum(1)
            flipped = (index - g.offsets).unsqueeze(2) ^ g.place  # [B, F, k]: each bit flipped
            flipped = flipped + g.offsets.unsqueeze(1)
            sites = g.scopes.reshape(1, -1).expand(b, -1)
            d_finite.scatter_add_(
                1, sites, (g.finite[flipped] - g.finite[index].unsqueeze(2)).reshape(b, -1)
            )
            d_zeros.scatter_add_(
                1, sites, (g.zero[flipped] - g.zero[index].unsqueeze(2)).reshape(b, -1)
            )
        return finite, zeros, d_finite, d_zeros

    # ----------------------------------------------------------------- the protocol
    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        finite, zeros = self._scores(self._flat(x))
        return torch.where(zeros > 0, -math.inf, finite)

    def log_ratio(self, x: torch.Tensor, x_new: torch.Tensor) -> torch.Tensor:
        """``log p~(x_new) - log p~(x)``, with the zero-mass rule of the module docstring; a
        move of few sites is scored from the factors it touches only."""
        flat, flat_new = self._flat(x), self._flat(x_new)
        if self._local(flat, flat_new):
            d_finite, d_zeros = move_change(self._moves_on(flat.device), flat, flat_new)
            zeros = self._zero_counts(flat)
            return _log_ratio(d_finite, zeros, zeros + d_zeros)
        finite, zeros = self._scores(flat)
        finite_new, zeros_new = self._scores(flat_new)
        return _log_ratio(finite_new - finite, zeros, zeros_new)

    def flip_log_ratios(self, x: torch.Tensor) -> torch.Tensor:
        _, zeros, d_finite, d_zeros = self._flip_scores(self._flat(x))
        zeros = zeros.unsqueeze(1)
        return _log_ratio(d_finite, zeros, zeros + d_zeros).view_as(x)

    # ----------------------------------------------------------------- incremental ratios
    def ratio_cache(self, x: torch.Tensor):
        """Per chain: the change of the finite part and of the zero-mass count under each
        single flip ``[B, n]``, and the state's zero-mass count ``[B]``."""
        _, zeros, d_finite, d_zeros = self._flip_scores(self._flat(x))
        return d_finite, d_zeros, zeros

    def flip_log_ratios_after(self, x_old: torch.Tensor, x_new: torch.Tensor, s_old, cache):
        """``s`` at ``x_new`` from the cache at ``x_old``: only the factors that touch a changed
        site are read, and only their variables' scores change (``factor_moves``)."""
        if cache is None or not self._local(x_old, x_new):
            cache = self.ratio_cache(x_new)
        else:
            cache = update_flip_scores(self._moves_on(x_old.device), x_old, x_new, *cache)
        d_finite, d_zeros, zeros = cache
        zeros = zeros.unsqueeze(1)
        return _log_ratio(d_finite, zeros, zeros + d_zeros), cache

    def _extension(self, flat: torch.Tensor) -> torch.Tensor:
        """The multilinear extension of ``log p~`` at real ``flat [B, n]`` (finite tables):
        each table contracted one variable at a time, last variable (lowest bit) first."""
        total = flat.new_zeros(flat.shape[0])
        for g in self._on(flat.device):
            u = 0.5 * (1.0 + flat[:, g.scopes])  # [B, F, k]
            table = g.finite.view(1, len(g.offsets), -1)  # [1, F, 2^k]
            for p in reversed(range(g.k)):
                pair = table.unflatten(2, (-1, 2))  # [., F, 2^p, 2]: variable p is the last bit
                table = pair[..., 0] + (pair[..., 1] - pair[..., 0]) * u[:, :, p : p + 1]
            total = total + table.reshape(-1, len(g.offsets)).sum(1)
        return total

    def grad_log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """The gradient of the multilinear extension of every log-table (finite tables only)."""
        if not self.offers("gradient"):
            raise ValueError(
                f"{self.describe()} has tables with zero entries (-inf), so log p~ has no "
                "differentiable extension to take a gradient of."
            )
        with torch.enable_grad():
            real_x = self._flat(x).detach().requires_grad_(True)
            (grad,) = torch.autograd.grad(self._extension(real_x).sum(), real_x)
        return grad.view_as(x)

    # ----------------------------------------------------------------- starting states
    def start(
        self, n_chains: int, generator: torch.Generator, seconds: float = START_SECONDS
    ) -> torch.Tensor:
        """States ``[n_chains, n]`` of positive probability. Uniform draws first; a chain at zero
        mass then draws its variables in index order, each from the factors that it completes
        (ancestral sampling, for a Bayesian network numbered parents first), and a greedy repair
        follows (flip the variable that leaves the fewest zero-mass factors, ties broken at
        random; now and then a random variable of a violated factor), with random restarts.
        Chains still at zero mass at the end take a state another chain found; if no chain found
        one, a ValueError says so. The search stops where it is after ``seconds`` of wall-clock
        time (then as at the end: chains at zero mass take another's state, or a ValueError)."""
        n_chains = integer(n_chains, "n_chains", 1, 100_000)
        deadline = _deadline(seconds)
        for f, table in enumerate(self.log_tables):
            if not bool(torch.isfinite(table).any()):
                raise ValueError(
                    f"factor {f} (over variables {list(self.scopes[f])}) gives every value of "
                    "its scope probability zero, so no state has positive probability."
                )
        x = _uniform(n_chains, self.n_sites, generator)
        flips = START_FLIPS_PER_VARIABLE * self.n_sites + 10
        restarts = 0
        for _ in range(START_RESTARTS):
            stuck = (self._scores(x)[1] > 0).unsqueeze(1)
            if not bool(stuck.any()):
                return x
            if _past(deadline):
                break
            fresh = self._sequential(_uniform(n_chains, self.n_sites, generator), generator)
            x = self._repair(torch.where(stuck, fresh, x), generator, flips, deadline=deadline)[0]
            restarts += 1
        return self._from_donors(x, flips, restarts, seconds if _past(deadline) else None)[0]

    def _from_donors(self, x: torch.Tensor, flips: int, restarts: int, timed_out=None):
        """``x`` with each chain still at zero mass given, in turn, a state that another chain
        found, and which chains took one; a ValueError if no chain found one, which says how
        far the search went (``restarts`` of up to ``flips`` flips, cut short after
        ``timed_out`` seconds where it ran out of time)."""
        n_chains = len(x)
        _, zeros = self._scores(x)
        found = (zeros == 0).nonzero().flatten()
        if len(found) == 0:
            chains = f"{n_chains} chain{'' if n_chains == 1 else 's'}"
            if timed_out is None:
                raise ValueError(
                    f"found no state of positive probability for {self.describe()}: "
                    f"{restarts} restarts of a search over {chains} "
                    f"({flips} repairing flips each) all ended where some factor gives "
                    "probability zero."
                )
            raise ValueError(
                f"found no state of positive probability for {self.describe()} within the "
                f"search's {timed_out:g} s: {restarts} of its {START_RESTARTS} restarts over "
                f"{chains} (up to {flips} repairing flips each) ended where some factor gives "
                "probability zero, and each factor alone allows some values, so the network "
                "may have no state of positive probability at all."
            )
        # chains that found nothing start from the states others found, in turn
        donor = found[torch.arange(n_chains, device=x.device) % len(found)]
        return torch.where((zeros > 0).unsqueeze(1), x[donor], x), zeros > 0

    def into_support(
        self, x: torch.Tensor, generator: torch.Generator, seconds: float = START_SECONDS
    ):
        """States ``x`` ``[B, *shape]`` with every chain at zero mass moved to positive mass.

        Chains where ``p~(x) > 0`` are kept as they are. Each chain at zero mass is repaired
        greedily from its own state (``start``'s min-conflict flips, counted, given up after
        ``REPAIR_PATIENCE`` flips without a new low in zero-mass factors); a chain the repair
        does not bring to positive mass restarts (``start``'s index-order draws and repair), and
        one still at zero mass after every restart takes a state another chain found (as does
        one still there when ``seconds`` of wall-clock time have run out). Returns the new
        states (shape of ``x``) and a ``SupportMoves`` saying what happened to each."""
        deadline = _deadline(seconds)
        flat = self._flat(x).clone()
        n_chains = len(flat)
        at_zero = self._scores(flat)[1] > 0
        flips_used = torch.zeros(n_chains, dtype=torch.long, device=flat.device)
        restarted = torch.zeros(n_chains, dtype=torch.bool, device=flat.device)
        donated = torch.zeros(n_chains, dtype=torch.bool, device=flat.device)
        if bool(at_zero.any()):
            budget = START_FLIPS_PER_VARIABLE * self.n_sites + 10
            # from its own state, a chain gives up after REPAIR_PATIENCE flips without a new
            # low in zero-mass factors (a ring of forbidden patterns only shifts them): the
            # restarts' ordered draws then start far closer to the support
            flat, flips_used = self._repair(flat, generator, budget, REPAIR_PATIENCE, deadline)
            restarts = 0
            for _ in range(START_RESTARTS):
                stuck = self._scores(flat)[1] > 0
                if not bool(stuck.any()) or _past(deadline):
                    break
                restarted |= stuck
                fresh = self._sequential(_uniform(n_chains, self.n_sites, generator), generator)
                flat = torch.where(stuck.unsqueeze(1), fresh, flat)
                flat, more = self._repair(flat, generator, budget, deadline=deadline)
                flips_used = flips_used + more
                restarts += 1
            if bool((self._scores(flat)[1] > 0).any()):
                timed_out = seconds if _past(deadline) else None
                flat, donated = self._from_donors(flat, budget, restarts, timed_out)
        moves = SupportMoves(
            moved=tuple(int(c) for c in at_zero.nonzero().flatten()),
            flips=tuple(int(flips_used[c]) for c in at_zero.nonzero().flatten()),
            restarted=tuple(int(c) for c in restarted.nonzero().flatten()),
            donated=tuple(int(c) for c in donated.nonzero().flatten()),
            n_chains=n_chains,
        )
        return flat.reshape(x.shape), moves

    def _sequential(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """``x`` with each variable redrawn in index order from the factors whose last variable
        (by index) it is, given the variables before it; a variable whose both values are
        forbidden there keeps its value."""
        bits = (x > 0).long()
        u = torch.rand(x.shape, generator=generator, dtype=x.dtype, device=x.device)
        for v, factors in self._completed():
            log_w = x.new_zeros(len(x), 2)  # log weight of x_v = -1, +1
            for scope, place, bit, table in factors:
                scope, place, table = (t.to(x.device) for t in (scope, place, table))
                index = (bits[:, scope] * place).sum(1) - bits[:, v] * bit  # v's bit cleared
                log_w += torch.stack([table[index], table[index + bit]], 1)
            # P(x_v = +1) = sigmoid(log_w1 - log_w0), with the zeros exact
            gap = log_w[:, 1] - log_w[:, 0]
            p_one = torch.where(
                torch.isneginf(log_w).all(1),
                bits[:, v].to(x.dtype),
                torch.sigmoid(torch.nan_to_num(gap, nan=0.0)),
            )
            bits[:, v] = (u[:, v] < p_one).long()
        return (2 * bits - 1).to(torch.float64)

    def _completed(self):
        """Per variable, the factors it completes in index order: ``(scope, place, bit, table)``
        with ``bit`` its place value in the factor's index (built once)."""
        if not hasattr(self, "_completion"):
            by_last: dict[int, list] = {}
            for scope, table in zip(self.scopes, self.log_tables, strict=True):
                if not scope:
                    continue
                last = max(scope)
                k = len(scope)
                place = 2 ** torch.arange(k - 1, -1, -1, dtype=torch.long)
                bit = 2 ** (k - 1 - scope.index(last))
                entry = (torch.tensor(scope, dtype=torch.long), place, bit, table)
                by_last.setdefault(last, []).append(entry)
            self._completion = sorted(by_last.items())
        return self._completion

    def _repair(
        self, x: torch.Tensor, generator: torch.Generator, flips: int, patience=None, deadline=None
    ):
        """Up to ``flips`` min-conflict flips of every chain at zero mass (see ``start``): the
        states, and the flips each chain took ``[B]``. With ``patience``, a chain whose number
        of zero-mass factors has not reached a new low in that many flips stops (left at zero
        mass, for the caller's fallbacks); past the ``deadline`` (``time.perf_counter``), every
        chain stops."""
        n_chains = len(x)
        chains = torch.arange(n_chains, device=x.device)
        taken = torch.zeros(n_chains, dtype=torch.long, device=x.device)
        lowest = since_low = None
        for _ in range(flips):
            if _past(deadline):
                break
            _, zeros, _, d_zeros = self._flip_scores(x)
            stuck = zeros > 0
            if patience is not None:
                if lowest is None:
                    lowest, since_low = zeros.clone(), torch.zeros_like(taken)
                lower = zeros < lowest
                lowest = torch.minimum(lowest, zeros)
                since_low = torch.where(lower, 0, since_low + 1)
                stuck = stuck & (since_low <= patience)
            if not bool(stuck.any()):
                break
            taken += stuck.long()
            noise = torch.rand(x.shape, generator=generator, dtype=x.dtype, device=x.device)
            best = (d_zeros + 0.5 * noise).argmin(1)  # fewest zero-mass factors, random ties
            violated = self._violated_counts(x)
            weights = torch.where(stuck.unsqueeze(1), violated, torch.ones_like(violated))
            walk = torch.multinomial(weights, 1, generator=generator).squeeze(1)
            coin = torch.rand(n_chains, generator=generator, dtype=x.dtype, device=x.device)
            site = torch.where(coin < START_NOISE, walk, best)
            flipped = x.clone()
            flipped[chains, site] = -flipped[chains, site]
            x = torch.where(stuck.unsqueeze(1), flipped, x)
        return x, taken

    def _violated_counts(self, flat: torch.Tensor) -> torch.Tensor:
        """Per variable, the number of zero-mass factors it belongs to ``[B, n]``."""
        counts = torch.zeros_like(flat)
        bits = (flat > 0).long()
        for g in self._on(flat.device):
            index = g.offsets + (bits[:, g.scopes] * g.place).sum(2)  # [B, F]
            at_zero = g.zero[index].unsqueeze(2).expand(-1, -1, g.k)
            counts.scatter_add_(
                1, g.scopes.reshape(1, -1).expand(len(flat), -1), at_zero.reshape(len(flat), -1)
            )
        return counts


def _deadline(seconds) -> float:
    """The ``time.perf_counter`` reading ``seconds`` from now, after checking them."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise ValueError(f"seconds must be a positive number, got {seconds!r}.")
    if not 0 < seconds < math.inf:
        raise ValueError(f"seconds must be a positive, finite number, got {seconds!r}.")
    return time.perf_counter() + float(seconds)


def _past(deadline) -> bool:
    """Whether the ``time.perf_counter`` reading ``deadline`` has passed (never, for None)."""
    return deadline is not None and time.perf_counter() > deadline


def _uniform(n_chains: int, n: int, generator: torch.Generator) -> torch.Tensor:
    """Uniform states ``[n_chains, n]`` of +-1 on the generator's device."""
    bits = torch.randint(0, 2, (n_chains, n), generator=generator, device=generator.device)
    return (2 * bits - 1).to(torch.float64)


def _log_ratio(d_finite: torch.Tensor, zeros: torch.Tensor, zeros_new: torch.Tensor):
    """``log p~(new) - log p~(old)`` from the finite parts' change and both zero counts: the
    finite change between positive states, ``-inf`` into zero mass, ``+inf`` out of it, ``0``
    between two states of zero mass."""
    old_zero, new_zero = zeros > 0, zeros_new > 0
    into = torch.where(old_zero, 0.0, -math.inf)
    return torch.where(new_zero, into, torch.where(old_zero, math.inf, d_finite))


def _check_factors(n: int, scopes, log_tables):
    """``scopes`` as tuples of ints and ``log_tables`` as float64 tensors, after checking each
    against the sentences of the class docstring."""
    scopes, log_tables = _as_list(scopes, "scopes"), _as_list(log_tables, "log_tables")
    if len(scopes) != len(log_tables):
        raise ValueError(
            f"scopes and log_tables must list the same factors, got {len(scopes)} scopes and "
            f"{len(log_tables)} tables."
        )
    if len(scopes) > MAX_FACTORS:
        raise ValueError(f"{len(scopes):,} factors given; at most {MAX_FACTORS:,} are supported.")
    checked, tables, entries = [], [], 0
    for f, (scope, table) in enumerate(zip(scopes, log_tables, strict=True)):
        scope = _check_scope(f, scope, n)
        entries += 2 ** len(scope)
        if entries > MAX_VALUES:
            raise ValueError(
                f"the tables hold more than {MAX_VALUES:,} entries in all; at most that many "
                "are supported."
            )
        checked.append(scope)
        tables.append(_check_table(f, table, len(scope)))
    return checked, tables


def _as_list(value, name: str) -> list:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise ValueError(f"{name} must be a sequence with one entry per factor.")
    return list(value)


def _check_scope(f: int, scope, n: int) -> tuple[int, ...]:
    array = np.asarray(scope.cpu() if isinstance(scope, torch.Tensor) else scope)
    if array.ndim != 1 or not (array.size == 0 or np.issubdtype(array.dtype, np.integer)):
        raise ValueError(
            f"the scope of factor {f} must be a list of variable indices (integers), got {scope!r}."
        )
    if array.size > MAX_ARITY:
        raise ValueError(
            f"factor {f} has {array.size} variables in its scope; at most {MAX_ARITY} are "
            "supported (its table would have 2^k entries)."
        )
    if array.size and (array.min() < 0 or array.max() >= n):
        raise ValueError(
            f"the scope of factor {f} names variable {int(array[(array < 0) | (array >= n)][0])}"
            f"; variables are numbered 0 to {n - 1}."
        )
    if len(set(array.tolist())) != array.size:
        raise ValueError(
            f"the scope of factor {f} names a variable more than once ({array.tolist()}); each "
            "variable may appear once per scope."
        )
    return tuple(int(v) for v in array)


def _check_table(f: int, table, k: int) -> torch.Tensor:
    if isinstance(table, torch.Tensor):
        values = table.detach().cpu()
    else:
        try:
            values = torch.as_tensor(np.asarray(table, dtype=np.float64))
        except (TypeError, ValueError) as err:
            raise ValueError(f"the log-table of factor {f} must hold real numbers.") from err
    if values.is_complex() or values.dtype == torch.bool:
        raise ValueError(f"the log-table of factor {f} must hold real numbers.")
    values = values.to(torch.float64).reshape(-1)
    if values.numel() != 2**k:
        raise ValueError(
            f"the log-table of factor {f} has {values.numel()} entries; a scope of {k} "
            f"variables needs 2^{k} = {2**k}."
        )
    if bool(torch.isnan(values).any()):
        raise ValueError(f"the log-table of factor {f} holds NaN; every entry must be a number.")
    if bool((values == math.inf).any()):
        raise ValueError(
            f"the log-table of factor {f} holds +inf; entries must be finite or -inf "
            "(probability zero)."
        )
    if bool(((values.abs() > MAX_LOCAL_FIELD) & torch.isfinite(values)).any()):
        raise ValueError(
            f"the log-table of factor {f} has a finite entry beyond {MAX_LOCAL_FIELD:g} in "
            "magnitude; use -inf for probability zero."
        )
    return values.clone()


def _group(scopes, tables) -> list[_Arity]:
    """The factors grouped by arity, each group's tables flattened for gathers."""
    groups = []
    for k in sorted({len(s) for s in scopes}):
        ids = [f for f, s in enumerate(scopes) if len(s) == k]
        stacked = torch.stack([tables[f] for f in ids])  # [F, 2^k]
        zero = stacked == -math.inf
        scope_rows = torch.tensor([scopes[f] for f in ids], dtype=torch.long)
        groups.append(
            _Arity(
                k=k,
                scopes=scope_rows.reshape(len(ids), k),
                finite=torch.where(zero, 0.0, stacked).reshape(-1),
                zero=zero.to(torch.float64).reshape(-1),
                offsets=torch.arange(len(ids), dtype=torch.long) * 2**k,
                place=2 ** torch.arange(k - 1, -1, -1, dtype=torch.long),
            )
        )
    return groups


__all__ = ["FactorGraph", "SupportMoves"]
