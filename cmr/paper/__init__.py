"""The simplified CMR of Ji-An, Zhou, Benna & Mattar (NeurIPS 2024), fitted to attention heads.

:mod:`cmr.paper.simulate` holds the Monte Carlo free recall and the study's lag statistics;
its lag-profile grids (Monte Carlo and teacher-forced) are in :mod:`cmr.grids`. See
docs/equations.md, "The paper's variant".
"""
from .simulate import (
    check_parameters as check_parameters,
    closed_form_crp as closed_form_crp,
    closed_form_lag_distribution as closed_form_lag_distribution,
    paper_lag_statistics as paper_lag_statistics,
    simulate_paper_free_recall as simulate_paper_free_recall,
    simulate_paper_recalls as simulate_paper_recalls,
)

__all__ = [
    "check_parameters",
    "closed_form_lag_distribution",
    "paper_lag_statistics",
    "simulate_paper_free_recall",
    "simulate_paper_recalls",
]
