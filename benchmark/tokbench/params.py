"""Typed, validated parameters for tasks, models and training recipes.

A :class:`Param` declares one parameter: its type, default, allowed range or
choices, and a one-line help text. :func:`resolve` turns user input (strings
from ``--set key=value``, or already typed values from a suite file) into a
complete, validated parameter dict.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tokbench.errors import ParamError, did_you_mean

_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "floats": tuple, "ints": tuple}
_ELEMENT = {"floats": float, "ints": int}  # the element type of a tuple parameter
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


@dataclass(frozen=True)
class Param:
    """One declared parameter.

    ``type`` is one of ``"int"``, ``"float"``, ``"str"``, ``"bool"``, ``"floats"``
    (a tuple of floats, written ``1e-3,1e-2`` on the command line) or ``"ints"`` (a
    tuple of integers, written ``100,300``). Floats are always
    finite (nan and inf are rejected, whatever the range). Numbers may
    carry an inclusive range ``[low, high]`` (either end may be ``None``; for
    tuples it applies to every element); any type may instead carry a tuple
    of allowed ``choices``.
    """

    name: str
    type: str
    default: Any
    help: str = ""
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] | None = None

    def __post_init__(self) -> None:
        if self.type not in _TYPES:
            raise ValueError(f"Param {self.name!r}: type must be one of {sorted(_TYPES)}")
        self.check(self.default)  # a bad default is a bug in the plugin

    def allowed(self) -> str:
        """Describe the allowed values in words, for error messages and listings."""
        if self.choices is not None:
            return "one of " + ", ".join(str(c) for c in self.choices)
        if self.low is None and self.high is None:
            return f"any {self.type}"
        low = "-inf" if self.low is None else self.low
        high = "inf" if self.high is None else self.high
        return f"{self.type} in [{low}, {high}]"

    def parse(self, text: str) -> Any:
        """Convert command-line text to this parameter's type, then validate it."""
        kind = _TYPES[self.type]
        try:
            if kind is bool:
                lowered = text.strip().lower()
                if lowered not in _TRUE | _FALSE:
                    raise ValueError(text)
                value: Any = lowered in _TRUE
            elif kind is int:
                value = int(text)
            elif kind is tuple:
                value = tuple(_ELEMENT[self.type](part) for part in text.split(",") if part.strip())
            else:
                value = kind(text)
        except ValueError:
            raise ParamError(f"{self.name}={text!r} is not a valid {self.type}; allowed: {self.allowed()}") from None
        return self.check(value)

    def check(self, value: Any) -> Any:
        """Validate an already typed value; return it normalised (ints accepted for floats)."""
        kind = _TYPES[self.type]
        if kind is tuple:
            if not isinstance(value, (list, tuple)):
                raise ParamError(f"{self.name}={value!r} is not a valid {self.type}; allowed: {self.allowed()}")
            return tuple(self._check_scalar(_ELEMENT[self.type], v) for v in value)
        return self._check_scalar(kind, value)

    def _check_scalar(self, kind: type, value: Any) -> Any:
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if kind is not bool and isinstance(value, bool) or not isinstance(value, kind):
            raise ParamError(f"{self.name}={value!r} is not a valid {self.type}; allowed: {self.allowed()}")
        if kind is float and not math.isfinite(value):  # nan passes every comparison, and JSON has no nan or inf
            raise ParamError(f"{self.name}={value!r} is not finite; allowed: {self.allowed()} (finite)")
        if self.choices is not None and value not in self.choices:
            raise ParamError(f"{self.name}={value!r} is not allowed; allowed: {self.allowed()}")
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise ParamError(f"{self.name}={value!r} is out of range; allowed: {self.allowed()}")
        return value

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "default": list(self.default) if isinstance(self.default, tuple) else self.default,
            "help": self.help,
            "low": self.low,
            "high": self.high,
            "choices": list(self.choices) if self.choices is not None else None,
        }


def resolve(declared: Sequence[Param], given: Mapping[str, Any], owner: str) -> dict[str, Any]:
    """Return every declared parameter's value: ``given`` over the defaults.

    String values are parsed to the declared type; other values are checked.
    ``owner`` names what the parameters belong to, for the error message.
    """
    by_name = {p.name: p for p in declared}
    for key in given:
        if key not in by_name:
            allowed = ", ".join(by_name) or "none"
            raise ParamError(f"{owner} has no parameter {key!r}{did_you_mean(key, by_name)}; allowed: {allowed}")
    resolved = {}
    for p in declared:
        if p.name in given:
            value = given[p.name]
            resolved[p.name] = p.parse(value) if isinstance(value, str) and p.type != "str" else p.check(value)
        else:
            resolved[p.name] = p.default
    return resolved


def parse_assignments(items: Sequence[str]) -> dict[str, str]:
    """Parse ``["k=v", ...]`` from the command line into a dict of strings."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ParamError(f"--set expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out
