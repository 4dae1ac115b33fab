"""Unit tests of the boundary codec (core/testenvmanager/sandbox/codec.py); no sandbox processes
except one ``python -I -S`` child that loads the module by path."""

from __future__ import annotations

import ast
import collections
import enum
import importlib.util
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CODEC_PATH = (Path(__file__).resolve().parents[2] / "core" / "testenvmanager" / "sandbox"
              / "codec.py")


def load_codec(name: str) -> ModuleType:
    """Load codec.py the way the sandbox does: by file path, under ``name``, not registered in
    ``sys.modules``."""
    spec = importlib.util.spec_from_file_location(name, CODEC_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


codec = load_codec("codec_under_test")
encode, decode, Limits = codec.encode, codec.decode, codec.Limits
EncodeError, DecodeError, BoundaryError = codec.EncodeError, codec.DecodeError, codec.BoundaryError

FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LIST_ITERATOR = type(iter([]))
ALLOWED_TYPES = {type(None), bool, int, float, complex, str, bytes, bytearray, tuple, list, dict,
                 set, frozenset, range, LIST_ITERATOR}
TAGS = ["l", "t", "d", "s", "fs", "it", "i", "f", "c", "b", "ba", "r"]


# ------------------------------------------------------------------------------------ helpers
def same(a: object, b: object) -> bool:
    """Equal values of exactly the same types, recursively (nan matches nan, -0.0 only -0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        assert isinstance(b, float)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, complex):
        assert isinstance(b, complex)
        return same(a.real, b.real) and same(a.imag, b.imag)
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple))
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return len(a) == len(b) and all(same(ka, kb) and same(va, vb)
                                        for (ka, va), (kb, vb) in zip(a.items(), b.items()))
    if isinstance(a, (set, frozenset)):
        assert isinstance(b, (set, frozenset))
        if len(a) != len(b):
            return False
        unmatched = list(b)
        for x in a:
            match = next((i for i, y in enumerate(unmatched) if same(x, y)), None)
            if match is None:
                return False
            unmatched.pop(match)
        return True
    if isinstance(a, range):
        assert isinstance(b, range)
        return (a.start, a.stop, a.step) == (b.start, b.stop, b.step)
    return a == b


def assert_round_trip(value: object, limits: object = None) -> object:
    data = encode(value) if limits is None else encode(value, limits)
    assert isinstance(data, bytes)
    data.decode("ascii")  # pure ASCII JSON
    back = decode(data) if limits is None else decode(data, limits)
    assert same(value, back), (value, back, data)
    return back


def check_plain(value: object, depth: int = 0) -> None:
    """``value`` is built only from the allowed exact built-in types."""
    assert depth <= 1000
    t = type(value)
    assert t in ALLOWED_TYPES, t
    if t is LIST_ITERATOR:
        raise AssertionError("use check_plain on list(iterator)")
    if isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            if type(item) is LIST_ITERATOR:
                item = list(item)
            check_plain(item, depth + 1)
    elif isinstance(value, dict):
        for k, v in value.items():
            check_plain(list(k) if type(k) is LIST_ITERATOR else k, depth + 1)
            check_plain(list(v) if type(v) is LIST_ITERATOR else v, depth + 1)
    elif isinstance(value, range):
        assert type(value.start) is int and type(value.stop) is int and type(value.step) is int


def decode_or_reject(data: bytes, limits: object = None) -> None:
    """The decoder's totality contract for one input."""
    try:
        value = decode(data) if limits is None else decode(data, limits)
    except DecodeError:
        return
    check_plain(list(value) if type(value) is LIST_ITERATOR else value)


def nest(depth: int, inner: object = 1, wrap=lambda x: [x]) -> object:
    value = inner
    for _ in range(depth):
        value = wrap(value)
    return value


def depth_of(value: object) -> int:
    if isinstance(value, (list, tuple, set, frozenset)):
        return 1 + max((depth_of(x) for x in value), default=0)
    if isinstance(value, dict):
        return 1 + max((max(depth_of(k), depth_of(v)) for k, v in value.items()), default=0)
    return 0


def items_of(value: object) -> int:
    if isinstance(value, (list, tuple, set, frozenset)):
        return len(value) + sum(items_of(x) for x in value)
    if isinstance(value, dict):
        return len(value) + sum(items_of(k) + items_of(v) for k, v in value.items())
    return 0


# --------------------------------------------------------------------------------- strategies
texts = st.text(st.characters(), max_size=8) | st.sampled_from(
    ["", "\ud800", "a\udfffb", "\udc80\ud800", "\x00", '"\\', "\u00e9\U0001f642", "1"])
ints = st.integers() | st.integers(min_value=-(2**200), max_value=2**200) | st.sampled_from(
    [0, -1, 2**63 - 1, 2**63, -(2**63) + 1, -(2**63), -(2**63) - 1, 2**64])
floats = st.floats() | st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, 1e16])
complexes = st.builds(complex, floats, floats)
ranges = st.builds(range, ints, ints, ints.filter(bool))
hashable_scalars = st.one_of(st.none(), st.booleans(), ints, floats, complexes, texts,
                             st.binary(max_size=10), ranges)
hashables = st.recursive(
    hashable_scalars,
    lambda inner: st.lists(inner, max_size=3).map(tuple) | st.frozensets(inner, max_size=3),
    max_leaves=6)
scalars = hashable_scalars | st.binary(max_size=10).map(bytearray)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(texts, inner, max_size=4),
        st.dictionaries(hashables, inner, max_size=4),
        st.sets(hashables, max_size=4),
        st.frozensets(hashables, max_size=4),
    ),
    max_leaves=20)


# ------------------------------------------------------------------------------- round trips
@FAST
@given(values)
def test_round_trip_keeps_values_and_exact_types(value: object) -> None:
    assert_round_trip(value)


@pytest.mark.parametrize("value", [
    0.0, -0.0, math.inf, -math.inf, 5e-324, -5e-324, 1.7976931348623157e308, 0.1, 1e16, 1e-7,
    2.5, complex(-0.0, math.inf), complex(math.nan, -0.0), 1j,
])
def test_float_specials_round_trip(value: object) -> None:
    assert_round_trip(value)


def test_nan_and_negative_zero_keep_their_identity_as_floats() -> None:
    back = decode(encode([math.nan, -0.0, 0.0]))
    assert isinstance(back, list) and math.isnan(back[0])
    assert math.copysign(1.0, back[1]) == -1.0 and math.copysign(1.0, back[2]) == 1.0


@pytest.mark.parametrize("value", [
    0, -1, 2**63 - 1, 2**63, -(2**63) + 1, -(2**63), 10**10_000, -(10**10_000) + 7, 2**100_000,
    range(10**30, -(10**40), -(7**50)),
], ids=lambda v: f"{type(v).__name__}{v.bit_length() if isinstance(v, int) else ''}")
def test_big_ints_round_trip(value: object) -> None:
    assert_round_trip(value)


def test_ten_thousand_digit_int_is_not_subject_to_the_str_conversion_limit() -> None:
    value = 10**10_000 - 1  # 10_000 nines
    assert encode(value).startswith(b'["i",')
    assert decode(encode(value)) == value


@pytest.mark.parametrize("value", ["", "\ud800", "a\udfffb", "\udfff\ud800", "\x00\x1f", "é🙂",
                                   '"quoted" \\ back', "x" * 10_000])
def test_strings_round_trip_including_lone_surrogates(value: str) -> None:
    assert_round_trip(value)
    assert_round_trip([value, {value: value}])


def test_similar_values_stay_distinct() -> None:
    values = [1, 1.0, True, "1", b"1", bytearray(b"1"), [1], (1,), {1}, frozenset({1}),
              {1: 1}, {"1": 1}, 1 + 0j, range(1), None, 0, False, 0.0, -0.0, "", b"", [], (),
              {}, set(), frozenset()]
    encoded = [encode(v) for v in values]
    assert len(set(encoded)) == len(values)
    for value, data in zip(values, encoded):
        assert same(decode(data), value)


def test_dict_keeps_key_types_and_insertion_order() -> None:
    value = {"1": "s", 1: "i", 2.0: "f", (1,): "t", b"1": "b", None: "n", frozenset({1}): "fs",
             range(3): "r", 1j: "c", -0.0: "z", True: "bool"}  # True replaces 1's value
    back = assert_round_trip(value)
    assert isinstance(back, dict)
    assert [type(k) for k in back] == [str, int, float, tuple, bytes, type(None), frozenset,
                                       range, complex, float]
    assert back[1] == "bool"
    assert list(decode(encode({"b": 1, "a": 2, "c": 3}))) == ["b", "a", "c"]


def test_pinned_wire_format() -> None:
    assert encode(None) == b"null" and encode(True) == b"true" and encode(False) == b"false"
    assert encode(1) == b"1" and encode(1.0) == b"1.0" and encode("1") == b'"1"'
    assert encode([1, (2,)]) == b'["l",1,["t",2]]'
    assert encode({"a": [1]}) == b'{"a":["l",1]}'
    assert encode({1: 2}) == b'["d",1,2]'
    assert encode({1}) == b'["s",1]' and encode(frozenset({1})) == b'["fs",1]'
    assert encode(b"a") == b'["b","YQ=="]' and encode(bytearray(b"a")) == b'["ba","YQ=="]'
    assert encode(2**64) == b'["i","10000000000000000"]'
    assert encode(-(2**64)) == b'["i","-10000000000000000"]'
    assert encode(math.nan) == b'["f","nan"]' and encode(-math.inf) == b'["f","-inf"]'
    assert encode(1j) == b'["c","0x0.0p+0","0x1.0000000000000p+0"]'
    assert encode(range(3)) == b'["r",0,3,1]'
    assert encode(iter([1])) == b'["it",1]'
    assert encode("\ud800\u00e9") == b'"\\ud800\\u00e9"'


# ---------------------------------------------------------------------------------- iterators
@pytest.mark.parametrize("make, expected", [
    (lambda: (x * 2 for x in range(3)), [0, 2, 4]),
    (lambda: map(str, [1, 2]), ["1", "2"]),
    (lambda: filter(None, [0, 1, 2]), [1, 2]),
    (lambda: zip([1, 2], "ab"), [(1, "a"), (2, "b")]),
    (lambda: enumerate("ab"), [(0, "a"), (1, "b")]),
    (lambda: reversed([1, 2]), [2, 1]),
    (lambda: iter([1, [2]]), [1, [2]]),
    (lambda: iter({"k": 1}), ["k"]),
    (lambda: iter(range(3)), [0, 1, 2]),
    (lambda: itertools.islice(itertools.count(), 3), [0, 1, 2]),
    (lambda: iter(()), []),
])
def test_iterators_are_drained_into_a_list_iterator(make, expected) -> None:
    back = decode(encode(make()))
    assert type(back) is LIST_ITERATOR
    assert back != expected  # an iterator is not a list, as with the original
    assert same(list(back), expected)
    nested = decode(encode({"it": make()}))
    assert isinstance(nested, dict) and same(list(nested["it"]), expected)


def test_endless_iterator_stops_at_max_items_quickly() -> None:
    started = time.monotonic()
    with pytest.raises(EncodeError, match="max_items"):
        encode(itertools.count())
    assert time.monotonic() - started < 5.0

    def endless():
        while True:
            yield "x" * 1000

    with pytest.raises(EncodeError, match="max_items"):
        encode([endless()], Limits(max_items=50))
    with pytest.raises(EncodeError, match="max_bytes"):  # stops long before max_items
        encode(endless(), Limits(max_bytes=100_000))


def test_exceptions_of_the_iterator_itself_propagate() -> None:
    def broken():
        yield 1
        raise KeyError("from the candidate")

    with pytest.raises(KeyError, match="from the candidate"):
        encode(broken())


def test_a_generator_that_grows_its_list_is_counted() -> None:
    box: list = []

    def grow():
        box.append(7)
        yield 1

    box.append(grow())
    with pytest.raises(EncodeError, match="max_items"):
        encode(box, Limits(max_items=2))  # 1 (box) + 1 (iterator) + 1 (appended meanwhile)
    box2: list = []

    def grow2():
        box2.append(7)
        yield 1

    box2.append(grow2())
    back = decode(encode(box2), Limits(max_items=3))
    assert isinstance(back, list) and list(back[0]) == [1] and back[1] == 7


# --------------------------------------------------------------------------------- subclasses
Point = collections.namedtuple("Point", "x y")


class Color(enum.IntEnum):
    RED = 5


class Flag(enum.IntFlag):
    A = 1
    B = 2


class Letter(str, enum.Enum):
    A = "a"


class MyStr(str):
    pass


class MyFloat(float):
    pass


class MyComplex(complex):
    pass


class MyBytes(bytes):
    pass


class MyByteArray(bytearray):
    pass


class MyList(list):
    pass


class MyTuple(tuple):
    pass


class MyDict(dict):
    pass


class MySet(set):
    pass


class MyFrozenSet(frozenset):
    pass


class LyingInt(int):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = int.__hash__


def _ordered() -> collections.OrderedDict:
    od = collections.OrderedDict([("a", 1), ("b", 2), (3, 3)])
    od.move_to_end("a")  # iteration order now differs from the dict storage order
    return od


def _defaultdict() -> collections.defaultdict:
    dd: collections.defaultdict = collections.defaultdict(list)
    dd["x"].append(1)
    return dd


@pytest.mark.parametrize("value, expected", [
    (Point(1, 2), (1, 2)),
    (Color.RED, 5),
    (Flag.A | Flag.B, 3),
    (Letter.A, "a"),
    (MyStr("s"), "s"),
    (MyFloat(-0.0), -0.0),
    (MyComplex(1, -0.0), complex(1, -0.0)),
    (MyBytes(b"ab"), b"ab"),
    (MyByteArray(b"ab"), bytearray(b"ab")),
    (MyList([1, MyStr("x")]), [1, "x"]),
    (MyTuple((1,)), (1,)),
    (MyDict(a=1), {"a": 1}),
    (MySet({1}), {1}),
    (MyFrozenSet({1}), frozenset({1})),
    (_ordered(), {"b": 2, 3: 3, "a": 1}),
    (_defaultdict(), {"x": [1]}),
    (collections.Counter("aab"), {"a": 2, "b": 1}),
    (LyingInt(5), 5),
    ({Point(1, 2): Color.RED, MyStr("k"): MyTuple((MyStr("v"),))}, {(1, 2): 5, "k": ("v",)}),
    ({MyFrozenSet({Color.RED}), Letter.A}, {frozenset({5}), "a"}),
])
def test_subclasses_encode_as_their_base_type(value: object, expected: object) -> None:
    back = decode(encode(value))
    assert same(back, expected), (back, expected)
    if isinstance(expected, dict):
        assert list(back) == list(expected)  # the subclass's iteration order


def test_lying_eq_does_not_cross() -> None:
    back = decode(encode([LyingInt(5)]))
    assert isinstance(back, list) and type(back[0]) is int and back[0] != 6


def test_key_whose_base_type_is_unhashable_is_rejected_by_the_encoder() -> None:
    class ZeroHashTuple(tuple):
        def __hash__(self) -> int:
            return 0

    key = ZeroHashTuple(([1],))  # hashable only through the subclass's __hash__
    with pytest.raises(EncodeError, match="dict key or set member"):
        encode({key: 1})
    with pytest.raises(EncodeError):
        encode({key})


# ------------------------------------------------------------------------------- unencodable
class AlwaysEqual:
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


@pytest.mark.parametrize("value, name", [
    (object(), "object"),
    (lambda: 1, "function"),
    (AlwaysEqual(), "AlwaysEqual"),
    (AlwaysEqual, "type"),
    (os, "module"),
    (memoryview(b"x"), "memoryview"),
    ({}.keys(), "dict_keys"),
    (enum.Enum("E", "A").A, "E"),
    (Ellipsis, "ellipsis"),
    ([1, {"k": (2, AlwaysEqual())}], "AlwaysEqual"),
    ({AlwaysEqual(): 1}, "AlwaysEqual"),
])
def test_unsupported_types_raise_encode_error_naming_the_type(value: object, name: str) -> None:
    with pytest.raises(EncodeError, match=name):
        encode(value)


def test_errors_share_one_base() -> None:
    assert issubclass(EncodeError, BoundaryError) and issubclass(DecodeError, BoundaryError)
    assert not issubclass(DecodeError, ValueError)


def test_cycles_raise_encode_error() -> None:
    loop: list = []
    loop.append(loop)
    with pytest.raises(EncodeError, match="cycle"):
        encode(loop)
    d: dict = {}
    d["self"] = [d]
    with pytest.raises(EncodeError, match="cycle"):
        encode(d)
    t = ([],)
    t[0].append(t)
    with pytest.raises(EncodeError, match="cycle"):
        encode(t)
    md = MyDict()
    md["me"] = md
    with pytest.raises(EncodeError, match="cycle"):
        encode(md)

    def selfish():
        yield gen

    gen = selfish()
    with pytest.raises(EncodeError, match="cycle"):
        encode(gen)


def test_shared_references_are_not_cycles() -> None:
    shared = [1, 2]
    assert decode(encode([shared, shared, {"a": shared}])) == [[1, 2], [1, 2], {"a": [1, 2]}]


def test_deep_value_raises_encode_error_not_recursion_error() -> None:
    with pytest.raises(EncodeError, match="max_depth"):
        encode(nest(100_000))
    with pytest.raises(EncodeError):
        encode(nest(100_000), Limits(max_depth=codec.MAX_DEPTH_CAP))


# ------------------------------------------------------------------------------------- limits
def test_limits_validate() -> None:
    assert codec.DEFAULT_LIMITS == Limits(16 << 20, 100, 1_000_000)
    for bad in ({"max_bytes": -1}, {"max_depth": codec.MAX_DEPTH_CAP + 1}, {"max_items": 1.5},
                {"max_items": True}, {"max_bytes": 1 << 32}):
        with pytest.raises(ValueError):
            Limits(**bad)
    with pytest.raises(Exception):
        codec.DEFAULT_LIMITS.max_depth = 5  # frozen


def test_max_bytes_on_both_sides() -> None:
    data = encode("x" * 100)
    assert len(data) == 102
    assert decode(data, Limits(max_bytes=102)) == "x" * 100
    assert encode("x" * 100, Limits(max_bytes=102)) == data
    with pytest.raises(EncodeError, match="max_bytes"):
        encode("x" * 100, Limits(max_bytes=101))
    with pytest.raises(DecodeError, match="max_bytes"):
        decode(data, Limits(max_bytes=101))
    with pytest.raises(EncodeError, match="max_bytes"):
        encode([b"\0" * 1000] * 100, Limits(max_bytes=10_000))
    with pytest.raises(EncodeError, match="max_bytes"):
        encode(2**100_000, Limits(max_bytes=1000))


@pytest.mark.parametrize("wrap", [lambda x: [x], lambda x: (x,), lambda x: {"k": x},
                                  lambda x: {1: x},
                                  lambda x: frozenset({x}), lambda x: iter([x])],
                         ids=["list", "tuple", "object", "d-form", "frozenset", "iterator"])
def test_max_depth_on_both_sides(wrap) -> None:
    ok, deep = nest(100, 2**70, wrap), nest(101, 2**70, wrap)  # a tagged scalar adds no depth
    decode(encode(ok))
    with pytest.raises(EncodeError, match="max_depth"):
        encode(nest(101, 2**70, wrap))
    data = encode(deep, Limits(max_depth=101))
    with pytest.raises(DecodeError, match="max_depth"):
        decode(data)
    decode(data, Limits(max_depth=101))


def test_max_depth_cap_is_reachable_on_both_sides() -> None:
    limits = Limits(max_depth=codec.MAX_DEPTH_CAP)
    cap = codec.MAX_DEPTH_CAP
    for wrap in (lambda x: [x], lambda x: {"k": x}, lambda x: frozenset({x}), MyList):
        assert_round_trip(nest(cap, 1.5, wrap) if wrap is not MyList else nest(cap), limits)
    assert_round_trip({nest(cap - 1, math.nan, lambda x: (x,)): 1}, limits)  # a key at depth cap
    with pytest.raises(EncodeError):
        encode(nest(cap + 1), limits)
    with pytest.raises(DecodeError):
        decode(b'["l",' * (cap + 1) + b"1" + b"]" * (cap + 1), limits)


def test_max_items_on_both_sides() -> None:
    value = [[1, 2], (3,), {"a": 4, "b": {5, 6}}]  # 3 + 2 + 1 + 2 + 2 = 10 elements
    assert items_of(value) == 10
    data = encode(value, Limits(max_items=10))
    with pytest.raises(EncodeError, match="max_items"):
        encode(value, Limits(max_items=9))
    assert decode(data, Limits(max_items=10)) == value
    with pytest.raises(DecodeError, match="max_items"):
        decode(data, Limits(max_items=9))
    with pytest.raises(DecodeError, match="max_items"):
        decode(b'["l"' + b",0" * 2_000_001 + b"]")
    with pytest.raises(EncodeError, match="max_items"):
        encode(iter(range(11)), Limits(max_items=10))


@FAST
@given(values, st.integers(0, 400), st.integers(0, 5), st.integers(0, 25))
def test_limits_hold_exactly_and_encoder_output_always_decodes(value, max_bytes, max_depth,
                                                               max_items) -> None:
    limits = Limits(max_bytes=max_bytes, max_depth=max_depth, max_items=max_items)
    full = encode(value)
    fits = len(full) <= max_bytes and depth_of(value) <= max_depth and items_of(value) <= max_items
    try:
        data = encode(value, limits)
    except EncodeError:
        assert not fits
    else:
        assert fits and data == full
    try:
        back = decode(full, limits)
    except DecodeError:
        assert not fits
    else:
        assert fits and same(back, value)


# ------------------------------------------------------------------------------ hash flooding
FLOOD_MODULUS = 2**61 - 1  # hash(k * FLOOD_MODULUS) == 0 for every int k


def test_hash_flood_is_rejected_by_the_decoder_before_building_the_set() -> None:
    members = b",".join(b'["i","%x"]' % (k * FLOOD_MODULUS) for k in range(1, 5001))
    started = time.monotonic()
    with pytest.raises(DecodeError, match="equal-hash"):
        decode(b'["s",' + members + b"]")
    with pytest.raises(DecodeError, match="equal-hash"):
        decode(b'["d",' + members.replace(b"],", b"],0,") + b",0]")
    assert time.monotonic() - started < 2.0


def test_hash_collision_budget_on_both_sides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec, "MAX_HASH_COLLISIONS", 100)
    flood = {k * FLOOD_MODULUS for k in range(1, 16)}  # 15 members: 105 pairs
    assert {hash(x) for x in flood} == {0}
    with pytest.raises(EncodeError, match="equal-hash"):
        encode(flood)
    with pytest.raises(EncodeError, match="equal-hash"):
        encode(dict.fromkeys(flood, 0))
    monkeypatch.setattr(codec, "MAX_HASH_COLLISIONS", 105)
    data = encode(flood)
    assert decode(data) == flood
    monkeypatch.setattr(codec, "MAX_HASH_COLLISIONS", 104)
    with pytest.raises(DecodeError, match="equal-hash"):
        decode(data)


def test_ordinary_hash_collisions_are_fine() -> None:
    powers = {2**i for i in range(2000)}  # hash(2**i) == 2**(i % 61): 61 buckets of ~33
    assert_round_trip(powers)
    assert_round_trip(dict.fromkeys(powers, None))
    assert_round_trip({-1, -2, *range(20)})  # hash(-1) == hash(-2)


# ------------------------------------------------------------------------------- decode fuzz
json_leaves = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
    texts, st.sampled_from(TAGS),
    st.sampled_from(["nan", "-inf", "0x1p3", "0x1p99999", "ff", "-1f", "0x10", " 1_0 ", "YQ==",
                     "YR==", "Y Q==", "", "zz", "\u00e9"]))
json_values = st.recursive(
    json_leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(texts, inner, max_size=3),
        st.tuples(st.sampled_from(TAGS), st.lists(inner, max_size=5)).map(
            lambda t: [t[0], *t[1]]),
    ),
    max_leaves=25)


@FAST
@given(st.binary(max_size=200))
def test_decode_fuzz_arbitrary_bytes(data: bytes) -> None:
    decode_or_reject(data)
    decode_or_reject(data, Limits(max_bytes=50, max_depth=2, max_items=5))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_decode_fuzz_arbitrary_json(tree: object) -> None:
    data = json.dumps(tree).encode("utf-8")
    decode_or_reject(data)
    decode_or_reject(json.dumps(tree, ensure_ascii=False).encode("utf-8", "surrogatepass"))


@FAST
@given(values, st.data())
def test_decode_fuzz_mutated_messages(value: object, data: st.DataObject) -> None:
    message = bytearray(encode(value))
    for _ in range(data.draw(st.integers(1, 3))):
        position = data.draw(st.integers(0, len(message)))
        action = data.draw(st.sampled_from(["flip", "insert", "delete"]))
        if action == "insert" or not message:
            message[position:position] = data.draw(st.binary(min_size=1, max_size=3))
        elif action == "delete":
            del message[min(position, len(message) - 1)]
        else:
            message[min(position, len(message) - 1)] ^= data.draw(st.integers(1, 255))
    decode_or_reject(bytes(message))


@pytest.mark.parametrize("data", [
    b"", b" ", b"null ", b" 1", b"1 2", b'{"a":1}{}', b"\xff", b"\xef\xbb\xbf1", b'"\xed\xa0\x80"',
    b"[]", b"[1]", b"[null]", b'["zz"]', b'["L",1]', b'[["l"]]',
    b"NaN", b"Infinity", b"-Infinity", b'["l",NaN]', b'{"a":Infinity}',
    b"1" * 5000, b'["i"]', b'["i",1]', b'["i","xyz"]', b'["i","1","2"]', b'["f","nope"]',
    b'["f","0x1p99999"]', b'["f",1.5]', b'["c","1"]', b'["c",1,2]', b'["b","!!"]',
    b'["b","YR=="]', b'["b","YQ"]', b'["b","\\u00e9"]', b'["ba",null]', b'["r",0,1,0]',
    b'["r",true,1,1]', b'["r",1.5,2,1]', b'["r",0,1]', b'["r",["i","zz"],1,1]',
    b'["s",["l"]]', b'["fs",["s"]]', b'["s",{}]', b'["d",["l"],1]', b'["d",1]', b'["d",1,2,3]',
    b'["d",["ba","YQ=="],1]', b'["t",["s",' + b",".join(b"%d" % i for i in range(20)) + b"],[1",
])
def test_malformed_messages_raise_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode(data)


@pytest.mark.parametrize("data", [
    b"[" * 100_000, b'["l",' * 100_000, b'{"a":' * 100_000, b"[" * 100_000 + b"]" * 100_000,
    b'["l",' * 150 + b"1" + b"]" * 150,
])
def test_very_deep_input_raises_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode(data)


def test_decode_requires_bytes() -> None:
    with pytest.raises(TypeError):
        decode("1")  # type: ignore[arg-type]
    assert decode(bytearray(b'["l",1]')) == [1]


def test_decoded_values_are_exact_builtins() -> None:
    value = decode(b'["l",{"k":["d",["t",1,["fs",2]],["ba","YQ=="]]},["r",1,["i","ff"],2],'
                   b'["it",["s",1]],["c","nan","-inf"],["b",""],1e999,-0]')
    assert isinstance(value, list)
    value[2] = list(value[2])
    check_plain(value)
    assert value[1] == range(1, 255, 2) and value[4] == b"" and value[5] == math.inf
    assert value[0] == {"k": {(1, frozenset({2})): bytearray(b"a")}} and value[2] == [{1}]
    assert same(value[3], complex(math.nan, -math.inf)) and same(value[6], 0)


# ------------------------------------------------------------------------------------- frames
@pytest.fixture
def pipe():
    r, w = os.pipe()
    fds = {"r": r, "w": w}
    yield fds
    for fd in fds.values():
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


def close(fds: dict, end: str) -> None:
    os.close(fds[end])
    fds[end] = None


def test_frames_round_trip_and_eof(pipe) -> None:
    payloads = [encode([1, "two", (3.0,)]), b"", b"x" * 1000]
    for payload in payloads:
        codec.write_frame(pipe["w"], payload)
    close(pipe, "w")
    assert [codec.read_frame(pipe["r"], 10_000) for _ in payloads] == payloads
    assert codec.read_frame(pipe["r"], 10_000) is None
    assert codec.read_frame(pipe["r"], 10_000) is None


def test_frame_header_is_big_endian_length(pipe) -> None:
    codec.write_frame(pipe["w"], b"abc")
    assert os.read(pipe["r"], 100) == b"\x00\x00\x00\x03abc"


@pytest.mark.parametrize("raw", [b"\x00", b"\x00\x00\x00", b"\x00\x00\x00\x05ab",
                                 b"\x00\x00\x00\x05"])
def test_truncated_frame_raises_decode_error(pipe, raw: bytes) -> None:
    os.write(pipe["w"], raw)
    close(pipe, "w")
    with pytest.raises(DecodeError, match="truncated"):
        codec.read_frame(pipe["r"], 100)


def test_oversize_frame_is_rejected_without_reading_the_body(pipe) -> None:
    os.write(pipe["w"], (0xFFFFFFFF).to_bytes(4, "big") + b"body")
    close(pipe, "w")  # a reader that waited for the body would see "truncated", not hang
    with pytest.raises(DecodeError, match="exceeds max_bytes"):
        codec.read_frame(pipe["r"], 1 << 20)
    assert os.read(pipe["r"], 100) == b"body"
    pipe["r"], pipe["w"] = os.pipe()
    os.write(pipe["w"], (11).to_bytes(4, "big") + b"x" * 11)
    with pytest.raises(DecodeError):
        codec.read_frame(pipe["r"], 10)
    codec.write_frame(pipe["w"], b"y" * 10)
    assert os.read(pipe["r"], 11) == b"x" * 11
    assert codec.read_frame(pipe["r"], 10) == b"y" * 10


def test_large_frame_through_a_pipe_from_a_thread(pipe) -> None:
    payload = encode([os.urandom(1 << 20), "z" * (1 << 20)])
    assert len(payload) > 1 << 16  # more than the pipe buffer
    thread = threading.Thread(target=codec.write_frame, args=(pipe["w"], payload))
    thread.start()
    received = codec.read_frame(pipe["r"], len(payload))
    thread.join(10)
    assert not thread.is_alive()
    assert received == payload
    assert same(decode(received), decode(payload))


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs setitimer")
def test_frames_survive_signals_and_partial_writes(pipe) -> None:
    """SIGALRM every millisecond interrupts the blocking write (partial writes) and read."""
    payload = os.urandom(3 << 20)
    interrupts = []
    received: list = []

    def reader() -> None:
        time.sleep(0.05)
        received.append(codec.read_frame(pipe["r"], len(payload)))

    previous = signal.signal(signal.SIGALRM, lambda *_: interrupts.append(1))
    thread = threading.Thread(target=reader)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)
        thread.start()
        codec.write_frame(pipe["w"], payload)  # the main thread receives the signals
        thread.join(10)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, previous)
    assert received == [payload]
    assert interrupts


def test_write_frame_to_a_closed_pipe_raises_oserror(pipe) -> None:
    close(pipe, "r")
    with pytest.raises(OSError):
        codec.write_frame(pipe["w"], b"x")


# ----------------------------------------------------------------------------- module loading
def test_module_imports_only_the_standard_library() -> None:
    tree = ast.parse(CODEC_PATH.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module is not None
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            assert top in sys.stdlib_module_names or top == "__future__", name
            assert top != "core"


def test_two_copies_loaded_by_path_under_other_names_interoperate() -> None:
    other = load_codec("some.other_name")
    assert other.EncodeError is not EncodeError
    value = [1, {2: (3, "x")}, {frozenset({4})}, math.inf]
    assert other.encode(value) == encode(value)
    assert same(other.decode(encode(value)), value)
    assert other.Limits(max_depth=3) == other.Limits(16 << 20, 3)


def test_loads_by_path_in_an_isolated_interpreter() -> None:
    script = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('_boundary_codec', {str(CODEC_PATH)!r})\n"
        "m = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(m)\n"
        "assert '_boundary_codec' not in sys.modules and 'typing' not in sys.modules\n"
        "data = m.encode([1, (2.5, b'x'), {3: {4}}, (i for i in range(2))])\n"
        "back = m.decode(data)\n"
        "back[-1] = list(back[-1])\n"
        "print(data.decode(), back)\n"
    )
    res = subprocess.run([sys.executable, "-I", "-S", "-c", script], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == ('["l",1,["t",2.5,["b","eA=="]],["d",3,["s",4]],["it",0,1]] '
                                  "[1, (2.5, b'x'), {3: {4}}, [0, 1]]")
