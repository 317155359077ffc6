"""Typed parameters: parsing, validation and the error texts users see."""
from __future__ import annotations

import pytest

from tokbench import Param, Recipe
from tokbench.errors import ParamError
from tokbench.params import parse_assignments, resolve

DECLARED = (
    Param("K", "int", 6, low=3),
    Param("p", "float", 0.5, low=0.0, high=1.0),
    Param("mode", "str", "a", choices=("a", "b")),
    Param("flag", "bool", False),
    Param("grid", "floats", (), low=0.0),
)


def test_strings_are_parsed_to_the_declared_types():
    got = resolve(DECLARED, {"K": "7", "p": "1", "mode": "b", "flag": "yes", "grid": "1e-3,0.1"}, "t")
    assert got == {"K": 7, "p": 1.0, "mode": "b", "flag": True, "grid": (1e-3, 0.1)}
    assert isinstance(got["p"], float)


def test_defaults_fill_what_is_not_given():
    assert resolve(DECLARED, {}, "t") == {"K": 6, "p": 0.5, "mode": "a", "flag": False, "grid": ()}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"K": "2"}, "K=2 is out of range; allowed: int in [3, inf]"),
        ({"K": 3.5}, "K=3.5 is not a valid int"),
        ({"K": True}, "K=True is not a valid int"),
        ({"p": "x"}, "p='x' is not a valid float"),
        ({"mode": "c"}, "mode='c' is not allowed; allowed: one of a, b"),
        ({"flag": "maybe"}, "flag='maybe' is not a valid bool"),
        ({"grid": "0.1,-1"}, "grid=-1.0 is out of range"),
        ({"pp": 1}, "t has no parameter 'pp' (did you mean 'p'?)"),
    ],
)
def test_bad_values_say_what_is_allowed(given, message):
    with pytest.raises(ParamError) as info:
        resolve(DECLARED, given, "t")
    assert message in str(info.value)


def test_a_bad_default_is_caught_at_declaration():
    with pytest.raises(ParamError):
        Param("K", "int", 1, low=3)


def test_assignments_need_key_and_value():
    assert parse_assignments(["a=1", " b = x=y "]) == {"a": "1", "b": "x=y"}
    with pytest.raises(ParamError):
        parse_assignments(["novalue"])


def test_recipe_overrides_are_validated_like_parameters():
    recipe = Recipe(optimizer="gd", lr=1.0, steps=50)
    assert recipe.override({"steps": "10"}).steps == 10
    assert recipe.override({}).lr == 1.0
    with pytest.raises(ParamError, match="optimizer='lbfgs' is not allowed"):
        recipe.override({"optimizer": "lbfgs"})
