""" "About the method": the mathematics behind the dashboard, in formulas and plain sentences."""

from __future__ import annotations

import streamlit as st

SECTIONS = (
    (
        "The posterior",
        "A segmentation is a state x with one spin per pixel, +1 for object and −1 for "
        "background. The data pull each pixel towards its own evidence αᵢ, and λ rewards "
        "neighbours that agree:",
        [
            r"\log \tilde p(x) = \sum_i \alpha_i x_i + \lambda \sum_{(i,j) \in E} x_i x_j,"
            r"\qquad \alpha_i = \frac{\mu\, y_i}{\sigma^2}",
        ],
    ),
    (
        "Locally balanced proposals",
        "Every step proposes flipping one site. Informed proposals weigh each site by how much "
        "the flip would raise the posterior, through a balancing function g of the ratio tᵢ:",
        [
            r"t_i(x) = \frac{\tilde p(x^{(i)})}{\tilde p(x)}, \qquad "
            r"Q(i \mid x) = \frac{g(t_i(x))}{Z(x)}, \qquad Z(x) = \sum_j g(t_j(x))",
        ],
    ),
    (
        "The balancing property",
        "If g(t) = t·g(1/t), the Metropolis–Hastings acceptance reduces to a ratio of the two "
        "normalisers, and only the flipped site and its neighbours change Z, so a step costs "
        "O(1) target work. Zanella's four functions all qualify: t/(1+t), √t, min(1, t), "
        "max(1, t). On this posterior √t is exactly Gibbs-with-Gradients.",
        [
            r"g(t) = t\, g(1/t) \;\Rightarrow\; A(x \to x') = \min\!\left(1, "
            r"\frac{Z(x)}{Z(x')}\right)",
        ],
    ),
    (
        "LSB 1 and LSB 2",
        "LSB learns g during burn-in. LSB 1 learns a softmax mixture of the four functions; "
        "LSB 2 learns a small network h and symmetrises it, so that both are balanced for "
        "every parameter value:",
        [
            r"\text{LSB 1: } g_\theta(t) = \sum_k \operatorname{softmax}(\theta)_k\, g_k(t)",
            r"\text{LSB 2: } g_\theta(t) = \tfrac12\left(h_\theta(t) + t\, h_\theta(1/t)\right)",
        ],
    ),
    (
        "The objective",
        "A sampler mixes well when consecutive states are nearly independent. LSB minimises "
        "the mutual information between x and the next state x′, through an upper bound that "
        "needs only quantities available at the current state; after burn-in θ is frozen and "
        "the chain is an ordinary, exact Metropolis–Hastings chain.",
        [
            r"\min_\theta\; I(x; x') = "
            r"\mathrm{KL}\!\left(p(x)\, T_\theta(x' \mid x)\;\|\; p(x)\, p(x')\right)",
        ],
    ),
)


def render() -> None:
    with st.expander("About the method"):
        for title, text, formulas in SECTIONS:
            st.markdown(f"**{title}.** {text}")
            for formula in formulas:
                st.latex(formula)
        st.caption(
            "E. Sansone, LSB: Local Self-Balancing MCMC in Discrete Spaces, ICML 2022; "
            "G. Zanella, Informed proposals for local MCMC in discrete spaces, JASA 2020."
        )
