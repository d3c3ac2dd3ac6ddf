"""Checks of an item-by-item similarity matrix before semantic CMR uses it.

Semantic CMR (Polyn, Norman & Kahana 2009) reads a pool's similarities as cosines: the matrix
of dot products of unit word vectors. Such a matrix is symmetric, its values lie in [-1, 1] and
it is positive semi-definite. A matrix that breaks one of these is a different model, or a file
that holds something else (distances, counts, a matrix written the wrong way round), and CMR
would run on it without a word. Each property has two stated tolerances:

================  =====================================  ======================  ==============
property          measure                                accepted silently       warned about
================  =====================================  ======================  ==============
symmetry          ``max |S - S.T|``                      <= 1e-9                 <= 1e-3
range             distance of the values outside [-1, 1] <= 1e-9                 <= 1e-3
semi-definite     ``-(smallest eigenvalue) / P``         <= 1e-9                 <= 5e-2
================  =====================================  ======================  ==============

The semi-definite band is wider: cosines with their negative values set to 0 (a common way
to keep only positive similarities) are not semi-definite (20 unit vectors in 5 dimensions:
smallest eigenvalue -0.17, 0.009 per item) yet are what their user meant. Beyond the warning
band the matrix is refused with one :class:`~cmr.errors.ParameterError`
line; inside it a :class:`~cmr.errors.SimilarityWarning` says by how much (rounding in a file
written with few decimals lands there). The semi-definite check runs a Cholesky factorisation
of ``(S + S.T) / 2 + 1e-9 P I`` (a third of an eigen-decomposition's time) and computes the smallest
eigenvalue only when that fails.
"""
from __future__ import annotations

import warnings

import numpy as np

from .errors import ParameterError, SimilarityWarning

__all__ = ["SIMILARITY_TOLERANCES", "check_similarity"]

#: (accepted silently, warned about) for each property; see the module docstring
SIMILARITY_TOLERANCES = {"symmetry": (1e-9, 1e-3), "range": (1e-9, 1e-3), "semidefinite": (1e-9, 5e-2)}


def _is_semidefinite_within(matrix: np.ndarray, tol: float) -> bool:
    import scipy.linalg

    try:
        scipy.linalg.cholesky(matrix + tol * np.eye(matrix.shape[0]), lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return False
    return True


def _smallest_eigenvalue(matrix: np.ndarray) -> float:
    import scipy.linalg

    return float(scipy.linalg.eigh(matrix, eigvals_only=True, subset_by_index=[0, 0], check_finite=False)[0])


def check_similarity(matrix, what: str = "similarity") -> np.ndarray:
    """``matrix`` as a float64 (P, P) array once it reads as cosine similarities.

    Parameters
    ----------
    matrix : array_like, shape (P, P)
        Finite similarities (already checked for shape and finiteness by the caller).
    what : str
        Name of the matrix in messages (a file name, ``"similarity"``).

    Returns
    -------
    numpy.ndarray
        The matrix, unchanged.

    Raises
    ------
    ParameterError
        Asymmetry, values outside [-1, 1] or a negative eigenvalue beyond the warning band of
        :data:`SIMILARITY_TOLERANCES`.

    Warns
    -----
    SimilarityWarning
        A violation inside the warning band.
    """
    sim = np.asarray(matrix, dtype=np.float64)
    n = sim.shape[0]
    if n == 0:
        return sim
    found = []  # (property, size in the units of SIMILARITY_TOLERANCES, description)
    asymmetry = float(np.max(np.abs(sim - sim.T)))
    found.append(("symmetry", asymmetry, f"not symmetric: max |S - S.T| = {asymmetry:.3g}"))
    largest = float(np.max(np.abs(sim)))
    found.append(("range", largest - 1.0, f"values outside [-1, 1]: up to {largest:.6g} in size"))
    symmetric = (sim + sim.T) / 2.0
    if not _is_semidefinite_within(symmetric, SIMILARITY_TOLERANCES["semidefinite"][0] * n):
        smallest = _smallest_eigenvalue(symmetric)
        found.append(("semidefinite", -smallest / n, f"not positive semi-definite: smallest eigenvalue {smallest:.3g}"))
    refused = [text for name, size, text in found if size > SIMILARITY_TOLERANCES[name][1]]
    if refused:
        raise ParameterError(f"{what} must hold cosine similarities (symmetric, in [-1, 1], positive semi-definite); "
                             f"got a {n} x {n} matrix {'; '.join(refused)}")
    warned = [text for name, size, text in found if size > SIMILARITY_TOLERANCES[name][0]]
    if warned:
        warnings.warn(f"{what}: {'; '.join(warned)} (within the tolerances of cmr.similarity; used as given)",
                      SimilarityWarning, stacklevel=2)
    return sim
