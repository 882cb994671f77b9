"""The Ising field of a photo from a prompt: colour models of the object and the background
fitted to the regions the user marked, refitted from the posterior marginal (soft GrabCut).

The automatic model (``data_term``) fits two classes to the whole photo and must guess which
one is the object; a photo has more than two colours, and the two it finds are often not the
object and its surroundings. A prompt (``prompt.Prompt``) says where they are. As GrabCut
initialises, every site outside the box is background and the box holds the object and some
background, so

- the background's mixture (``class_mixture``) is fitted to the known background sites, and
- the object's to the sites inside the box (and near object points);

then each free site's field is the half log-likelihood ratio, as in ``data_term``:

    alpha_i = mu * 0.5 * [log p(y_i | object; sigma) - log p(y_i | background; sigma)],

where ``sigma`` widens every component (covariances times sigma^2).

Known sites are pinned: ``alpha_i = +-ALPHA_BOUND`` (50). Flipping a site against its pin
changes ``log p~`` by ``-2 * 50 + 2 * lam * (its neighbours' spins)``, at most ``-100 + 8 lam``
with four neighbours; for every coupling the app offers (lam <= 10) that is e^-20 or less, so a
pinned site is flipped in fewer than one sweep in 10^8 and the marginal there is its pin. The
bound is the data term's own clip, so the sampler's flip log-ratios stay as bounded as before.
A finite pin, not a removed site, keeps the target an ordinary Ising posterior on the whole
lattice: every sampler, the exact MAP and the outputs work unchanged.

Refitting. GrabCut alternates a MAP segmentation with refitting each class's mixture to the
pixels the MAP gives it. Here the posterior marginal ``P(x_i = +1)`` replaces the MAP's hard
labels (``refit``): the object's mixture is fitted to every free site weighted by
``P(x_i = +1)`` (plus the object seeds), the background's to every free site weighted by
``P(x_i = -1)`` (plus the background seeds). That is one EM step on the class labels, with the
posterior standing in for the E-step, so colours that the box held but the posterior gives to
the background leave the object's model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from lsbcore.segmentation.arguments import real_array, real_number
from lsbcore.segmentation.class_mixture import COMPONENTS, ClassMixture, fit_class_mixture
from lsbcore.segmentation.data_term import ALPHA_BOUND, image_features
from lsbcore.segmentation.prompt import Prompt, PromptRegions

__all__ = ["PIN", "PromptedDataTerm", "fit_prompted_data_term"]

#: |alpha| at a site the prompt fixes (see the module docstring).
PIN = ALPHA_BOUND
#: Pixels each class mixture is fitted to at most (a fixed-seed subset): 16k pixels pin down
#: five Gaussians in 3-D, and a refit while the run goes on costs a quarter of a full one.
FIT_PIXELS = 2**14
#: EM iterations per class fit at most: a refit comes every few dozen sweeps and the next one
#: goes on from the sampled marginal, so a fit need not converge to the last digit.
FIT_ITERATIONS = 20


@dataclass(frozen=True, eq=False)
class PromptedDataTerm:
    """The field of the segmentation posterior fitted to one image and one prompt.

    Attributes:
        alpha: ``[H, W]`` float64 within ``[-PIN, PIN]``; ``+PIN`` / ``-PIN`` at pinned sites.
        likelier: ``[H, W]`` start state, each site at its likelier class (sign of alpha).
        prompt: the prompt it was fitted to.
        regions: the prompt on this lattice (known object, known background, free).
        object_model, background_model: the fitted class mixtures.
        colour: True when modelled in Lab colour, False in luma.
        features: ``[H, W, d]`` the image's features (kept for refits).
        mu, sigma: the data weight and the class widening used.
        refits: how many times the mixtures were refitted from a posterior marginal.
    """

    alpha: np.ndarray
    likelier: np.ndarray
    prompt: Prompt
    regions: PromptRegions
    object_model: ClassMixture
    background_model: ClassMixture
    colour: bool
    features: np.ndarray
    mu: float
    sigma: float
    refits: int = 0
    polarity = "prompt"  # what the object is: the prompt says, not a dark or bright class

    def refit(self, probability) -> PromptedDataTerm:
        """The data term refitted from a posterior marginal ``probability`` ``[H, W]``
        (``P(x_i = +1)``), as the module docstring says."""
        p = real_array(probability, "probability")
        if p.shape != self.alpha.shape:
            raise ValueError(
                f"probability must have the lattice's shape {self.alpha.shape}, got {p.shape}."
            )
        if p.min() < 0 or p.max() > 1:
            raise ValueError("probability must lie in [0, 1].")
        free = self.regions.free
        object_weight = np.where(free, p, 0.0) + self.regions.object_seeds
        background_weight = np.where(free, 1.0 - p, 0.0) + self.regions.background_seeds
        if object_weight.sum() < 1.0:  # the posterior left (almost) nothing to the object
            return replace(self, refits=self.refits + 1)
        fitted = _fit(
            self.features, self.regions, object_weight, background_weight, self.mu, self.sigma
        )
        return replace(self, **fitted, refits=self.refits + 1)


def fit_prompted_data_term(
    image, prompt: Prompt, mu: float = 1.0, sigma: float = 1.0, components: int = COMPONENTS
) -> PromptedDataTerm:
    """Fit the object's and the background's mixtures to the regions ``prompt`` marks on
    ``image`` (a Photo or an array, as ``fit_data_term`` takes) and return the field.

    Raises:
        ValueError: an argument is out of range, or the prompt does not fit this lattice
            (``Prompt.regions``).
    """
    if not isinstance(prompt, Prompt):
        raise ValueError(f"prompt must be a Prompt (see make_prompt), got {type(prompt).__name__}.")
    mu = real_number(mu, "mu", minimum=0.0)
    sigma = real_number(sigma, "sigma", positive=True)
    features, colour = image_features(image)  # [H, W, d]
    regions = prompt.regions(features.shape[:2])
    # GrabCut's start: the box (and the object points) for the object, the known background
    # for the background; the box's own background pixels are what the refits take out again
    candidates = regions.inside_box & ~regions.background_seeds if prompt.box else False
    object_weight = (candidates | regions.object_seeds) * 1.0  # without a box: the points
    background_weight = regions.background_seeds * 1.0
    fitted = _fit(features, regions, object_weight, background_weight, mu, sigma, components)
    return PromptedDataTerm(
        prompt=prompt,
        regions=regions,
        colour=colour,
        features=features,
        mu=mu,
        sigma=sigma,
        **fitted,
    )


def _fit(features, regions, object_weight, background_weight, mu, sigma, components=COMPONENTS):
    """Both mixtures from per-site weights ``[H, W]``, and the pinned field they give."""
    height, width, d = features.shape
    flat = features.reshape(-1, d)
    models = [
        fit_class_mixture(
            *_sample(flat, weight.ravel()), components=components, max_iter=FIT_ITERATIONS
        )
        for weight in (object_weight, background_weight)
    ]
    half_ratio = 0.5 * (models[0].log_density(flat, sigma) - models[1].log_density(flat, sigma))
    alpha = np.clip(mu * half_ratio, -PIN, PIN).reshape(height, width)
    alpha = np.where(regions.pinned != 0, PIN * regions.pinned, alpha)
    return {
        "alpha": alpha,
        "likelier": np.where(alpha >= 0, 1.0, -1.0),
        "object_model": models[0],
        "background_model": models[1],
    }


def _sample(flat: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The weighted pixels, at most FIT_PIXELS of them (a fixed-seed subset)."""
    rows = np.flatnonzero(weight > 0)
    if len(rows) > FIT_PIXELS:
        rows = np.sort(np.random.default_rng(0).choice(rows, FIT_PIXELS, replace=False))
    return flat[rows], weight[rows]
