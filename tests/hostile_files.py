"""Hostile files the red team built against the readers (issue 47): the builders live with the
corpus in ``lsbcore.studies.benchmarks.hostile_files`` (the benchmark builds them too)."""

from lsbcore.studies.benchmarks.hostile_files import (
    contradicting_ring,
    endless_view_file,
    gif_claiming,
    gif_on_screen,
    npy_header,
)

__all__ = ["contradicting_ring", "endless_view_file", "gif_claiming", "gif_on_screen", "npy_header"]
