"""Expressions of the network configuration (weights, dependent, dynamic and sublayer parameters).

cymr evaluates these strings with ``eval`` in the numpy namespace; here they are parsed with
:mod:`ast` and only a small array language is walked, so no user text is ever executed:

* numbers, names (parameters, pattern features, data columns), ``+ - * / **``, unary ``-``/``+``,
  parentheses, and lists ``[a, b]`` (side by side along the second axis, so ``mean([a, b])`` is
  the mean of two parameters, as in cymr);
* element-wise functions ``sqrt exp log abs minimum maximum clip where`` (and ``min``/``max`` of
  two arguments, as the tied expressions of :mod:`cmr.textbook.tied`);
* reductions ``mean sum amin amax`` (and ``max``/``min``/``std`` of one argument): each reduces
  over every axis but the first, which indexes lists, so one expression evaluated on all lists
  at once gives what cymr gives list by list.

An expression is at most ``MAX_LENGTH`` characters and nested at most
:data:`cmr.textbook.tied.MAX_EXPRESSION_DEPTH` levels deep (as tied expressions), so neither
the parse nor the walk can run out of stack.

Values are numpy arrays whose first axis is the list (parameters are ``(L, 1)`` or
``(L, 1, 1)``); every operation broadcasts.
"""
from __future__ import annotations

import ast
import math
import operator

import numpy as np

from ..errors import ParameterError
from ..textbook.tied import MAX_EXPRESSION_DEPTH, expression_depth

__all__ = ["Expression", "FUNCTIONS"]

MAX_LENGTH = 1000

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.Pow: operator.pow}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}


def _reduce(func):
    def reduce(x):
        x = np.asarray(x, dtype=np.float64)
        if x.ndim <= 1:
            return func(x)
        return func(x, axis=tuple(range(1, x.ndim)), keepdims=True)
    return reduce


#: name -> (function, number of arguments)
FUNCTIONS = {
    "sqrt": (np.sqrt, 1), "exp": (np.exp, 1), "log": (np.log, 1), "abs": (np.abs, 1),
    "minimum": (np.minimum, 2), "maximum": (np.maximum, 2), "clip": (np.clip, 3), "where": (np.where, 3),
    "mean": (_reduce(np.mean), 1), "sum": (_reduce(np.sum), 1), "amin": (_reduce(np.min), 1),
    "amax": (_reduce(np.max), 1), "std": (_reduce(np.std), 1),
}
_TWO_OR_ONE = {"min": (np.minimum, _reduce(np.min)), "max": (np.maximum, _reduce(np.max))}


class Expression:
    """One parsed expression; ``what`` names it in error messages (``"weight fc loc-item"``)."""

    def __init__(self, text, what: str):
        if not isinstance(text, str) or not text.strip():
            raise ParameterError(f"{what}: expression must be non-empty text; got {text!r}")
        if len(text) > MAX_LENGTH:
            raise ParameterError(f"{what}: expression must be at most {MAX_LENGTH} characters; got {len(text)}")
        self.text = text
        self.what = what
        try:
            self._tree = ast.parse(text.strip(), mode="eval").body
        except (RecursionError, MemoryError):  # nesting the parser itself cannot hold
            raise ParameterError(f"{what}: expression must be nested at most {MAX_EXPRESSION_DEPTH} levels deep; "
                                 f"got {text[:40]!r}... nested deeper") from None
        except (SyntaxError, ValueError) as exc:
            raise ParameterError(f"{what}: cannot parse {text!r} ({getattr(exc, 'msg', exc)})") from None
        depth = expression_depth(self._tree)  # before any walk: _check and _walk recurse once per level
        if depth > MAX_EXPRESSION_DEPTH:
            raise ParameterError(f"{what}: expression must be nested at most {MAX_EXPRESSION_DEPTH} levels deep; "
                                 f"got {depth} levels")
        self._check(self._tree)
        self.names = frozenset(n.id for n in ast.walk(self._tree)
                               if isinstance(n, ast.Name) and n.id not in FUNCTIONS and n.id not in _TWO_OR_ONE)

    def __repr__(self):
        return f"Expression({self.text!r})"

    def _check(self, node):
        where = f"{self.what} = {self.text!r}"
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)) \
                    or not math.isfinite(float(node.value)):
                raise ParameterError(f"{where}: constants must be finite numbers; got {node.value!r}")
        elif isinstance(node, ast.Name):
            pass
        elif isinstance(node, (ast.List, ast.Tuple)) and node.elts:
            for element in node.elts:
                self._check(element)
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            self._check(node.left)
            self._check(node.right)
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            self._check(node.operand)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
                node.func.id in FUNCTIONS or node.func.id in _TWO_OR_ONE):
            name = node.func.id
            arity = (1, 2) if name in _TWO_OR_ONE else (FUNCTIONS[name][1],)
            if node.keywords or len(node.args) not in arity:
                raise ParameterError(f"{where}: {name} takes {' or '.join(map(str, arity))} positional argument(s); "
                                     f"got {len(node.args) + len(node.keywords)}")
            for arg in node.args:
                self._check(arg)
        else:
            known = ", ".join(list(FUNCTIONS) + list(_TWO_OR_ONE))
            raise ParameterError(f"{where}: only numbers, names, + - * / **, parentheses and {known} are "
                                 f"allowed; got {type(node).__name__}")

    def __call__(self, values):
        """Value of the expression (a float64 array) given ``values`` (name -> array)."""
        missing = sorted(self.names - set(values))
        if missing:
            raise ParameterError(f"{self.what} = {self.text!r}: unknown name(s) {', '.join(missing)}; "
                                 f"known: {', '.join(sorted(values))}")
        with np.errstate(all="ignore"):  # a NaN or inf result surfaces as a NaN likelihood, never hidden
            try:
                return np.asarray(self._walk(self._tree, values), dtype=np.float64)
            except ValueError as exc:  # shapes that do not broadcast
                raise ParameterError(f"{self.what} = {self.text!r}: operands do not fit together ({exc})") from None
            except ZeroDivisionError:
                raise ParameterError(f"{self.what} = {self.text!r} must evaluate to a finite number; got a division "
                                     "by zero") from None
            except OverflowError:
                raise ParameterError(f"{self.what} = {self.text!r} must evaluate to a finite number; got a result "
                                     "beyond the largest float (1.8e308)") from None

    def _walk(self, node, values):
        if isinstance(node, ast.Constant):
            return float(node.value)
        if isinstance(node, ast.Name):
            return values[node.id]
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](self._walk(node.left, values), self._walk(node.right, values))
        if isinstance(node, ast.UnaryOp):
            return _UNARY[type(node.op)](self._walk(node.operand, values))
        if isinstance(node, (ast.List, ast.Tuple)):  # [a, b]: side by side along the item axis, per list
            parts = [np.asarray(self._walk(e, values), dtype=np.float64) for e in node.elts]
            parts = [p.reshape(1, 1) if p.ndim == 0 else p.reshape(p.shape[0], -1) if p.ndim == 1 else p
                     for p in parts]
            rows = max(p.shape[0] for p in parts)
            return np.concatenate([np.broadcast_to(p, (rows,) + p.shape[1:]) for p in parts], axis=1)
        args = [self._walk(arg, values) for arg in node.args]
        name = node.func.id
        if name in _TWO_OR_ONE:
            pair, single = _TWO_OR_ONE[name]
            return pair(*args) if len(args) == 2 else single(args[0])
        return FUNCTIONS[name][0](*args)
