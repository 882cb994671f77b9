"""A configured sampler as a value: a registry name, its options and a label.

``SamplerConfig("hamming-ball", {"block_size": 4})`` is checked once, when made, against the
registry entry's declared options (``registry.Option``: bounds, choices); it is frozen and
hashable, so it can key a dict, and ``Comparison`` takes it where it takes a name, so two
configurations of one sampler can run side by side. ``key`` is what they are told apart by:
the label when given, else the name with the options that differ from their defaults
(``"hamming-ball(block_size=4)"``), the plain name when none do.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from lsbcore.samplers.registry import REGISTRY, make_sampler

__all__ = ["Options", "SamplerConfig", "config_of"]


class Options(Mapping):
    """An immutable, hashable mapping of option names to values (in the order given)."""

    __slots__ = ("_items",)

    def __init__(self, items=()):
        object.__setattr__(self, "_items", dict(items))

    def __getitem__(self, key):
        return self._items[key]

    def __iter__(self) -> Iterator:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __eq__(self, other) -> bool:
        return isinstance(other, Mapping) and dict(self._items) == dict(other)

    def __setattr__(self, name, value):
        raise AttributeError("Options are immutable.")

    def __repr__(self) -> str:
        return f"Options({self._items!r})"


@dataclass(frozen=True)
class SamplerConfig:
    """The sampler ``name`` (a registry entry) with ``options`` (its declared ones only), told
    apart by ``label`` (default: see ``key``). Bad names, unknown options and values out of an
    option's bounds or choices are refused here, in ``make_sampler``'s and ``Option.check``'s
    sentences; values are stored as ``Option.check`` normalises them (integers, floats)."""

    name: str
    options: Mapping = field(default_factory=Options)
    label: str | None = None

    def __post_init__(self):
        if self.name not in REGISTRY:
            raise ValueError(
                f"unknown sampler {self.name!r}; choose one of: {', '.join(REGISTRY)}."
            )
        spec = REGISTRY[self.name]
        given = dict(self.options)
        allowed = {o.name: o for o in spec.options}
        unknown = sorted(set(given) - set(allowed))
        if unknown:
            if not spec.options:
                raise ValueError(f"the {self.name!r} sampler takes no options, got {unknown}.")
            raise ValueError(f"unknown options for {self.name!r}: {unknown}.")
        checked = {k: allowed[k].check(self.name, v) for k, v in given.items()}
        object.__setattr__(self, "options", Options(checked))
        if self.label is not None and (not isinstance(self.label, str) or not self.label):
            raise ValueError(f"label must be a non-empty string, got {self.label!r}.")

    @property
    def key(self) -> str:
        """The label, or ``name(option=value, ...)`` with the options that differ from their
        defaults in the registry's order, or the plain name when none do."""
        if self.label is not None:
            return self.label
        spec = REGISTRY[self.name]
        changed = [
            f"{o.name}={self.options[o.name]}"
            for o in spec.options
            if o.name in self.options and self.options[o.name] != o.default
        ]
        return f"{self.name}({', '.join(changed)})" if changed else self.name

    def build(self, target, n_chains: int, seed: int = 0, device=None, x0=None,
              backend: str = "auto", **extra):  # fmt: skip
        """``make_sampler`` of this configuration; ``extra`` (``resync_every``, ``balancing``,
        ``flow``, or shared options) go along, this configuration's own options winning."""
        return make_sampler(
            self.name, target, n_chains, seed=seed, device=device, x0=x0, backend=backend,
            **{**extra, **self.options},
        )  # fmt: skip


def config_of(entry) -> SamplerConfig:
    """``entry`` as a ``SamplerConfig``: a config as it is, a registry name without options."""
    if isinstance(entry, SamplerConfig):
        return entry
    return SamplerConfig(entry)
