"""Fuzzing the three parsers of user input with hypothesis: suite files, run records and ``--set``.

Whatever the input, each parser either accepts it or raises a ``UsageError`` (one line and exit
code 2 in the CLI); anything else (a ``TypeError``, ``KeyError``, ``RecursionError``...) is a
traceback a user would see, and fails the test with the input that caused it.
"""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_records import ok_record
from tokbench.errors import UsageError
from tokbench.grid import expand, parse_settings
from tokbench.plugins import registry
from tokbench.results import RecordError, load_record, record_filename
from tokbench.suites import parse_suite

FUZZ_EXAMPLES = 600  # per test: 3000 inputs in all, each test a few seconds on 2 cores
FUZZ = settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                database=None)

# ---- suites --------------------------------------------------------------------------------------------------

KEYS = ["seeds", "grid", "tasks", "models", "task", "model", "train", "budget", "max_steps", "description", "*",
        "random-walk", "scc-automaton", "attn-rope", "last-token", "p", "K", "num_sccs", "steps", "lr", "lr_grid",
        "optimizer", "init_sigma", "x"]


def _toml_float(x: float) -> str:
    if math.isnan(x):
        return "nan"
    return ("-inf" if x < 0 else "inf") if math.isinf(x) else repr(x)


_key = st.sampled_from(KEYS).map(json.dumps) | st.sampled_from(KEYS).filter(lambda k: k != "*")
_scalar = (st.integers(-10, 10).map(str) | st.integers().map(str) | st.floats().map(_toml_float)
           | st.text(max_size=8).map(json.dumps) | st.sampled_from(["true", "false", '"*"', '"attn-*"', "1979-05-27"]))
_value = st.recursive(_scalar, lambda inner: st.lists(inner, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]")
                      | st.lists(st.tuples(_key, inner), max_size=3).map(
                          lambda kvs: "{" + ", ".join(f"{k} = {v}" for k, v in kvs) + "}"), max_leaves=6)
_header = (st.just("[[grid]]") | st.lists(_key, min_size=1, max_size=3).map(lambda ks: "[" + ".".join(ks) + "]")
           | st.lists(_key, min_size=1, max_size=3).map(lambda ks: "[grid." + ".".join(ks) + "]"))
_line = _header | st.tuples(_key, _value).map(lambda kv: f"{kv[0]} = {kv[1]}") | st.text(max_size=20)
SUITE_TEXT = st.lists(_line, max_size=14).map("\n".join)
VALID_START = 'seeds = 1\n[[grid]]\ntasks = ["random-walk"]\nmodels = ["last-token"]\n'


def _plan(text: str) -> None:
    try:
        suite = parse_suite(text, "fuzz.toml", "fuzz")
        expand(suite, registry())
    except UsageError:
        pass


@FUZZ
@given(SUITE_TEXT)
def test_suite_files_never_raise_anything_but_usage_errors(text):
    _plan(text)


@FUZZ
@given(SUITE_TEXT)
def test_suite_files_that_start_valid_never_raise_anything_but_usage_errors(text):
    _plan(VALID_START + text)


# ---- records -------------------------------------------------------------------------------------------------

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                 max_size=3), max_leaves=8)


def _paths(obj, prefix=()):
    """Every path into a JSON value, the root included."""
    yield prefix
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in items:
        yield from _paths(value, (*prefix, key))


BASE_RECORD = ok_record()
RECORD_PATHS = list(_paths(BASE_RECORD))[1:]


def _mutated(choice: int, value, drop: bool) -> dict:
    record = copy.deepcopy(BASE_RECORD)
    *parents, last = RECORD_PATHS[choice % len(RECORD_PATHS)]
    target = record
    for key in parents:
        target = target[key]
    if drop and isinstance(target, dict):
        del target[last]
    else:
        target[last] = value
    return record


def _load(folder: Path, content: bytes) -> None:
    path = folder / record_filename(BASE_RECORD["task"], BASE_RECORD["model"], BASE_RECORD["config_hash"])
    path.write_bytes(content)
    try:
        load_record(path)
    except RecordError:
        pass


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz-records")


@FUZZ
@given(choice=st.integers(min_value=0), value=_json, drop=st.booleans())
def test_tampered_records_are_reported_never_raised(folder, choice, value, drop):
    _load(folder, json.dumps(_mutated(choice, value, drop)).encode())


@FUZZ
@given(content=st.binary(max_size=200) | _json.map(lambda v: json.dumps(v).encode()))
def test_arbitrary_bytes_as_a_record_are_reported_never_raised(folder, content):
    _load(folder, content)


# ---- --set ---------------------------------------------------------------------------------------------------

_SET_KEYS = ["p", "K", "lr", "steps", "train.lr", "train.steps", "train.lr_grid", "train.optimizer", "task.p",
             "model.init_sigma", "init_sigma", "model.init", "task.num_sccs", "batch_size", "train.betas", "x.y", "",
             "task.", "train.nope"]
_SET_VALUES = st.text(max_size=12) | st.floats().map(_toml_float) | st.integers().map(str) | st.sampled_from(
    ["1e400", "-0", "0x10", "1,2,nan", ",", "true", "gd", " 5 ", "1_000"])
SETTINGS = st.lists(st.tuples(st.sampled_from(_SET_KEYS) | st.text(max_size=6), st.sampled_from(["=", "", "=="]),
                              _SET_VALUES).map("".join), max_size=4)
SET_SUITE = parse_suite('seeds = 1\n[[grid]]\ntasks = ["random-walk", "scc-automaton"]\n'
                        'models = ["attn-rope", "last-token"]\n', "set.toml", "set")


@FUZZ
@given(SETTINGS)
def test_set_values_never_raise_anything_but_usage_errors(items):
    try:
        expand(SET_SUITE, registry(), settings=parse_settings(items))
    except UsageError:
        pass
