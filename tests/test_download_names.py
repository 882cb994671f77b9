"""Download names never collide: two runs that differ in any one setting that changes the
result get different file names, for every download the app offers (the photo's PNGs and
array, a paper case's mask, the Export tab's report, results, traces and learned functions),
and identical settings give identical names. Names are safe: no path, bounded length."""

from __future__ import annotations

import datetime
import re
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

import lsbcore
from app import config as cfgmod
from app.file_names import export_stem
from app.views import segmentation

DAY = datetime.date(2026, 11, 24)
BOX = (0.1, 0.2, 0.8, 0.9)
MARGINAL = np.linspace(0.0, 1.0, 12).reshape(3, 4)
SAFE = re.compile(r"^[a-z0-9][a-z0-9.-]*$")  # lower-case letters, digits, dots and dashes


def photo_run(source=b"the photo's bytes", name="coffee-beans, uploaded image", prompt=None,
              refits=0, **changes):  # fmt: skip
    """A photo's run as the download names see it (nothing is sampled)."""
    data = None if prompt is None else SimpleNamespace(prompt=prompt, refits=refits)
    return SimpleNamespace(
        config=replace(cfgmod.defaults_for("upload"), **changes),
        problem=SimpleNamespace(name=name, data=data),
        photo=SimpleNamespace(original_shape=(600, 800)),
        source=source,
        cache={},
    )


def paper_run(**changes):
    return SimpleNamespace(
        config=replace(cfgmod.Config(), **changes),
        problem=SimpleNamespace(name="case 3 (dependent, noisy)", data=None),
        photo=None,
        source=None,
        cache={},
    )


def photo_names(run, threshold=0.5) -> dict[str, str]:
    """Every download the run's Segmentation and Export tabs offer, by what it is."""
    names = {f.key: f.file_name for f in segmentation.download_files(run, MARGINAL, threshold)}
    stem = export_stem(run, DAY)
    return {**names, "report": f"{stem}-report.html", "results": f"{stem}-results.json"}


# each changes the result, one at a time (1.00001: the name's words round it away, the digest
# does not)
PHOTO_SETTINGS = [
    {"model": "threshold"},
    {"lam": 2.0},
    {"lam": 1.00001},
    {"mu": 1.5},
    {"sigma": 2.0},
    {"seed": 1},
    {"size": 256},
    {"noise": 0.1},
    {"polarity": "dark"},
    {"boundary": "periodic"},
    {"start": "random"},
    {"chains": 2},
    {"burn_in": 60},
    {"steps": 6000},
    {"until_settled": False},
    {"prompt": lsbcore.make_prompt(BOX)},
    {"source": b"another photo with the same file name"},
    {"name": "tea-leaves, uploaded image"},
]


@pytest.mark.parametrize("change", PHOTO_SETTINGS, ids=lambda c: next(iter(c)))
def test_two_photo_runs_differing_in_one_setting_never_share_a_download_name(change):
    before = photo_names(photo_run())
    after = photo_names(photo_run(**change))
    assert before.keys() == after.keys()
    for key, name in before.items():
        assert after[key] != name, key


def test_a_prompt_names_its_box_points_and_refits():
    box = photo_names(photo_run(prompt=lsbcore.make_prompt(BOX)))
    other_box = photo_names(photo_run(prompt=lsbcore.make_prompt((0.1, 0.2, 0.8, 0.95))))
    points = photo_names(photo_run(prompt=lsbcore.make_prompt(BOX, [(0.5, 0.5, 1)])))
    refitted = photo_names(photo_run(prompt=lsbcore.make_prompt(BOX), refits=1))
    for key, name in box.items():
        assert len({name, other_box[key], points[key], refitted[key]}) == 4, key
    assert "-prompt-128px-" in box["report"]  # the automatic model is not named for a prompt


def test_a_mask_at_another_threshold_is_another_file():
    run = photo_run()
    half, more = photo_names(run, 0.5), photo_names(run, 0.55)
    assert half["mask"] != more["mask"] and half["overlay"] != more["overlay"]
    assert "-mask-t0.55-800x600.png" in more["mask"]
    # the probability, the uncertainty and the array do not depend on it: one name each
    assert all(half[k] == more[k] for k in ("probability", "entropy", "npy"))
    paper = paper_run()
    assert segmentation.mask_file_name(paper, 0.5) != segmentation.mask_file_name(paper, 0.55)


PAPER_SETTINGS = [
    {"lam": 0.8},
    {"mu": 2.0},
    {"sigma": 2.5},
    {"seed": 3},
    {"size": 40},
    {"boundary": "free"},
    {"shared_alpha": True},
    {"samplers": ("barker", "lsb1")},
    {"lr": 0.02},
    {"hidden": 12},
]


@pytest.mark.parametrize("change", PAPER_SETTINGS, ids=lambda c: next(iter(c)))
def test_two_paper_runs_differing_in_one_setting_never_share_an_export_name(change):
    assert export_stem(paper_run(**change), DAY) != export_stem(paper_run(), DAY)
    assert segmentation.mask_file_name(paper_run(**change), 0.5) != (
        segmentation.mask_file_name(paper_run(), 0.5)
    )


def test_identical_settings_give_identical_names_and_the_redraw_speed_changes_none():
    assert photo_names(photo_run()) == photo_names(photo_run())
    prompt = lsbcore.make_prompt(BOX, [(0.5, 0.5, 1)])
    assert photo_names(photo_run(prompt=prompt)) == photo_names(
        photo_run(prompt=lsbcore.make_prompt(BOX, [(0.5, 0.5, 1)]))
    )
    assert export_stem(paper_run(), DAY) == export_stem(paper_run(speed="10"), DAY)


def test_names_spell_out_the_key_settings_and_the_date():
    stem = export_stem(photo_run(lam=2.0, mu=1.5, sigma=0.25, seed=7), DAY)
    assert re.fullmatch(
        r"lsb-coffee-beans-uploaded-image-mixture-128px-lam2-mu1\.5-sigma0\.25-seed7-"
        r"[0-9a-f]{6}-2026-11-24",
        stem,
    ), stem
    assert re.fullmatch(
        r"lsb-case-3-dependent-noisy-n30-lam1-mu1-sigma3-seed0-[0-9a-f]{6}-2026-11-24",
        export_stem(paper_run(), DAY),
    )


def test_names_are_safe_file_names_of_bounded_length_whatever_the_settings():
    worst = photo_run(
        name="../../etc/<script>ÿ " + "long-word " * 20 + "\\photo (1).PNG",
        prompt=lsbcore.make_prompt(BOX, [(0.3, 0.4, 1), (0.05, 0.05, -1)]),
        lam=0.123456789,
        mu=1.23456e-5,
        sigma=19.987654,
        seed=2**31 - 1,
        size=512,
    )
    for name in photo_names(worst, threshold=0.123456).values():
        assert SAFE.match(name) and "/" not in name and "\\" not in name, name
        assert len(name) <= 200 and re.search(r"-\d{4}-\d{2}-\d{2}-", name), name
