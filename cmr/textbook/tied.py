"""Tied (dependent) parameters: a parameter defined by an arithmetic expression of others.

cymr's ``Parameters.set_dependent(Dfc="1 - Lfc")`` evaluates the expression with ``eval``;
here expressions are parsed with :mod:`ast` and only a small arithmetic language is walked,
so no user text is ever executed:

* numbers, parameter names (``B_enc``), ``+ - * / **``, unary ``-`` and ``+``, parentheses;
* the functions ``sqrt``, ``exp``, ``log``, ``abs``, ``min``, ``max`` and ``clip(x, low, high)``;
* ``mean([...])`` and ``sum([...])`` of a list of expressions (``mean([Lfc, Lcf])``).

``tied={"B_rec": "B_enc"}`` makes ``B_rec`` always equal ``B_enc``; ``{"Dfc": "1 - Lfc"}`` is
cymr's standard dependency of Morton & Polyn (2016). Expressions evaluate on scalars or on
numpy arrays (a whole optimiser population at once).

An expression is at most :data:`MAX_EXPRESSION_LENGTH` characters and
:data:`MAX_EXPRESSION_DEPTH` levels deep; its constants are finite numbers. Before a fit,
:func:`check_tied_range` evaluates every tied parameter over a grid of the search bounds of
the free parameters it uses (both bounds and points between them) and refuses, with
:class:`~cmr.errors.ParameterError`, an expression that cannot be evaluated there (division
by zero, overflow, a complex value) or whose value leaves its parameter's admissible range.
"""
from __future__ import annotations

import ast
import itertools
import math
import operator
from typing import Mapping

import numpy as np

from ..errors import ParameterError
from .parameters import MODEL_PARAMETER_NAMES

__all__ = ["TiedParameter", "parse_tied", "evaluate", "check_tied_range", "MAX_EXPRESSION_LENGTH",
           "MAX_EXPRESSION_DEPTH", "expression_depth"]

#: longest tied expression accepted, in characters (a longer one is refused before it is parsed)
MAX_EXPRESSION_LENGTH = 1000
#: deepest nesting of operations and calls in a tied expression
MAX_EXPRESSION_DEPTH = 50
#: grid levels per free parameter an expression uses, most first; the first whose grid has at
#: most _GRID_POINTS points is taken
_GRID_LEVELS = (9, 5, 3, 2)
_GRID_POINTS = 20000

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.Pow: operator.pow}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_FUNCTIONS = {"sqrt": (np.sqrt, 1), "exp": (np.exp, 1), "log": (np.log, 1), "abs": (np.abs, 1),
              "min": (np.minimum, 2), "max": (np.maximum, 2), "clip": (np.clip, 3)}
# functions of a list of expressions, element by element: mean([Lfc, Lcf]) as numpy (and cymr) gives it
_LIST_FUNCTIONS = {"mean": np.mean, "sum": np.sum}


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
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise ParameterError(f"tied parameter {name}: expression must be at most {MAX_EXPRESSION_LENGTH} "
                             f"characters; got {len(text)}")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ParameterError(f"tied parameter {name}: cannot parse {_short(repr(text), 60)} ({exc.msg})") from None
    except ValueError as exc:  # a NUL character
        raise ParameterError(f"tied parameter {name}: cannot parse {_short(repr(text), 60)} ({exc})") from None
    except (RecursionError, MemoryError):  # nesting the parser itself cannot hold
        raise ParameterError(f"tied parameter {name}: expression must be nested at most {MAX_EXPRESSION_DEPTH} "
                             f"levels deep; got {text[:40]!r}... nested deeper") from None
    depth = expression_depth(tree)
    if depth > MAX_EXPRESSION_DEPTH:
        raise ParameterError(f"tied parameter {name}: expression must be nested at most {MAX_EXPRESSION_DEPTH} "
                             f"levels deep; got {depth} levels")
    _check(tree, name, text)
    return tree


def expression_depth(tree) -> int:
    """Nesting depth of an expression tree (without recursion: the tree may be deep)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(node)
                     if not isinstance(child, (ast.expr_context, ast.operator, ast.unaryop)))
    return deepest


def _check(node, name, text):
    where = f"tied parameter {name} = {_short(repr(text), 60)}"
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise ParameterError(f"{where}: only numbers are allowed as constants; got {node.value!r}")
        try:
            finite = math.isfinite(float(node.value))
        except OverflowError:
            finite = False
        if not finite:
            raise ParameterError(f"{where}: constants must be finite numbers (at most 1.8e308 in size); "
                                 f"got {_short(ast.get_source_segment(text.strip(), node) or node.value)}")
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
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _LIST_FUNCTIONS:
        if node.keywords or len(node.args) != 1:
            raise ParameterError(f"{where}: {node.func.id} takes one list such as [Lfc, Lcf]")
        arg = node.args[0]
        for element in (arg.elts if isinstance(arg, (ast.List, ast.Tuple)) and arg.elts else [arg]):
            _check(element, name, text)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        arity = _FUNCTIONS[node.func.id][1]
        if node.keywords or len(node.args) != arity:
            raise ParameterError(f"{where}: {node.func.id} takes {arity} positional argument(s)")
        for arg in node.args:
            _check(arg, name, text)
    else:
        raise ParameterError(
            f"{where}: only numbers, parameter names, + - * / **, parentheses and "
            f"{', '.join(list(_FUNCTIONS) + list(_LIST_FUNCTIONS))} are allowed; got {type(node).__name__}"
        )


def _names(node) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id not in _FUNCTIONS
            and n.id not in _LIST_FUNCTIONS}


def _walk(node, values):
    if isinstance(node, ast.Constant):
        return float(node.value)
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_walk(node.left, values), _walk(node.right, values))
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_walk(node.operand, values))
    if node.func.id in _LIST_FUNCTIONS:
        arg = node.args[0]
        parts = [_walk(e, values) for e in (arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg])]
        return _LIST_FUNCTIONS[node.func.id](np.stack(np.broadcast_arrays(*parts)), axis=0)
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


def _short(value, width: int = 40) -> str:
    text = str(value)
    return text if len(text) <= width else f"{text[:width]}... ({len(text)} characters)"


def _plain(value: float) -> str:
    return f"{float(value):.6g}"


def check_tied_range(tied: tuple[TiedParameter, ...], free, bounds, template: Mapping[str, float],
                     lower: Mapping[str, float], upper: Mapping[str, float]) -> None:
    """ParameterError unless every tied parameter is a real number within its admissible range
    over the search bounds.

    Each expression is evaluated on a grid of the free parameters it uses (their search bounds
    and evenly spaced points between them: 9 levels per parameter, fewer when it uses many);
    parameters that are not free take their values from ``template`` (fixed or default values).

    Parameters
    ----------
    tied : tuple of TiedParameter
    free : sequence of str
        Free parameters, in the order of ``bounds``.
    bounds : sequence of (low, high)
        Search bounds of the free parameters.
    template : mapping of str to float
        Values of the parameters that are not free.
    lower, upper : mapping of str to float
        Admissible range of every parameter.
    """
    search = dict(zip(free, bounds))
    for t in tied:
        used = [name for name in t.uses if name in search]
        levels = next((n for n in _GRID_LEVELS if n ** len(used) <= _GRID_POINTS), None)
        if levels is None:  # too many parameters for a full grid: all low, all high, each high alone
            points = np.array([[search[n][0] for n in used]] + [[search[n][1] for n in used]]
                              + [[search[m][i == j] for j, m in enumerate(used)] for i in range(len(used))])
        else:
            axes = [np.linspace(*search[n], levels) for n in used]
            grid = list(itertools.product(*axes))
            points = np.array(grid, dtype=np.float64).reshape(len(grid), len(used))
        columns = {name: np.float64(value) for name, value in template.items()}
        columns.update({name: points[:, j].copy() for j, name in enumerate(used)})
        ranges = ", ".join(f"{n} in [{_plain(search[n][0])}, {_plain(search[n][1])}]" for n in used)
        where = f"tied parameter {t.name} = {_short(repr(t.expression), 60)}" + (f" over the search bounds ({ranges})" if used else "")
        try:
            value = t(columns)
        except ZeroDivisionError:
            raise ParameterError(f"{where} must evaluate to a finite number; got a division by zero") from None
        except OverflowError:
            raise ParameterError(f"{where} must evaluate to a finite number; got a result beyond the "
                                 "largest float (1.8e308)") from None
        if np.iscomplexobj(value):
            raise ParameterError(f"{where} must evaluate to a real number; got a complex value")
        value = np.broadcast_to(np.asarray(value, dtype=np.float64), (points.shape[0],))
        with np.errstate(invalid="ignore"):
            bad = ~(np.isfinite(value) & (value >= lower[t.name]) & (value <= upper[t.name]))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            at = ", ".join(f"{n}={_plain(points[i, j])}" for j, n in enumerate(used))
            raise ParameterError(
                f"{where} must stay within {t.name}'s admissible range [{_plain(lower[t.name])}, "
                f"{_plain(upper[t.name])}]; got {_plain(value[i])}" + (f" at {at}" if at else "")
                + ("; narrow the search bounds or change the expression" if used else "")
            )
