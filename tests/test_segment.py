"""``lsbcore.segment``: a photo in, a settled segmentation at the photo's size out."""

import io

import numpy as np
import pytest
import torch
from PIL import Image

import lsbcore
from lsbcore.segmentation.contrast import contrast_scale
from lsbcore.segmentation.starts import chain_starts, photo_starts


def disc_photo(height=90, width=120, noise=0.08, seed=0):
    """A dark disc on a light background, with noise: uint8 RGB and its true mask."""
    rows, cols = np.mgrid[:height, :width]
    disc = (rows - height / 2) ** 2 + (cols - width / 2) ** 2 < (min(height, width) / 3) ** 2
    rng = np.random.default_rng(seed)
    level = np.where(disc, 0.3, 0.7)[..., None] * np.array([1.0, 0.9, 0.8])
    noisy = np.clip(level + noise * rng.standard_normal((height, width, 3)), 0, 1)
    return np.round(noisy * 255).astype(np.uint8), disc


@pytest.fixture(scope="module")
def result():
    photo, _ = disc_photo()
    return lsbcore.segment(photo, lam=1.0, max_side=48, seed=1)


def test_the_segmentation_is_delivered_at_the_photos_size_and_finds_the_disc(result):
    _, disc = disc_photo()
    assert result.probability.shape == disc.shape and result.mask.shape == disc.shape
    assert result.working_probability.shape == (36, 48) == result.target.shape
    assert np.mean(result.mask == disc) > 0.97
    assert result.data.polarity == "dark"  # the disc touches no border
    assert 0 <= result.probability.min() and result.probability.max() <= 1
    assert result.entropy.shape == disc.shape


def test_the_result_says_what_it_sampled(result):
    np.testing.assert_array_equal(result.target.alpha[0].numpy(), result.data.alpha)
    assert result.target.lam == 1.0 and result.sampler == "checkerboard"
    assert result.settled and result.settledness.unsettled_fraction <= 0.01
    assert result.sweeps >= 100 and result.n_chains == 4


def test_the_marginal_mask_agrees_with_the_exact_map(result):
    assert result.map_mask.shape == result.working_mask.shape
    assert result.map_agreement >= 0.97
    best = result.target.log_prob(torch.from_numpy(np.where(result.map_mask, 1.0, -1.0))[None])
    mode = result.target.log_prob(torch.from_numpy(np.where(result.working_mask, 1.0, -1.0))[None])
    assert float(best) >= float(mode) - 1e-9  # the MAP is at least as likely as the mask


def test_every_kind_of_input_gives_the_same_segmentation(tmp_path):
    photo, _ = disc_photo(40, 50)
    buffer = io.BytesIO()
    Image.fromarray(photo).save(buffer, format="PNG")
    path = tmp_path / "disc.png"
    path.write_bytes(buffer.getvalue())
    common = dict(lam=0.8, max_side=32, sweeps=60, seed=3)
    reference = lsbcore.segment(photo, **common).working_probability
    for image in (
        path,
        str(path),
        buffer.getvalue(),
        io.BytesIO(buffer.getvalue()),
        Image.fromarray(photo),
        torch.from_numpy(photo),
    ):
        got = lsbcore.segment(image, **common).working_probability
        np.testing.assert_allclose(got, reference, atol=1e-6)


def test_a_fixed_number_of_sweeps_runs_exactly_that_many():
    photo, _ = disc_photo(30, 30)
    out = lsbcore.segment(photo, max_side=30, sweeps=40, seed=0)
    assert out.sweeps == 40


def test_single_site_samplers_are_measured_in_sweeps():
    photo, _ = disc_photo(12, 12)
    out = lsbcore.segment(photo, max_side=12, sampler="barker", sweeps=16, n_chains=2)
    assert out.sweeps == 16 and out.working_probability.shape == (12, 12)


def test_a_strongly_coupled_posterior_from_opposite_starts_is_not_called_settled():
    """lambda = 3 on a nearly flat image: chains started at random freeze into domains."""
    flat = np.full((40, 40), 0.5) + 0.01 * np.random.default_rng(0).standard_normal((40, 40))
    out = lsbcore.segment(np.clip(flat, 0, 1), lam=3.0, max_side=40, sweeps=200, start="random")
    assert not out.settled and out.settledness.unsettled_fraction > 0.01


def test_the_files_are_pngs_at_the_photos_size(result, tmp_path):
    paths = {p.name: p for p in result.save(tmp_path / "out")}
    height, width = result.photo.original_shape
    for name in ("mask.png", "probability.png", "entropy.png", "overlay.png"):
        with Image.open(paths[name]) as im:
            assert im.size == (width, height)
    mask = np.asarray(Image.open(paths["mask.png"])) > 0
    np.testing.assert_array_equal(mask, result.mask)
    np.testing.assert_allclose(
        np.load(paths["working_probability.npy"]), result.working_probability
    )


def test_starts_from_the_data_at_random_and_mixed():
    alpha = torch.tensor([[1.0, -2.0], [0.0, -0.5]])
    data = photo_starts(alpha, 3, "data")
    assert torch.equal(data, torch.tensor([[1.0, -1.0], [1.0, -1.0]]).expand(3, 2, 2))
    mixed = photo_starts(alpha, 4, "mixed", seed=2)
    assert torch.equal(mixed[0], data[0]) and torch.equal(mixed[2], data[0])
    assert torch.equal(mixed[1], photo_starts(alpha, 4, "random", seed=2)[1])
    assert chain_starts(3, "mixed") == ["data", "random", "data"]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_chains": 1}, "n_chains"),
        ({"n_chains": True}, "n_chains"),
        ({"sampler": "learned"}, "sampler"),
        ({"sampler": "nope"}, "sampler"),
        ({"start": "middle"}, "start"),
        ({"max_side": 4}, "max_side"),
        ({"max_side": 64.0}, "max_side"),
        ({"sweeps": 3}, "sweeps"),
        ({"boundary": "round"}, "boundary"),
        ({"lam": -1.0}, "lam"),
        ({"polarity": "left"}, "polarity"),
        ({"contrast": "yes"}, "contrast must be True or False"),
        ({"hard_refits": 1}, "hard_refits must be True or False"),
    ],
)
def test_bad_arguments_get_a_sentence(kwargs, match):
    photo, _ = disc_photo(10, 10)
    with pytest.raises(ValueError, match=match):
        lsbcore.segment(photo, **kwargs)


def test_bad_images_get_a_sentence(tmp_path):
    with pytest.raises(lsbcore.ImageError, match="does not exist"):
        lsbcore.segment(tmp_path / "missing.png")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        lsbcore.segment(np.full((5, 5), 2.0))
    with pytest.raises(ValueError, match="shape"):
        lsbcore.segment(np.zeros((5, 5, 4)))
    with pytest.raises(TypeError, match="image must be"):
        lsbcore.segment(12)


def test_numpy_integers_are_accepted_as_sizes():
    photo, _ = disc_photo(10, 10)
    assert lsbcore.segment(photo, max_side=np.int64(10), sweeps=np.int64(20)).sweeps == 20


def test_the_threshold_split_picks_its_object_by_the_same_border_rule():
    bright = np.zeros((20, 30), dtype=bool)
    bright[5:15, 8:22] = True  # a bright block inside: the bright class avoids the border
    chosen = lsbcore.segmentation.labels_polarity(bright)
    assert chosen.name == "bright" and chosen.border_fraction == (1.0, 0.0)
    assert lsbcore.segmentation.labels_polarity(~bright).name == "dark"
    with pytest.raises(ValueError, match="bright"):
        lsbcore.segmentation.labels_polarity(bright.astype(int))


def test_contrast_weighs_each_edge_by_the_working_photos_colours():
    photo, _ = disc_photo(24, 20, noise=0.0)
    plain = lsbcore.segment(photo, max_side=24, sweeps=8, lam=1.5)
    weighted = lsbcore.segment(photo, max_side=24, sweeps=8, lam=1.5, contrast=True)
    assert plain.target.edge_scale is None
    scale = contrast_scale(weighted.photo.rgb)
    torch.testing.assert_close(weighted.target.edge_weights, 1.5 * scale, rtol=0, atol=1e-15)
    # the disc's rim is where the colour changes: its edges couple less than the flat inside
    assert float(scale.min()) < 0.5 < float(scale.median()) == 1.0
