"""Prompted segmentation: a box or points say what the object is (lsbcore.segmentation.prompt,
class_mixture, prompted, and ``segment(box=..., points=...)``)."""

import numpy as np
import pytest
import torch

import lsbcore
from lsbcore.exact.states import all_states, exact_distribution
from lsbcore.segmentation.class_mixture import fit_class_mixture
from lsbcore.segmentation.prompt import MAX_POINTS, make_prompt
from lsbcore.segmentation.prompted import FIT_ITERATIONS, PIN, fit_prompted_data_term
from lsbcore.segmentation.segment import REFIT_STABLE, REFIT_SWEEPS, refit_settled


def stripes_scene(height=60, width=80, seed=0):
    """A mid-grey square on black and white stripes: the whole photo's two classes are black
    and white, so the automatic model cannot find the square."""
    rng = np.random.default_rng(seed)
    rows, cols = np.mgrid[:height, :width]
    image = np.where((cols // 10) % 2 == 0, 0.15, 0.85)
    square = (rows >= 20) & (rows < 40) & (cols >= 30) & (cols < 50)
    image[square] = 0.5
    return np.clip(image + 0.03 * rng.standard_normal(image.shape), 0, 1), square


def two_discs_scene(size=48, seed=0):
    """A red and a green disc of equal lightness on blue: which disc is the object is only
    known from the user."""
    rng = np.random.default_rng(seed)
    rows, cols = np.mgrid[:size, :size]
    red = (rows - 16) ** 2 + (cols - 14) ** 2 < 64
    green = (rows - 32) ** 2 + (cols - 34) ** 2 < 64
    image = np.zeros((size, size, 3)) + [0.2, 0.3, 0.8]
    image[red] = [0.8, 0.25, 0.2]
    image[green] = [0.25, 0.6, 0.2]
    return np.clip(image + 0.02 * rng.standard_normal(image.shape), 0, 1), red, green


# ----------------------------------------------------------------------------- class mixture
def test_one_component_is_the_weighted_mean_and_covariance():
    rng = np.random.default_rng(1)
    y = rng.normal(size=(500, 3)) @ np.array([[1.0, 0.3, 0], [0, 0.5, 0.1], [0, 0, 0.2]])
    w = rng.uniform(0, 2, size=500)
    fit = fit_class_mixture(y, w, components=1)
    mean = (w @ y) / w.sum()
    cov = ((y - mean) * w[:, None]).T @ (y - mean) / w.sum()
    np.testing.assert_allclose(fit.means[0], mean, atol=1e-12)
    np.testing.assert_allclose(fit.covariances[0], cov, atol=1e-12)
    # the density is that Gaussian's
    from scipy.stats import multivariate_normal

    expected = multivariate_normal(mean, cov).logpdf(y[:5])
    np.testing.assert_allclose(fit.log_density(y[:5]), expected, atol=1e-9)


def test_weights_count_as_repeated_pixels_and_zero_weights_as_absent():
    rng = np.random.default_rng(2)
    y = np.concatenate([rng.normal(0, 0.05, (200, 1)), rng.normal(1, 0.05, (200, 1))])
    twice = fit_class_mixture(np.concatenate([y, y]), components=2)
    weighted = fit_class_mixture(y, np.full(400, 2.0), components=2)
    np.testing.assert_allclose(np.sort(twice.means[:, 0]), np.sort(weighted.means[:, 0]), atol=1e-6)
    # pixels of weight zero do not move the fit
    outliers = np.concatenate([y, np.full((50, 1), 5.0)])
    masked = fit_class_mixture(outliers, np.r_[np.ones(400), np.zeros(50)], components=2)
    assert masked.means.max() < 1.5
    assert np.allclose(np.sort(masked.means[:, 0]), [0, 1], atol=0.02)
    assert np.isclose(masked.weights.sum(), 1.0)


def test_a_class_without_pixels_or_with_negative_weights_is_refused():
    y = np.zeros((4, 1))
    with pytest.raises(ValueError, match="no pixels"):
        fit_class_mixture(y, np.zeros(4))
    with pytest.raises(ValueError, match=">= 0"):
        fit_class_mixture(y, -np.ones(4))


# ----------------------------------------------------------------------------- prompts
@pytest.mark.parametrize(
    "box, points, says",
    [
        ((0.1, 0.2, 0.3), None, "four numbers"),
        ("abcd", None, "between 0 and 1"),
        ((0.5, 0.2, 0.4, 0.8), None, "left < right"),
        ((0.1, 0.2, 1.5, 0.8), None, "between 0 and 1"),
        ((0.1, float("nan"), 0.5, 0.8), None, "between 0 and 1"),
        ((True, 0.1, 0.5, 0.8), None, "between 0 and 1"),
        (None, [(0.5, 0.5, 1)], "background point is missing"),
        (None, [(0.5, 0.5, -1)], "object point is missing"),
        (None, [(0.5, 0.5, 2), (0.1, 0.1, -1)], "label must be"),
        (None, [(0.5, 0.5)], r"\(x, y, label\)"),
        (None, "0.5,0.5,1", "list of"),
        ((0.2, 0.2, 0.6, 0.6), [(0.9, 0.9, "object")], "outside the box"),
        (None, [(0.5, 0.5, 1)] * (MAX_POINTS + 1), "at most"),
    ],
)
def test_a_malformed_prompt_is_refused_with_a_sentence(box, points, says):
    with pytest.raises(ValueError, match=says):
        make_prompt(box, points)


def test_no_box_and_no_points_is_no_prompt():
    assert make_prompt() is None and make_prompt(None, []) is None


def test_a_box_that_fits_no_pixel_or_leaves_no_background_is_refused_on_the_lattice():
    with pytest.raises(ValueError, match="holds no pixel"):
        make_prompt((0.50, 0.50, 0.501, 0.501)).regions((20, 20))
    with pytest.raises(ValueError, match="covers the whole photo"):
        make_prompt((0, 0, 1, 1)).regions((20, 20))
    # a background point rescues a box around everything
    regions = make_prompt((0, 0, 1, 1), [(0.05, 0.05, -1)]).regions((20, 20))
    assert regions.background_seeds[0, 0] and not regions.background_seeds[10, 10]


def test_the_box_is_read_in_fractions_of_the_width_and_height():
    regions = make_prompt((0.25, 0.5, 0.75, 1.0)).regions((10, 20))
    inside = np.zeros((10, 20), bool)
    inside[5:, 5:15] = True
    np.testing.assert_array_equal(regions.inside_box, inside)
    np.testing.assert_array_equal(regions.background_seeds, ~inside)
    assert not regions.object_seeds.any()


# ----------------------------------------------------------------------------- the field
def test_a_box_finds_the_object_the_automatic_model_cannot():
    image, square = stripes_scene()
    auto = lsbcore.segment(image, max_side=80, seed=0)
    assert np.mean(auto.working_mask == square) < 0.7  # black or white stripes, not the square
    boxed = lsbcore.segment(image, max_side=80, seed=0, box=(25 / 80, 15 / 60, 55 / 80, 45 / 60))
    assert np.mean(boxed.working_mask == square) > 0.99
    assert boxed.data.polarity == "prompt" and boxed.settled


def test_points_say_which_of_two_like_objects_is_meant():
    image, red, green = two_discs_scene()
    background = (0.9, 0.1, -1)
    for disc, centre in ((green, (34 / 48, 32 / 48)), (red, (14 / 48, 16 / 48))):
        other = (
            (14 / 48, 16 / 48, "background") if disc is green else (34 / 48, 32 / 48, "background")
        )
        result = lsbcore.segment(
            image, max_side=48, sweeps=150, seed=0, points=[(*centre, 1), background, other]
        )
        assert np.mean(result.working_mask == disc) > 0.99


def test_sites_the_prompt_fixes_are_pinned_and_the_rest_follow_the_colours():
    image, square = stripes_scene()
    data = fit_prompted_data_term(image, make_prompt((25 / 80, 15 / 60, 55 / 80, 45 / 60)))
    outside = ~data.regions.inside_box
    assert np.all(data.alpha[outside] == -PIN)
    assert np.all(data.alpha[square] > 0)
    stripes_in_box = data.regions.inside_box & ~square
    assert np.all(data.alpha[stripes_in_box] < 0)  # outside colours are background's


def test_a_pin_holds_against_the_strongest_coupling_exactly():
    # 3 x 3, free boundary, lambda 10 (the app's largest): the centre pinned to background,
    # every other site pulled hard to the object; its exact marginal stays below e^-20
    alpha = torch.full((3, 3), 50.0, dtype=torch.float64)
    alpha[1, 1] = -PIN
    target = lsbcore.IsingPosterior(alpha, 10.0, boundary="free")
    pi = exact_distribution(target)
    centre_up = (all_states(9)[:, 4] > 0).numpy()
    assert float(pi[centre_up].sum()) <= np.exp(-20.0)


def test_refitting_from_the_marginal_takes_the_boxs_background_out_of_the_object_model():
    image, square = stripes_scene()
    data = fit_prompted_data_term(image, make_prompt((10 / 80, 5 / 60, 70 / 80, 55 / 60)))
    stripes = np.array([[0.15], [0.85]])
    before = data.object_model.log_density(stripes)
    refitted = data.refit(square * 1.0)  # the posterior says: the square and nothing else
    after = refitted.object_model.log_density(stripes)
    assert np.all(after < before - 5)  # the stripes are no longer object colours
    assert refitted.refits == 1
    # with a hard marginal the refit is the fit to those labels
    direct = fit_class_mixture(image[square][:, None], max_iter=FIT_ITERATIONS)
    np.testing.assert_allclose(
        np.sort(refitted.object_model.means[:, 0]), np.sort(direct.means[:, 0]), atol=1e-9
    )
    with pytest.raises(ValueError, match="shape"):
        data.refit(np.zeros((3, 3)))


def test_segment_with_a_prompt_refits_while_running_and_counts_every_round():
    image, square = stripes_scene(30, 40)
    box = (12 / 40, 7 / 30, 28 / 40, 23 / 30)
    out = lsbcore.segment(image, max_side=40, sweeps=30, seed=0, box=box, refits=2)
    # refits come every REFIT_SWEEPS sweeps while the run goes on; the last field gets `sweeps`
    refits = out.data.refits
    assert 1 <= refits <= 2 and out.rounds == (REFIT_SWEEPS,) * refits + (30,)
    assert out.sweeps == sum(out.rounds)
    assert np.all(out.working_probability[~out.data.regions.inside_box] == 0.0)
    with pytest.raises(ValueError, match="polarity does not apply"):
        lsbcore.segment(image, max_side=40, sweeps=30, box=box, polarity="dark")
    with pytest.raises(ValueError, match="refits"):
        lsbcore.segment(image, max_side=40, sweeps=30, box=box, refits=-1)


def test_refits_stop_once_a_refit_leaves_the_mask_as_it_was():
    free = np.ones((10, 10), dtype=bool)
    before = np.full((10, 10), -1.0)
    after = before.copy()
    assert refit_settled(before, after, free)
    after.flat[0] = 1.0  # one site of 100 flipped: more than REFIT_STABLE (0.5%)
    assert REFIT_STABLE < 0.01 and not refit_settled(before, after, free)
    assert refit_settled(before, after, free & (np.arange(100) > 0).reshape(10, 10))  # pinned


def test_a_box_run_refits_early_then_settles_once_on_the_last_field():
    # until settled: the colour models are refitted after REFIT_SWEEPS sweeps, not only once
    # the first (unrefitted) field has settled, and they stop as soon as the mask stands
    image, square = stripes_scene()
    box = (25 / 80, 15 / 60, 55 / 80, 45 / 60)
    out = lsbcore.segment(image, max_side=80, seed=0, box=box, refits=8)
    refits = out.data.refits
    assert 1 <= refits < 8  # stopped by the stable mask, not the cap
    assert out.rounds[:-1] == (REFIT_SWEEPS,) * refits and out.rounds[-1] >= 100
    assert out.settled and out.sweeps == sum(out.rounds)
    # outside the box is background at every refit: the marginal there is exactly 0
    assert np.all(out.working_probability[~out.data.regions.inside_box] == 0.0)
    assert np.all(out.data.alpha[~out.data.regions.inside_box] == -PIN)
    assert np.mean(out.working_mask == square) > 0.97
