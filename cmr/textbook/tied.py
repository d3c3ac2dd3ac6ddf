"""Tied (dependent) parameters: a parameter defined by an arithmetic expression of others.

cymr's ``Parameters.set_dependent(Dfc="1 - Lfc")`` evaluates the expression with ``eval``;
here expressions are parsed with :mod:`ast` and only a small arithmetic language is walked,
so no user text is ever executed:

* numbers, parameter names (``B_enc``), ``+ - * / **``, unary ``-`` and ``+``, parentheses;
* the functions ``sqrt``, ``exp``, ``log``, ``abs``, ``min``, ``max`` and ``clip(x, low, high)``.

``tied={"B_rec": "B_enc"}`` makes ``B_rec`` always equal ``B_enc``; ``{"Dfc": "1 - Lfc"}`` is
cymr's standard dependency of Morton & Polyn (2016). Expressions evaluate on scalars or on
numpy arrays (a whole optimiser population at once).
"""
from __future__ import annotations

import ast
import operator
from typing import Mapping

import numpy as np

from ..errors import ParameterError
from .parameters import MODEL_PARAMETER_NAMES

__all__ = ["TiedParameter", "parse_tied", "evaluate"]

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.Pow: operator.pow}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_FUNCTIONS = {"sqrt": (np.sqrt, 1), "exp": (np.exp, 1), "log": (np.log, 1), "abs": (np.abs, 1),
              "min": (np.minimum, 2), "max": (np.maximum, 2), "clip": (np.clip, 3)}


class TiedParameter:
    """One tied parameter: ``name = expression`` over other parameters (see :func:`parse_tied`)."""

    def __init__(self, name: str, expression: str):
        self.name = name
        self.expression = expression
        self._tree = _parse(expression, name)
        self.uses = tuple(sorted(_names(self._tree)))

    def __call__(self, values: Mapping[str, object]):
        """Value of the expression given ``values`` (name -> float or array)."""
        with np.errstate(all="ignore"):  # out-of-range results are caught by the caller, not warned
            return _walk(self._tree, values)

    def __repr__(self):
        return f"TiedParameter({self.name!r}, {self.expression!r})"

    def __reduce__(self):  # pickle as text (dask ships fits to other processes)
        return (TiedParameter, (self.name, self.expression))


def _parse(text: str, name: str):
    if not isinstance(text, str) or not text.strip():
        raise ParameterError(f"tied parameter {name}: expression must be non-empty text; got {text!r}")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ParameterError(f"tied parameter {name}: cannot parse {text!r} ({exc.msg})") from None
    _check(tree, name, text)
    return tree


def _check(node, name, text):
    where = f"tied parameter {name} = {text!r}"
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise ParameterError(f"{where}: only numbers are allowed as constants; got {node.value!r}")
    elif isinstance(node, ast.Name):
        if node.id not in MODEL_PARAMETER_NAMES:
            raise ParameterError(
                f"{where}: unknown name {node.id!r}; expressions may use CMR parameters "
                f"({', '.join(MODEL_PARAMETER_NAMES)}) and {', '.join(_FUNCTIONS)}"
            )
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        _check(node.left, name, text)
        _check(node.right, name, text)
    elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        _check(node.operand, name, text)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        arity = _FUNCTIONS[node.func.id][1]
        if node.keywords or len(node.args) != arity:
            raise ParameterError(f"{where}: {node.func.id} takes {arity} positional argument(s)")
        for arg in node.args:
            _check(arg, name, text)
    else:
        raise ParameterError(
            f"{where}: only numbers, parameter names, + - * / **, parentheses and "
            f"{', '.join(_FUNCTIONS)} are allowed; got {type(node).__name__}"
        )


def _names(node) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id not in _FUNCTIONS}


def _walk(node, values):
    if isinstance(node, ast.Constant):
        return float(node.value)
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_walk(node.left, values), _walk(node.right, values))
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_walk(node.operand, values))
    func = _FUNCTIONS[node.func.id][0]
    return func(*[_walk(arg, values) for arg in node.args])


def parse_tied(tied: Mapping[str, str] | None, free, fixed) -> tuple[TiedParameter, ...]:
    """Checked tied parameters of a fit.

    A tied parameter must be a CMR parameter that is neither free nor fixed, and its
    expression may use free, fixed or default parameters but not other tied ones.
    """
    if tied is None:
        return ()
    if not isinstance(tied, Mapping):
        raise ParameterError(f"tied must be a mapping of parameter name to expression; got {type(tied).__name__}")
    out = []
    for name, expression in tied.items():
        if name not in MODEL_PARAMETER_NAMES:
            raise ParameterError(f"unknown tied parameter {name!r}; known: {', '.join(MODEL_PARAMETER_NAMES)}")
        if name in free or name in fixed:
            raise ParameterError(f"parameter {name} is tied and also {'free' if name in free else 'fixed'}")
        out.append(TiedParameter(name, expression))
    targets = {t.name for t in out}
    for t in out:
        chained = sorted(set(t.uses) & targets)
        if chained:
            raise ParameterError(
                f"tied parameter {t.name} = {t.expression!r} uses tied parameter(s) {', '.join(chained)}; "
                "write it in terms of free or fixed parameters"
            )
    return tuple(out)


def evaluate(tied: tuple[TiedParameter, ...], columns: Mapping[str, np.ndarray]) -> dict:
    """Values of every tied parameter given the other parameters' values (scalars or arrays)."""
    return {t.name: t(columns) for t in tied}
