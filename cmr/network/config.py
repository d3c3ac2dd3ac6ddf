"""What a general CMR network holds: context sublayers, weight expressions, sublayer, dependent and
dynamic parameters, distraction units and the recall scope (cymr's ``CMRParameters``).

A :class:`NetworkConfig` is plain data: every expression is parsed (never executed) when the
configuration is made, and every rule is checked there, so a bad configuration fails before any
data is read. :func:`NetworkConfig.from_cymr` reads a cymr ``CMRParameters`` object.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ..errors import ParameterError
from ._expressions import Expression

__all__ = ["NetworkConfig", "read_network", "default_parameters", "ITEM_PARAMETERS", "REQUIRED_PARAMETERS"]

#: parameters that may take one value per studied item (the others take one value per list)
ITEM_PARAMETERS = ("Lfc", "Lcf", "B_enc", "B_distract")
#: parameters every network needs (after sublayer, dependent and dynamic parameters are set)
REQUIRED_PARAMETERS = ("Lfc", "Lcf", "P1", "P2", "B_enc", "B_start", "B_rec", "T", "X1", "X2")
_SUBLAYER_PARAMETERS = ("Lfc", "Lcf", "P1", "P2", "B_enc", "B_start", "B_rec", "B_distract", "B_retention")
_ITEM_SEGMENT = ("task", "item")


def _region_name(region) -> str:
    if isinstance(region[0], str):
        return "-".join(region)
    return "_".join("-".join(part) for part in region)


def _mapping(value, what: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ParameterError(f"{what} must be a mapping; got {type(value).__name__}")
    return dict(value)


@dataclass(frozen=True, kw_only=True)
class NetworkConfig:
    """A CMR network in cymr's terms (Polyn, Norman & Kahana 2009; Morton & Polyn 2016).

    Parameters
    ----------
    weights : mapping
        ``{"fc": {region: expression}, "cf": {...}, "ff": {("task", "item"): expression}}``. An
        fc/cf region is ``(("task", "item"), (c_sublayer, c_segment))``; its expression is
        evaluated over the item patterns (``patterns["vector"][feature]``, items x units) and
        parameters (``"Afc + Dfc * loc"``). The ff expression uses similarity matrices. Every cf
        region must also be an fc region.
    sublayers : sequence of str, optional
        Context sublayers, in the order their weights are first given (default: that order).
    sublayer_params : mapping, optional
        ``{c_sublayer: {parameter: expression}}``: a parameter (``B_enc``, ``B_rec``, ``Lfc``,
        ``Lcf``, ``B_start``, ``P1``, ``P2``, ``B_distract``, ``B_retention``) with one value per
        sublayer, e.g. ``{"loc": {"B_enc": "B_enc_loc"}, "cat": {"B_enc": "B_enc_cat"}}``.
    dependent : mapping, optional
        ``{parameter: expression}`` of other parameters (cymr's ``set_dependent``).
    dynamic : mapping, optional
        ``{"study": {parameter: expression}, "recall": {...}}``: parameters computed from data
        columns of each list (``{"study": {"B_enc": "distract * B_distract"}}``).
    dynamic_scope : mapping, optional
        ``{parameter: "item" | "list"}`` (default ``"item"``): ``"list"`` takes the one value
        the expression has on a list.
    distraction : bool
        Distraction units: before each studied item, and once after the last (the retention
        interval), context integrates a distraction unit with ``B_distract`` (``B_retention``).
    scope : {"list", "pool"}
        Items that can be recalled: the studied list, or the whole item pool (intrusions).
    filter_recalls : bool
        Simulation only (cymr's context-match screening): a candidate is accepted with
        probability expit(A1 + A2 m), m the match of its item-to-context input to context.
    """

    weights: Mapping
    sublayers: tuple = ()
    sublayer_params: Mapping = field(default_factory=dict)
    dependent: Mapping = field(default_factory=dict)
    dynamic: Mapping = field(default_factory=dict)
    dynamic_scope: Mapping = field(default_factory=dict)
    distraction: bool = False
    scope: str = "list"
    filter_recalls: bool = False

    def __post_init__(self):
        weights = _mapping(self.weights, "weights")
        unknown = sorted(set(weights) - {"fc", "cf", "ff"})
        if unknown:
            raise ParameterError(f"weights connections must be fc, cf or ff; got {', '.join(map(repr, unknown))}")
        if not weights.get("fc"):
            raise ParameterError("weights need at least one fc region, e.g. "
                                 "{(('task', 'item'), ('task', 'item')): 'loc'}; got none")
        parsed = {}
        order = []
        for connect in ("fc", "cf", "ff"):
            regions = _mapping(weights.get(connect), f"weights[{connect!r}]")
            parsed[connect] = {}
            for region, text in regions.items():
                if connect == "ff":
                    if tuple(region) != _ITEM_SEGMENT:
                        raise ParameterError(f"ff weights take the region ('task', 'item'); got {region!r}")
                    region = _ITEM_SEGMENT
                else:
                    if (not isinstance(region, tuple) or len(region) != 2 or tuple(region[0]) != _ITEM_SEGMENT
                            or not isinstance(region[1], tuple) or len(region[1]) != 2
                            or not all(isinstance(part, str) for part in region[1])):
                        raise ParameterError(f"{connect} weights regions must be (('task', 'item'), (c_sublayer, "
                                             f"c_segment)); got {region!r}")
                    if region[1][1] in ("start", "distract"):
                        raise ParameterError(f"context segment name {region[1][1]!r} is reserved for the network's own "
                                             "units; choose another name")
                    region = (_ITEM_SEGMENT, tuple(region[1]))
                    if connect == "fc" and region[1][0] not in order:
                        order.append(region[1][0])
                    if connect == "cf" and region not in parsed["fc"]:
                        raise ParameterError(f"cf region {_region_name(region)!r} must also be an fc region; "
                                             f"fc regions: {', '.join(_region_name(r) for r in parsed['fc'])}")
                parsed[connect][region] = Expression(text, f"weight {connect} {_region_name(region)}")
        object.__setattr__(self, "weights", parsed)

        sublayers = tuple(self.sublayers) if self.sublayers else tuple(order)
        if list(sublayers) != order:
            raise ParameterError(f"sublayers must list the context sublayers in the order their fc weights are "
                                 f"given ({', '.join(order)}); got {', '.join(map(str, sublayers))}")
        object.__setattr__(self, "sublayers", sublayers)

        sub = {}
        for name, params in _mapping(self.sublayer_params, "sublayer_params").items():
            if name not in sublayers:
                raise ParameterError(f"sublayer_params names context sublayer {name!r}; sublayers: "
                                     f"{', '.join(sublayers)}")
            sub[name] = {}
            for par, text in _mapping(params, f"sublayer_params[{name!r}]").items():
                if par not in _SUBLAYER_PARAMETERS:
                    raise ParameterError(f"sublayer parameter {par!r} of {name!r} must be one of "
                                         f"{', '.join(_SUBLAYER_PARAMETERS)}")
                sub[name][par] = Expression(text, f"sublayer parameter {par} of {name}")
        object.__setattr__(self, "sublayer_params", sub)

        dependent = {name: Expression(text, f"dependent parameter {name}")
                     for name, text in _mapping(self.dependent, "dependent").items()}
        object.__setattr__(self, "dependent", dependent)

        dynamic = {}
        for phase, params in _mapping(self.dynamic, "dynamic").items():
            if phase not in ("study", "recall"):
                raise ParameterError(f"dynamic parameters are set for 'study' or 'recall'; got {phase!r}")
            dynamic[phase] = {par: Expression(text, f"dynamic {phase} parameter {par}")
                              for par, text in _mapping(params, f"dynamic[{phase!r}]").items()}
        scope = {}
        for par, value in _mapping(self.dynamic_scope, "dynamic_scope").items():
            if value not in ("item", "list"):
                raise ParameterError(f"dynamic_scope of {par!r} must be 'item' or 'list'; got {value!r}")
            scope[par] = value
        for phase, params in dynamic.items():
            for par in params:
                if scope.get(par, "item") == "item":
                    allowed = ITEM_PARAMETERS if phase == "study" else ("B_rec",)
                    if par not in allowed:
                        raise ParameterError(f"dynamic {phase} parameter {par!r} with scope 'item' must be one of "
                                             f"{', '.join(allowed)}; give it dynamic_scope 'list' for one value "
                                             "per list")
        object.__setattr__(self, "dynamic", dynamic)
        object.__setattr__(self, "dynamic_scope", scope)
        if not isinstance(self.distraction, bool):
            raise ParameterError(f"distraction must be True or False; got {self.distraction!r}")
        if not isinstance(self.filter_recalls, bool):
            raise ParameterError(f"filter_recalls must be True or False; got {self.filter_recalls!r}")
        if self.scope not in ("list", "pool"):
            raise ParameterError(f"scope must be 'list' or 'pool'; got {self.scope!r}")

    @classmethod
    def from_cymr(cls, param_def) -> "NetworkConfig":
        """The configuration of a cymr ``CMRParameters`` object (its sublayers, weights,
        sublayer_param, dependent, dynamic and options; fixed and free values are not read)."""
        for attr in ("sublayers", "weights", "dependent", "dynamic"):
            if not hasattr(param_def, attr):
                raise ParameterError(f"param_def must be a cymr CMRParameters object (with {attr}); "
                                     f"got {type(param_def).__name__}")
        options = dict(getattr(param_def, "options", {}) or {})
        dynamic = {k: v for k, v in dict(param_def.dynamic).items() if k in ("study", "recall")}
        return cls(
            weights=param_def.weights,
            sublayers=tuple(param_def.sublayers.get("c", ())),
            sublayer_params=dict(getattr(param_def, "sublayer_param", {}) or {}).get("c", {}),
            dependent=param_def.dependent,
            dynamic=dynamic,
            dynamic_scope=dict(param_def.dynamic.get("scope", {})),
            distraction=bool(options.get("distraction", False)),
            scope=options.get("scope", "list"),
            filter_recalls=bool(options.get("filter_recalls", False)),
        )


def _decoded_region(text, where):
    """cymr's region text: ``"task-item_loc-item"`` (fc, cf) or ``"task-item"`` (ff)."""
    parts = [tuple(part.split("-")) for part in str(text).split("_")]
    if not all(len(part) == 2 and all(part) for part in parts) or len(parts) > 2:
        raise ParameterError(f"{where}: region {text!r} must read 'sublayer-segment' or "
                             "'sublayer-segment_sublayer-segment'")
    return parts[0] if len(parts) == 1 else tuple(parts)


def read_network(path) -> tuple[NetworkConfig, dict, dict]:
    """A network configuration file as cymr writes it (``CMRParameters.to_json``).

    Returns
    -------
    config : NetworkConfig
    fixed : dict
        ``name -> value`` of the fixed parameters.
    free : dict
        ``name -> (low, high)`` of the free parameters (what :func:`cmr.fit_network` takes).
    """
    from ..checks import parse_json
    from ..errors import FileFormatError
    from ..files import check_input_file

    path = check_input_file(path, "network file", kind="json")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise FileFormatError(f"network file {str(path)!r} is not readable JSON text: {exc}") from None
    data = parse_json(text, f"network file {str(path)!r}")
    where = f"network file {str(path)!r}"
    if not isinstance(data, dict) or "weights" not in data:
        raise FileFormatError(f"{where} must hold a JSON object with weights (as cymr's to_json writes); got "
                              f"{type(data).__name__}{'' if not isinstance(data, dict) else ' without weights'}")
    weights = {}
    for connect, regions in _mapping(data["weights"], f"{where} weights").items():
        weights[connect] = {_decoded_region(region, where): expr
                            for region, expr in _mapping(regions, f"{where} weights {connect}").items()}
    dynamic = _mapping(data.get("dynamic"), f"{where} dynamic")
    options = _mapping(data.get("options"), f"{where} options")
    config = NetworkConfig(
        weights=weights,
        sublayers=tuple(_mapping(data.get("sublayers"), f"{where} sublayers").get("c", ())),
        sublayer_params=_mapping(data.get("sublayer_param"), f"{where} sublayer_param").get("c", {}),
        dependent=_mapping(data.get("dependent"), f"{where} dependent"),
        dynamic={k: v for k, v in dynamic.items() if k in ("study", "recall")},
        dynamic_scope=dynamic.get("scope", {}),
        distraction=bool(options.get("distraction", False)),
        scope=options.get("scope", "list"),
        filter_recalls=bool(options.get("filter_recalls", False)),
    )
    fixed = _mapping(data.get("fixed"), f"{where} fixed")
    free = {name: tuple(pair) if isinstance(pair, list) else pair
            for name, pair in _mapping(data.get("free"), f"{where} free").items()}
    return config, fixed, free


def default_parameters() -> dict[str, float]:
    """A new dict of the parameters every network needs, and the localist weight parameters, at their defaults.

    :data:`REQUIRED_PARAMETERS` and ``Afc, Dfc, Acf, Dcf`` (the weights ``"Afc + Dfc * loc"`` of a
    localist network) take textbook CMR's defaults (:func:`cmr.default_parameters`, cymr's
    Morton2013_mixed set). A network's own parameters (its sublayers', ``B_distract`` and
    ``B_retention`` of distraction, those its expressions name) have no defaults: add them.
    """
    from ..textbook.parameters import default_parameters as textbook_defaults

    return textbook_defaults()
