"""A grid factor graph's block conditionals as motif coefficients
(``lsbcore.methods.block_proposals.motif``).

For ``log p~(x) = sum_f T_f[x_f]`` (``lsbcore.targets.factor_graph``) laid out on an ``H x W``
grid, the conditional of a tile ``B`` given the rest is the sum of the factors that touch ``B``,
each with its variables outside ``B`` fixed at ``x``. Such a factor, restricted to its variables
``V = scope ∩ B``, is a function on ``{-1, 1}^V``, and its Walsh (multilinear) expansion

    T_f(x_V, x_out) = sum_{S ⊆ V} a_S prod_{i in S} x_i,    a_S = 2^-|V| sum_{x_V} T_f(x_V, x_out)
                                                                    prod_{i in S} x_i,

gives a coefficient for each subset ``S`` of the tile: added to the motif term whose sites are
``S`` (``S`` empty is a constant of the conditional, dropped). The coefficients read only the
factors' variables outside ``B`` (the table rows they pick), as a proposal's context must.

A factor graph is accepted when every such ``S``, in every tile of every offset, is a motif term:
one site, two horizontal, vertical or anti-diagonal neighbours, or a site with its upper and left
neighbours. The grid Bayesian networks of ``lsbcore.targets.grid_network`` (factors over
``(up, left, child)``) are; a factor joining diagonal neighbours ``(r, c)`` and ``(r + 1, c + 1)``,
or two sites two apart inside a block, is refused in a sentence naming the sites.

Zero entries (``-inf``, the hard zeros of ``epsilon = 0`` networks) have no Walsh expansion; for
the coefficients only, each is read as ``ZERO_GAP`` below the least finite entry of its table
(see ``ZERO_GAP``). The proposal then puts a little mass on moves into zero mass, and those are
refused: ``log_ratios`` is exact, read from the tables themselves, and ``-inf`` for such a move.

Everything is batched over chains and tiles: the tiles' incidences with the factors (which
factor touches which tile, padded to the same number of slots per tile; where its variables lie
in the tile; which term each subset adds to) are laid out once per tile selection (a
``Blocks``: the sampler keeps one per offset and colour), cached, and per arity of factor a step
is one gather of the distinct factors' table rows at ``x``, one batched product for the part of
each row that the tile's own sites set, and for the coefficients one ``2^a x 2^a`` Walsh
product and one scatter-add. A tile listed several times (``tile_law``) gets its own slots,
and its factors' rows at ``x`` are read once.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, fields

import torch

from lsbcore.methods.block_proposals.motif import GridMotif
from lsbcore.methods.block_proposals.tiling import Blocks, Tiling

#: A zero entry of a log-table (``-inf``) is read, for the coefficients only, as this many nats
#: below the least finite entry of its table: ``log 1000``, a thousand times less likely than the
#: table's least likely allowed value. A conditional with ``-inf`` coefficients has no finite
#: expansion for the network to read; with this reading a deterministic row ``(1, 0)`` of an
#: ``epsilon = 0`` grid network gives the coefficients of the default ``epsilon = 1e-3`` row
#: (``(0.999, 0.001)``, to 1e-3), so the proposal sees the networks it is meant for. The sampler
#: stays exact: its ratios read the true tables.
ZERO_GAP = math.log(1000.0)
#: Tile selections whose layouts are kept (a sampler uses one per offset and colour).
MAX_CACHED_LAYOUTS = 256


@dataclass(frozen=True)
class _Group:
    """The factors of one arity ``a`` (``F`` of them), their tables flattened for gathers."""

    a: int
    blank: int  # where the all-zero table that unused slots read starts (F * 2^a)
    scopes: torch.Tensor  # [F, a] variable indices
    reading: torch.Tensor  # [F * 2^a] the log-tables with -inf read per ZERO_GAP (coefficients)
    finite: torch.Tensor  # [F * 2^a] the log-tables with -inf read as 0 (ratios)
    zero: torch.Tensor  # [F * 2^a] 1 where a table is -inf (zero mass), else 0
    place: torch.Tensor  # [a] 2^(a - 1 - p): the scope's last variable is the table's lowest bit
    walsh: torch.Tensor  # [2^a, 2^a] prod_{p in S} x_p(j) / 2^a, rows j (table rows), columns S
    site_ptr: torch.Tensor  # [n + 1] where each variable's factors start in site_factors
    site_factors: torch.Tensor  # [F * a] the factors of each variable, by variable


@dataclass(frozen=True)
class _Layout:
    """One arity's incidences with the ``T`` tiles of a selection, ``J`` slots per tile (the
    most factors any of its tiles meets; unused slots read an all-zero table)."""

    used_scopes: torch.Tensor  # [U, a] the distinct factors met (a tile listed twice: once)
    used_at: torch.Tensor  # [U] where their tables start in the flat tables
    which: torch.Tensor  # [T, J] the distinct factor in each slot (U: the all-zero table)
    in_weights: torch.Tensor  # [T, k^2, J] the place of each tile site in the slot's row index
    rows: torch.Tensor  # [T, J, 2^a] table row j with the bits outside the tile cleared
    slots: torch.Tensor  # [T * J * 2^a] where subset S adds: tile * (terms + 1) + term, or dump

    def to(self, device: torch.device) -> _Layout:
        return _Layout(*(getattr(self, f).to(device) for f in self.__dataclass_fields__))


class FactorBlocks:
    """Coefficients and exact log-ratios of ``k x k`` tiles of a ``FactorGraph`` grid (see the
    module docstring); refuses, in a sentence, a factor that no motif term covers in a tile."""

    def __init__(self, target, motif: GridMotif, tiling: Tiling):
        self.target, self.motif, self.tiling = target, motif, tiling
        self.height, self.width = tiling.height, tiling.width
        # the motif term of each set of block sites (a bit mask over the k^2 sites), -1 if none
        one_hot = torch.cat([2 ** torch.arange(motif.n), torch.zeros(1, dtype=torch.long)])
        masks = one_hot[motif.terms].sum(1)
        self._term_of = torch.full((2**motif.n,), -1, dtype=torch.long)
        self._term_of[masks] = torch.arange(motif.n_terms)
        self._groups = _group(target.n_sites, target.scopes, target.log_tables)
        self._devices: dict[torch.device, list[_Group]] = {torch.device("cpu"): self._groups}
        self._layouts: OrderedDict = OrderedDict()
        for offset in range(len(tiling.offsets)):  # every tile of every offset: refuse early
            blocks = tiling.blocks(offset)
            if len(blocks.tops):
                self._lay_out(blocks.tops)

    # ----------------------------------------------------------------- layouts
    def _on(self, device: torch.device) -> list[_Group]:
        if device not in self._devices:
            self._devices[device] = [
                _Group(g.a, g.blank, *(getattr(g, f.name).to(device) for f in fields(g)[2:]))
                for g in self._groups
            ]
        return self._devices[device]

    def _layout(self, blocks: Blocks, device: torch.device) -> list[_Layout]:
        """The layouts of ``blocks`` on ``device``, cached per ``Blocks`` object."""
        key = (id(blocks), device)
        entry = self._layouts.get(key)
        if entry is None or entry[0] is not blocks:
            layouts = [lay.to(device) for lay in self._lay_out(blocks.tops.cpu())]
            entry = (blocks, layouts)  # the Blocks is kept so that its id is not reused
            self._layouts[key] = entry
            if len(self._layouts) > MAX_CACHED_LAYOUTS:
                self._layouts.popitem(last=False)
        else:
            self._layouts.move_to_end(key)
        return entry[1]

    def _lay_out(self, tops: torch.Tensor) -> list[_Layout]:
        """Every (tile, factor) incidence of the tiles at ``tops [T, 2]`` (a tile listed twice
        gets its own incidences), by arity; refuses a subset that no motif term covers."""
        k, w, n_terms = self.motif.k, self.width, self.motif.n_terms
        n_tiles = len(tops)
        cell = (torch.arange(k).unsqueeze(1) * w + torch.arange(k).unsqueeze(0)).reshape(-1)
        sites = ((tops[:, 0] * w + tops[:, 1]).unsqueeze(1) + cell).reshape(-1)  # [T * k^2]
        tile_of_site = torch.arange(n_tiles).repeat_interleave(k * k)
        layouts = []
        for g in self._groups:
            n_factors = len(g.scopes)
            counts = g.site_ptr[sites + 1] - g.site_ptr[sites]
            first = torch.cumsum(counts, 0) - counts
            within = torch.arange(int(counts.sum())) - first.repeat_interleave(counts)
            factor = g.site_factors[g.site_ptr[sites].repeat_interleave(counts) + within]
            pairs = torch.unique(tile_of_site.repeat_interleave(counts) * n_factors + factor)
            tile, factor = pairs // n_factors, pairs % n_factors  # sorted by tile
            scopes = g.scopes[factor]  # [I, a]
            dr = scopes // w - tops[tile, 0].unsqueeze(1)
            dc = scopes % w - tops[tile, 1].unsqueeze(1)
            inside = (dr >= 0) & (dr < k) & (dc >= 0) & (dc < k)
            local = torch.where(inside, dr * k + dc, 0)
            subsets = torch.arange(2**g.a)
            member = (subsets.unsqueeze(1) & g.place) > 0  # [2^a, a]: position p in subset S
            within_tile = ~(member.unsqueeze(0) & ~inside.unsqueeze(1)).any(2)  # [I, 2^a]
            site_bits = torch.where(inside, 2**local, 0)  # [I, a]
            masks = (member.unsqueeze(0) * site_bits.unsqueeze(1)).sum(2)  # [I, 2^a]
            term = self._term_of[masks]
            uncovered = within_tile & (masks > 0) & (term < 0)
            if bool(uncovered.any()):
                self._refuse(scopes, member, uncovered)
            # the incidences padded to J slots per tile
            per_tile = torch.bincount(tile, minlength=n_tiles)
            slot_of = torch.arange(len(tile)) - (torch.cumsum(per_tile, 0) - per_tile)[tile]
            n_slots = max(1, int(per_tile.max()) if n_tiles else 1)
            used, inverse = torch.unique(factor, return_inverse=True)
            which = torch.full((n_tiles, n_slots), len(used), dtype=torch.long)
            which[tile, slot_of] = inverse
            in_place = torch.where(inside, g.place, 0)  # [I, a]
            in_weights = torch.zeros(n_tiles, k * k, n_slots, dtype=torch.float64)
            index = (tile * k * k).unsqueeze(1) + local  # [I, a] rows of (tile, tile site)
            in_weights.view(-1, n_slots).index_put_(
                (index.reshape(-1), slot_of.repeat_interleave(g.a)),
                in_place.reshape(-1).to(torch.float64),
                accumulate=True,
            )
            rows = torch.zeros(n_tiles, n_slots, 2**g.a, dtype=torch.long)
            rows[tile, slot_of] = subsets.unsqueeze(0) & in_place.sum(1, keepdim=True)
            slot = torch.full((n_tiles, n_slots, 2**g.a), n_terms, dtype=torch.long)
            slot[tile, slot_of] = torch.where(within_tile & (term >= 0), term, n_terms)
            base = (torch.arange(n_tiles) * (n_terms + 1)).view(-1, 1, 1)
            layouts.append(
                _Layout(
                    used_scopes=g.scopes[used],
                    used_at=used * 2**g.a,
                    which=which,
                    in_weights=in_weights,
                    rows=rows,
                    slots=(base + slot).reshape(-1),  # the rest (constants, pads): the dump
                )
            )
        return layouts

    def _refuse(self, scopes, member, uncovered) -> None:
        """A sentence naming the sites of the smallest subset that no motif term covers."""
        size = member.sum(1)  # [2^a]
        where = uncovered.nonzero()
        i, s = where[torch.argmin(size[where[:, 1]])].tolist()
        named = [f"({v // self.width}, {v % self.width})" for v in scopes[i][member[s]].tolist()]
        joined = " and ".join(named) if len(named) == 2 else ", ".join(named[:-1])
        if len(named) > 2:
            joined += f" and {named[-1]}"
        k = self.motif.k
        raise ValueError(
            f"neural-block's {k} x {k} blocks model factors over single sites, horizontal, "
            "vertical or anti-diagonal neighbours, and a site with its upper and left "
            f"neighbours; this factor graph has a factor joining sites {joined} inside a block."
        )

    # ----------------------------------------------------------------- the protocol
    def _indices(self, g: _Group, lay: _Layout, bits: torch.Tensor, tiles: torch.Tensor):
        """Each slot's table row at ``x`` (``[B, T, J]``) and the part of it that the tile's
        own sites set (``[B, T, J]``), from ``bits [B, n]`` and the tiles' bits ``[B, T, k^2]``
        (float64 0/1: the part inside is a product with ``in_weights``, exact in float64)."""
        full = lay.used_at + (bits[:, lay.used_scopes] * g.place).sum(2)  # [B, U]
        full = torch.cat([full, full.new_full((len(full), 1), g.blank)], 1)
        inside = torch.bmm(tiles.transpose(0, 1), lay.in_weights).transpose(0, 1)  # [B, T, J]
        return full[:, lay.which], inside.long()  # whole numbers in float64: exact

    def coefficients(self, x: torch.Tensor, blocks: Blocks) -> torch.Tensor:
        """The motif coefficients of every chain's tiles, ``[B, T_b, n_terms]`` float64, from
        ``x [B, n]`` (+-1): the Walsh coefficients of each tile's conditional, reading only
        the sites outside the tile (zero entries read per ``ZERO_GAP``)."""
        n_chains, n_tiles, width = x.shape[0], len(blocks.tops), self.motif.n_terms + 1
        bits = (x > 0).long()
        tiles = bits[:, blocks.sites].to(torch.float64)
        c = torch.zeros(n_chains, n_tiles * width, dtype=torch.float64, device=x.device)
        for g, lay in zip(self._on(x.device), self._layout(blocks, x.device), strict=True):
            at_x, inside = self._indices(g, lay, bits, tiles)
            values = g.reading[(at_x - inside).unsqueeze(3) + lay.rows]  # [B, T, J, 2^a]
            c.index_add_(1, lay.slots, (values @ g.walsh).reshape(n_chains, -1))
        return c.view(n_chains, n_tiles, width)[..., :-1]

    def log_ratios(self, x: torch.Tensor, blocks: Blocks, y: torch.Tensor, c: torch.Tensor):
        """``log p~(x with tile t set to y[:, t]) - log p~(x)`` for each tile alone (``y [B,
        T_b, k^2]``), ``[B, T_b]``: exact, from the factor tables (``c`` is not read); ``-inf``
        for a move into zero mass from a state of positive probability (from a state of zero
        mass: ``+inf`` out of it, 0 within it, as ``FactorGraph.log_ratio`` reads them)."""
        n_chains, n_tiles = x.shape[0], len(blocks.tops)
        bits = (x > 0).long()
        tiles = bits[:, blocks.sites].to(torch.float64)
        y_tiles = (y > 0).to(torch.float64)
        d_finite = torch.zeros(n_chains, n_tiles, dtype=torch.float64, device=x.device)
        zeros_old, zeros_new = torch.zeros_like(d_finite), torch.zeros_like(d_finite)
        for g, lay in zip(self._on(x.device), self._layout(blocks, x.device), strict=True):
            old, inside = self._indices(g, lay, bits, tiles)
            y_inside = torch.bmm(y_tiles.transpose(0, 1), lay.in_weights).transpose(0, 1)
            new = old - inside + y_inside.long()
            d_finite += (g.finite[new] - g.finite[old]).sum(2)
            zeros_old += g.zero[old].sum(2)
            zeros_new += g.zero[new].sum(2)
        old_zero, new_zero = zeros_old > 0, zeros_new > 0
        into_zero = torch.where(old_zero, 0.0, -math.inf)
        return torch.where(new_zero, into_zero, torch.where(old_zero, math.inf, d_finite))


def _group(n: int, scopes, tables) -> list[_Group]:
    """The factors of positive arity grouped by arity (a constant factor changes no ratio)."""
    groups = []
    for a in sorted({len(s) for s in scopes} - {0}):
        ids = [f for f, s in enumerate(scopes) if len(s) == a]
        blank = torch.zeros(1, 2**a, dtype=torch.float64)  # read by unused slots
        stacked = torch.cat([torch.stack([tables[f] for f in ids]), blank])  # [F + 1, 2^a]
        zero = stacked == -math.inf
        least = torch.where(zero, math.inf, stacked).min(1, keepdim=True).values
        least = torch.where(torch.isfinite(least), least, 0.0)  # an all-zero table: start refuses
        rows = torch.tensor([scopes[f] for f in ids], dtype=torch.long).reshape(len(ids), a)
        place = 2 ** torch.arange(a - 1, -1, -1)
        j = torch.arange(2**a)
        signs = torch.where((j.unsqueeze(1) & place) > 0, 1.0, -1.0).to(torch.float64)  # [2^a, a]
        member = (j.unsqueeze(1) & place) > 0  # [2^a (S), a]
        walsh = torch.where(member.unsqueeze(0), signs.unsqueeze(1), 1.0).prod(2) / 2**a
        variables, order = rows.reshape(-1).sort(stable=True)
        ptr = torch.zeros(n + 1, dtype=torch.long)
        ptr[1:] = torch.cumsum(torch.bincount(variables, minlength=n), 0)
        groups.append(
            _Group(
                a=a,
                blank=len(ids) * 2**a,
                scopes=rows,
                reading=torch.where(zero, least - ZERO_GAP, stacked).reshape(-1),
                finite=torch.where(zero, 0.0, stacked).reshape(-1),
                zero=zero.to(torch.float64).reshape(-1),
                place=place,
                walsh=walsh,
                site_ptr=ptr,
                site_factors=order // a,
            )
        )
    return groups


__all__ = ["FactorBlocks", "ZERO_GAP"]
