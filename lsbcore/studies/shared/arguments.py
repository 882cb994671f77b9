"""Argument types shared by the studies' command lines: a number in its bounds, or the sentence
that says why not."""

from __future__ import annotations

import argparse
import math

from lsbcore import out_path


def int_in(low: int, high: int):
    """An argparse type: an integer in ``[low, high]``, else the sentence that says why."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low:,} and {high:,}, got {value:,}")
        return value

    return parse


def float_in(low: float, high: float, low_open: bool = False):
    """An argparse type: a finite number in ``[low, high]`` (``(low, high]`` with ``low_open``),
    else the sentence that says why."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be finite, got {text!r}")
        if value < low or value > high or (low_open and value == low):
            bracket = "(" if low_open else "["
            raise argparse.ArgumentTypeError(
                f"must be in {bracket}{low:g}, {high:g}], got {value:g}"
            )
        return value

    return parse


def add_option_arguments(group, options) -> None:
    """One ``--<name>`` argument per declared sampler option (``registry.Option``): its
    choices, or a number in its bounds (an integer where its default is one), its default and
    its help, so that a command's arguments follow the registry instead of a copy of it."""
    for option in options:
        flag = "--" + option.name.replace("_", "-")
        if option.choices:
            group.add_argument(flag, choices=option.choices, default=option.default,
                               help=option.help)  # fmt: skip
            continue
        whole = isinstance(option.default, int) and not isinstance(option.default, bool)
        kind = (
            int_in(int(option.low), int(option.high))
            if whole
            else float_in(option.low, option.high)
        )
        group.add_argument(flag, type=kind, default=option.default,
                           help=f"{option.help} (default {option.default:g})")  # fmt: skip


def add_output_files(parser: argparse.ArgumentParser) -> None:
    """A study's ``--json OUT`` (its rows) and ``--docs FILE`` (its generated section of a
    Markdown file), both checked as writable paths before anything runs."""
    parser.add_argument(
        "--json", type=out_path.output_file, metavar="OUT",
        help="also write the rows to this JSON file",
    )  # fmt: skip
    parser.add_argument(
        "--docs", type=out_path.output_file, metavar="FILE",
        help="write the generated section into this Markdown file (docs/reproduction.md)",
    )  # fmt: skip
