"""The simplified CMR of Ji-An, Zhou, Benna & Mattar (NeurIPS 2024), fitted to attention heads.

:mod:`cmr.paper.simulate` holds the Monte Carlo free recall and the study's lag statistics;
its lag-profile grids (Monte Carlo and teacher-forced) are in :mod:`cmr.grids`. See
docs/equations.md, "The paper's variant".

Of the verbs every model family has (:mod:`cmr.textbook`), the variant has two:

* ``simulate(beta_enc, beta_rec, gamma)``: :func:`simulate_paper_free_recall`, a psifr table;
* ``fit(profiles, grid)``: :func:`cmr.fit_profiles`, the least-squares fit of lag profiles (of
  heads or of people) to a grid of the variant's profiles (:func:`cmr.paper_mc_grid`,
  :func:`cmr.paper_teacher_forced_grid`), which is how the paper fitted it.

It has no ``log_likelihood``: the paper fitted the variant's lag profiles by least squares, not
recall sequences by likelihood, and this package implements no likelihood of the variant; so
there is no likelihood fitter and no ``Spec`` of free and fixed parameters either. Nor is there a
``default_parameters``: the paper swept a grid of its three parameters and named no default point.
"""
from .simulate import (
    check_parameters as check_parameters,
    closed_form_crp as closed_form_crp,
    closed_form_lag_distribution as closed_form_lag_distribution,
    paper_lag_statistics as paper_lag_statistics,
    simulate_paper_free_recall as simulate_paper_free_recall,
    simulate_paper_recalls as simulate_paper_recalls,
)
from ..profile_fit import fit_profiles as fit_profiles

# the family's verbs it has (after the imports above: ``simulate`` is the function, not the module)
fit = fit_profiles
simulate = simulate_paper_free_recall

__all__ = [
    "fit",
    "simulate",
    "check_parameters",
    "closed_form_lag_distribution",
    "paper_lag_statistics",
    "simulate_paper_free_recall",
    "simulate_paper_recalls",
]
