"""Plain-data codec for the judge <-> candidate boundary.

The trusted judge runs a task's unit test; every call of ``candidate(...)`` crosses a pipe to a
hostile process running model-generated code. Both directions use this codec, so the judge only
ever receives *plain data*: values built from exact built-in types whose behaviour the candidate
cannot influence (no subclasses, no ``__eq__`` tricks, no pickle).

This file is self-contained on purpose: standard library only, no imports from ``core`` and no
relative imports, because it is loaded by file path (``importlib.util.spec_from_file_location``)
under an arbitrary module name, possibly not registered in ``sys.modules``, inside a
``python -I -S`` process.

Supported values
----------------
``None``, ``bool``, ``int`` (any size), ``float`` (exact, including nan, inf, -inf and -0.0),
``complex``, ``str`` (including lone surrogates), ``bytes``, ``bytearray``, ``tuple``, ``list``,
``dict`` (any supported hashable keys, insertion order kept), ``set``, ``frozenset`` and ``range``.

* Subclasses encode as their base type: ``bool`` before ``int``, namedtuple -> ``tuple``,
  ``OrderedDict``/``defaultdict``/``Counter`` -> ``dict`` (in the subclass's iteration order),
  ``IntEnum`` -> ``int``, a ``str`` subclass -> ``str``.
* An *iterator* (generator, ``map``, ``filter``, ``zip``, ``enumerate``, ``reversed``,
  ``list_iterator``, ...: any other object whose type has ``__next__`` and for which
  ``iter(x) is x``) is drained and decodes as a ``list_iterator`` over its items, so
  ``list(decoded)`` works while ``decoded == [...]`` is False, as for the original.
* Everything else (``object()``, functions, classes, modules, dict views, ``memoryview``, numpy
  arrays, custom classes, non-int enums) raises :class:`EncodeError` naming the type.

Wire format
-----------
UTF-8 JSON (in fact pure ASCII: ``ensure_ascii=True``, so lone surrogates survive as ``\\udXXX``
escapes) without whitespace; the decoder rejects whitespace before or after the value.
NaN/Infinity literals are never produced and are rejected.

=================  =======================================================================
value              JSON
=================  =======================================================================
None, bool         ``null``, ``true``, ``false``
int                a JSON integer if ``-2**63 < v < 2**63``, else ``["i", hex]`` with
                   ``hex = format(v, "x")`` (e.g. ``"-1f"``; not subject to the 4300-digit limit)
float              a JSON number with a fraction or exponent (``repr``, exact) if finite, else
                   ``["f", float.hex(v)]`` (``"nan"``, ``"inf"``, ``"-inf"``)
str                a JSON string
dict               a JSON object if every key is an exact ``str``, else ``["d", k1, v1, ...]``
list               ``["l", item, ...]``
tuple              ``["t", item, ...]``
set, frozenset     ``["s", member, ...]``, ``["fs", member, ...]``
iterator           ``["it", item, ...]``
bytes, bytearray   ``["b", base64]``, ``["ba", base64]`` (standard alphabet, padded,
                   canonical: no whitespace, zero unused bits)
complex            ``["c", float.hex(real), float.hex(imag)]``
range              ``["r", start, stop, step]`` (each an int as above)
=================  =======================================================================

Every JSON array is tagged: its first element is one of the tags above. The decoder is more
lenient than the encoder where that is harmless: ``["f", ...]`` accepts any string
``float.fromhex`` accepts, ``["i", ...]`` anything ``int(s, 16)`` accepts, and a JSON integer of
any size up to Python's 4300-digit limit is an int. The sign and payload of a NaN are not kept.

Limits
------
* ``max_bytes``: size of one encoded message (checked by both sides; the encoder also stops
  early once its running lower bound of the output size exceeds it).
* ``max_depth``: container nesting. A scalar at top level has depth 0, a top-level container
  depth 1, its container items depth 2, ... Tagged scalars (big int, non-finite float, bytes,
  complex, range) are not containers.
* ``max_items``: total number of elements over all containers of one message (one per list,
  tuple, set, frozenset or iterator item and one per dict entry).
* A fixed budget :data:`MAX_HASH_COLLISIONS` bounds the pairs of equal-hash members over all
  dicts (``"d"`` form) and sets of one message with more than :data:`HASH_CHECK_MIN` entries,
  because building such a container costs a comparison per pair (hash flooding with ints like
  ``k * (2**61 - 1)``). Ordinary data stays far below it.

The decoder checks ``max_bytes`` before parsing, but ``max_depth`` and ``max_items`` only on the
parsed tree: for adversarial input (16 MiB of ``{},``) its peak memory is about 30 times
``max_bytes``, and parsing takes about a second; a judge short of memory should lower
``max_bytes``.

The encoder raises :class:`EncodeError` for any of these, for cycles, and for unsupported
types; whatever it returns decodes with the same limits. The decoder is total: for any bytes
it returns a value built only from the exact types above (plus ``list_iterator``) or raises
:class:`DecodeError`, without running code the input controls.
"""

from __future__ import annotations

import binascii
import builtins
import json
import os
from itertools import islice, repeat
from operator import eq

TYPE_CHECKING = False  # mypy treats this name as true; ``typing`` is never imported at run time
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable

__all__ = [
    "BoundaryError",
    "EncodeError",
    "DecodeError",
    "Limits",
    "DEFAULT_LIMITS",
    "MAX_DEPTH_CAP",
    "MAX_FRAME_BYTES",
    "MAX_HASH_COLLISIONS",
    "HASH_CHECK_MIN",
    "encode",
    "decode",
    "write_frame",
    "read_frame",
]


class BoundaryError(Exception):
    """Base class of every error this codec raises on purpose."""


class EncodeError(BoundaryError):
    """A value cannot cross the boundary (type, size, depth, item count, cycle)."""


class DecodeError(BoundaryError):
    """Malformed or hostile bytes (or a frame that is truncated or too large)."""


#: largest nesting :class:`Limits` accepts: each level costs two or three Python frames on
#: either side, and the JSON parser shares Python's recursion limit (1000 by default)
MAX_DEPTH_CAP = 200
#: largest payload a frame header can describe
MAX_FRAME_BYTES = (1 << 32) - 1
#: budget of equal-hash member pairs over all checked dicts and sets of one message
MAX_HASH_COLLISIONS = 1 << 22
#: dicts and sets with at most this many entries are not checked (at most 28 pairs each)
HASH_CHECK_MIN = 8


class Limits:
    """Size limits of one message; see the module docstring for what each one counts.

    Every field must be an ``int`` >= 0; ``max_depth`` at most :data:`MAX_DEPTH_CAP` and
    ``max_bytes`` at most :data:`MAX_FRAME_BYTES` (``ValueError`` otherwise). Immutable, equal
    when the fields are equal. A plain class rather than a dataclass: the fork server loads this
    module, and ``dataclasses`` would bring ``inspect`` and ``ast`` (megabytes every forked
    child maps and tears down) into its image.
    """

    __slots__ = ("max_bytes", "max_depth", "max_items")
    max_bytes: int
    max_depth: int
    max_items: int

    def __init__(self, max_bytes: int = 16 << 20, max_depth: int = 100,
                 max_items: int = 1_000_000) -> None:
        for name, value, cap in (("max_bytes", max_bytes, MAX_FRAME_BYTES),
                                 ("max_depth", max_depth, MAX_DEPTH_CAP),
                                 ("max_items", max_items, None)):
            if type(value) is not int or value < 0 or (cap is not None and value > cap):
                bound = "" if cap is None else f" and <= {cap}"
                raise ValueError(f"Limits.{name} must be an int >= 0{bound}, got {value!r}")
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Limits is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Limits is immutable: cannot delete {name!r}")

    def _key(self) -> tuple[int, int, int]:
        return (self.max_bytes, self.max_depth, self.max_items)

    def __eq__(self, other: object) -> bool:
        return type(other) is Limits and self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"Limits(max_bytes={self.max_bytes}, max_depth={self.max_depth}, "
                f"max_items={self.max_items})")


DEFAULT_LIMITS = Limits()

_PLAIN_INT = 1 << 63
_LONG_STR = 32  # shorter strings are left out of the encoder's running size estimate
_JSON_CONTAINERS = (list, dict)
_SIMPLE_KEYS = frozenset({str, int, float, bool, type(None), bytes, complex, range})
_STR_ONLY = {str}


def _type_name(value: object) -> str:
    cls = type(value)
    name = getattr(cls, "__qualname__", None) or getattr(cls, "__name__", "?")
    module = getattr(cls, "__module__", None)
    return str(name) if module in (None, "builtins") else f"{module}.{name}"


def _collision_pairs(members: Iterable[object]) -> int:
    """Number of member pairs with equal ``hash`` (``TypeError`` if one is unhashable).

    Sorting instead of counting in a dict keeps this linearithmic even for hashes that are
    distinct but collide again when hashed themselves.
    """
    hashes = sorted(map(hash, members))
    if not any(map(eq, hashes, islice(hashes, 1, None))):
        return 0
    pairs = run = 0
    previous = None
    for h in hashes:
        run = run + 1 if h == previous else 0
        pairs += run
        previous = h
    return pairs


# ----------------------------------------------------------------------------------- encoding
class _Encoder:
    """One encoding pass: builds a JSON-ready tree, enforcing the limits as it goes."""

    __slots__ = ("max_bytes", "max_depth", "max_items", "items", "size", "pairs", "active",
                 "in_key", "verify")

    def __init__(self, limits: Limits) -> None:
        self.max_bytes = limits.max_bytes
        self.max_depth = limits.max_depth
        self.max_items = limits.max_items
        self.items = 0          # container elements so far
        self.size = 0           # lower bound of the encoded size (long strings, bytes, big ints)
        self.pairs = 0          # equal-hash pairs so far
        self.active: set[int] = set()  # ids of mutable containers being encoded (cycle check)
        self.in_key = False     # encoding (part of) a dict key or set member
        # a subclass was converted inside a key: its hash or hashability may differ after
        # decoding, so encode() checks its output with decode()
        self.verify = False

    def grow(self, size: int) -> None:
        self.size += size
        if self.size > self.max_bytes:
            raise EncodeError(f"encoded value exceeds max_bytes={self.max_bytes}")

    def enter(self, depth: int, items: int) -> int:
        depth += 1
        if depth > self.max_depth:
            raise EncodeError(f"value nests deeper than max_depth={self.max_depth}")
        self.items += items
        if self.items > self.max_items:
            raise EncodeError(f"value has more than max_items={self.max_items} elements")
        return depth

    def push(self, container: object) -> None:
        key = id(container)
        if key in self.active:
            raise EncodeError(f"cycle: a {_type_name(container)} contains itself")
        self.active.add(key)

    def check_hashes(self, members: Iterable[object]) -> None:
        self.pairs += _collision_pairs(members)
        if self.pairs > MAX_HASH_COLLISIONS:
            raise EncodeError(f"more than {MAX_HASH_COLLISIONS} equal-hash pairs in dict keys "
                              "or set members")

    def value(self, v: Any, depth: int) -> object:
        """JSON-ready form of ``v`` found at nesting ``depth``."""
        t = type(v)
        if t is str:
            if len(v) > _LONG_STR:
                self.grow(len(v))
            return v
        if t is int:
            return v if -_PLAIN_INT < v < _PLAIN_INT else self.big_int(v)
        if t is float:
            return v if v - v == 0.0 else ["f", v.hex()]
        if t is list:
            return self.sequence("l", v, depth, True)
        if t is tuple:
            return self.sequence("t", v, depth, False)
        if t is dict:
            return self.mapping(v, depth)
        if v is None or t is bool:
            return v
        if t is set:
            return self.members("s", v, depth)
        if t is frozenset:
            return self.members("fs", v, depth)
        if t is bytes:
            return ["b", self.base64(v)]
        if t is bytearray:
            return ["ba", self.base64(v)]
        if t is complex:
            return ["c", v.real.hex(), v.imag.hex()]
        if t is range:
            return ["r", self.integer(v.start), self.integer(v.stop), self.integer(v.step)]
        return self.other(v, depth)

    def integer(self, v: int) -> object:
        return v if -_PLAIN_INT < v < _PLAIN_INT else self.big_int(v)

    def big_int(self, v: int) -> list[object]:
        self.grow(v.bit_length() // 4)
        return ["i", format(v, "x")]

    def base64(self, v: bytes | bytearray) -> str:
        self.grow(len(v) // 3 * 4)
        return binascii.b2a_base64(v, newline=False).decode("ascii")

    def key(self, k: object, depth: int) -> object:
        """Encode a dict key or set member (``value`` with the key context set)."""
        if type(k) in _SIMPLE_KEYS or self.in_key:
            return self.value(k, depth)
        self.in_key = True
        out = self.value(k, depth)
        self.in_key = False
        return out

    def sequence(self, tag: str, v: list[Any] | tuple[Any, ...], depth: int,
                 mutable: bool) -> list[object]:
        size = len(v)
        depth = self.enter(depth, size)
        if mutable:
            self.push(v)
        out: list[object] = [tag]
        append, value = out.append, self.value
        for x in v:  # short strings and small ints inline: most items are scalars
            t = type(x)
            if (t is int and -_PLAIN_INT < x < _PLAIN_INT) or (t is str and len(x) <= _LONG_STR):
                append(x)
            else:
                append(value(x, depth))
        if mutable:
            self.active.discard(id(v))
            if len(out) - 1 > size:  # an item's code (a generator) appended to v meanwhile
                self.enter(depth - 1, len(out) - 1 - size)
        return out

    def mapping(self, v: dict[Any, Any], depth: int) -> object:
        depth = self.enter(depth, len(v))
        self.push(v)
        value = self.value
        out: object
        if not v or {*map(type, v)} == _STR_ONLY:
            plain: dict[str, object] = {}
            for k, x in v.items():
                plain[k] = value(x, depth)
            out = plain
        else:
            key = self.key
            flat: list[object] = ["d"]
            for k, x in v.items():
                flat.append(key(k, depth))
                flat.append(value(x, depth))
            if len(v) > HASH_CHECK_MIN:
                self.check_hashes(v)
            out = flat
        self.active.discard(id(v))
        return out

    def members(self, tag: str, v: set[Any] | frozenset[Any], depth: int) -> list[object]:
        depth = self.enter(depth, len(v))
        out = [tag, *map(self.key, v, repeat(depth))]
        if len(v) > HASH_CHECK_MIN:
            self.check_hashes(v)
        return out

    def drain(self, iterator: Any, depth: int) -> list[object]:
        depth = self.enter(depth, 0)
        self.push(iterator)
        out: list[object] = ["it"]
        append, value, limit = out.append, self.value, self.max_items
        for item in iterator:
            self.items += 1
            if self.items > limit:
                raise EncodeError(f"value has more than max_items={limit} elements "
                                  f"(while draining a {_type_name(iterator)})")
            append(value(item, depth))
        self.active.discard(id(iterator))
        return out

    def other(self, v: Any, depth: int) -> object:
        """Subclasses of supported types, iterators, or an EncodeError."""
        if self.in_key:
            self.verify = True
        # scalars: the base type's own slot gives an exact copy without running subclass code
        if isinstance(v, int):
            return self.integer(int.__int__(v))
        if isinstance(v, float):
            return self.value(float.__float__(v), depth)
        if isinstance(v, str):
            return self.value(str.__str__(v), depth)
        if isinstance(v, complex):
            # conjugate() returns an exact complex; twice gives back every bit (-0.0, nan)
            return self.value(complex.conjugate(v).conjugate(), depth)
        if isinstance(v, bytes):
            return ["b", self.base64(v)]
        if isinstance(v, bytearray):
            return ["ba", self.base64(v)]
        convert: Callable[[Any], object] | None = None
        if isinstance(v, tuple):
            convert = tuple
        elif isinstance(v, list):
            convert = list
        elif isinstance(v, dict):
            convert = _dict_copy
        elif isinstance(v, frozenset):
            convert = frozenset
        elif isinstance(v, set):
            convert = set
        if convert is not None:
            self.push(v)
            out = self.value(convert(v), depth)
            self.active.discard(id(v))
            return out
        if getattr(type(v), "__next__", None) is not None:
            try:
                is_iterator = iter(v) is v
            except TypeError:
                is_iterator = False
            if is_iterator:
                return self.drain(v, depth)
        raise EncodeError(f"cannot encode a value of type {_type_name(v)}")


def _dict_copy(v: dict[Any, Any]) -> dict[Any, Any]:
    return dict(v.items())  # items() of the subclass: OrderedDict order, not storage order


_JSON_ENCODER = json.JSONEncoder(ensure_ascii=True, allow_nan=False, check_circular=False,
                                 separators=(",", ":"))


def _default(value: object) -> object:
    raise TypeError(f"{_type_name(value)} is not JSON serializable")  # unreachable: trees are JSON


def _make_json_encode() -> Callable[[object], str]:
    """The C encoder of ``_JSON_ENCODER`` built once (``JSONEncoder.encode`` rebuilds it on
    every call); the pure-Python path if the ``_json`` accelerator is missing."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return _JSON_ENCODER.encode
    c_encode = make(None, _default, json.encoder.encode_basestring_ascii, None, ":", ",",
                    False, False, False)

    def encode_json(tree: object) -> str:
        return "".join(c_encode(tree, 0))

    return encode_json


_json_encode = _make_json_encode()


def encode(value: object, limits: Limits = DEFAULT_LIMITS) -> bytes:
    """Encode ``value`` as one message (ASCII JSON bytes, see the module docstring).

    Raises :class:`EncodeError` if ``value`` (or anything inside it) has an unsupported type,
    contains itself, nests deeper than ``limits.max_depth``, has more than ``limits.max_items``
    elements (an endless iterator stops there), exceeds the hash-collision budget, or encodes to
    more than ``limits.max_bytes`` bytes. Iterators inside ``value`` are consumed; exceptions
    raised by code ``value`` supplies (an iterator's ``__next__``, a container subclass's
    ``__iter__`` or ``items``) propagate unchanged. Whatever this returns, ``decode`` with the
    same limits accepts.
    """
    encoder = _Encoder(limits)
    try:
        tree = encoder.value(value, 0)
        text = _json_encode(tree)
    except RecursionError as exc:
        raise EncodeError("value nests too deeply for the interpreter's recursion limit") from exc
    if len(text) > limits.max_bytes:
        raise EncodeError(f"encoded value has {len(text)} bytes, more than "
                          f"max_bytes={limits.max_bytes}")
    data = text.encode("ascii")
    if encoder.verify:
        try:
            decode(data, limits)
        except DecodeError as exc:
            raise EncodeError(f"a dict key or set member changes when its subclasses are "
                              f"converted to base types: {exc}") from exc
    return data


# ----------------------------------------------------------------------------------- decoding
class _Decoder:
    """One decoding pass over a parsed JSON tree, enforcing the limits as it goes.

    The tree is converted in place where possible (it is ours: ``json`` just built it). Every
    nesting level costs two Python frames (``value`` and the container's handler), which is what
    :data:`MAX_DEPTH_CAP` allows for.
    """

    __slots__ = ("max_depth", "max_items", "items", "pairs")

    def __init__(self, limits: Limits) -> None:
        self.max_depth = limits.max_depth
        self.max_items = limits.max_items
        self.items = 0
        self.pairs = 0

    def enter(self, depth: int, items: int) -> int:
        depth += 1
        if depth > self.max_depth:
            raise DecodeError(f"message nests deeper than max_depth={self.max_depth}")
        self.items += items
        if self.items > self.max_items:
            raise DecodeError(f"message has more than max_items={self.max_items} elements")
        return depth

    def check_hashes(self, members: list[object]) -> None:
        if len(members) > HASH_CHECK_MIN:
            self.pairs += _collision_pairs(members)  # TypeError (unhashable) is wrapped later
            if self.pairs > MAX_HASH_COLLISIONS:
                raise DecodeError(f"more than {MAX_HASH_COLLISIONS} equal-hash pairs in dict "
                                  "keys or set members")

    def value(self, v: Any, depth: int) -> object:
        """Decoded form of the parsed JSON value ``v`` found at nesting ``depth``."""
        t = type(v)
        if t is list:
            tag = v[0] if v else None
            if type(tag) is not str:
                raise DecodeError("JSON array without a tag")
            kind = _SEQUENCE_TAGS.get(tag)
            if kind is not None:
                items = self.items_of(v, depth)
                if kind is list:
                    return items
                if kind is set or kind is frozenset:
                    self.check_hashes(items)
                return kind(items)
            handler = _TAGS.get(tag)
            if handler is None:
                raise DecodeError(f"unknown tag {tag[:20]!r}")
            return handler(self, v, depth)
        if t is dict:
            depth = self.enter(depth, len(v))
            for k, x in v.items():  # replacing values does not change the dict's size
                if type(x) in _JSON_CONTAINERS:
                    v[k] = self.value(x, depth)
            return v
        return v  # str, int, float, bool or None: json makes nothing else

    def items_of(self, v: list[Any], depth: int) -> list[object]:
        """The decoded items of the tagged array ``v``, in ``v`` itself (its tag removed)."""
        depth += 1
        self.items += len(v) - 1
        if depth > self.max_depth or self.items > self.max_items:
            self.enter(depth - 1, 0)  # raises the right error
        del v[0]
        value = self.value
        for i, x in enumerate(v):
            if type(x) in _JSON_CONTAINERS:
                v[i] = value(x, depth)
        return v


_SEQUENCE_TAGS: dict[str, Callable[[list[object]], object]] = {
    "l": list, "t": tuple, "s": set, "fs": frozenset, "it": iter}


def _arity(v: list[Any], n: int) -> None:
    if len(v) != n + 1:
        raise DecodeError(f"tag {v[0]!r} takes {n} argument(s), got {len(v) - 1}")


def _text_arg(v: list[Any], n: int) -> list[str]:
    _arity(v, n)
    args = v[1:]
    if not all(type(a) is str for a in args):
        raise DecodeError(f"tag {v[0]!r} takes string arguments")
    return args


def _int_arg(x: Any) -> int:
    if type(x) is int:
        return x
    if type(x) is list and len(x) == 2 and x[0] == "i" and type(x[1]) is str:
        return int(x[1], 16)
    raise DecodeError("range bounds must be ints")


def _dec_dict(d: _Decoder, v: list[Any], depth: int) -> object:
    if len(v) % 2 == 0:
        raise DecodeError("tag 'd' takes key, value pairs")
    depth = d.enter(depth, len(v) // 2)
    value = d.value
    keys = v[1::2]
    values = v[2::2]
    for i, x in enumerate(keys):
        if type(x) in _JSON_CONTAINERS:
            keys[i] = value(x, depth)
    d.check_hashes(keys)
    for i, x in enumerate(values):
        if type(x) in _JSON_CONTAINERS:
            values[i] = value(x, depth)
    return dict(zip(keys, values))


def _dec_int(d: _Decoder, v: list[Any], depth: int) -> object:
    return int(_text_arg(v, 1)[0], 16)


def _dec_float(d: _Decoder, v: list[Any], depth: int) -> object:
    return float.fromhex(_text_arg(v, 1)[0])


def _dec_complex(d: _Decoder, v: list[Any], depth: int) -> object:
    real, imag = _text_arg(v, 2)
    return complex(float.fromhex(real), float.fromhex(imag))


def _base64(text: str) -> bytes:
    # canonical base64 only (what the encoder writes); the round trip check stands in for
    # a2b_base64(strict_mode=True), which Python 3.10 lacks
    raw = binascii.a2b_base64(text)
    if binascii.b2a_base64(raw, newline=False).decode("ascii") != text:
        raise DecodeError("malformed base64")
    return raw


def _dec_bytes(d: _Decoder, v: list[Any], depth: int) -> object:
    return _base64(_text_arg(v, 1)[0])


def _dec_bytearray(d: _Decoder, v: list[Any], depth: int) -> object:
    return bytearray(_base64(_text_arg(v, 1)[0]))


def _dec_range(d: _Decoder, v: list[Any], depth: int) -> object:
    _arity(v, 3)
    return range(_int_arg(v[1]), _int_arg(v[2]), _int_arg(v[3]))


_TAGS: dict[str, Callable[[_Decoder, list[Any], int], object]] = {
    "d": _dec_dict, "i": _dec_int, "f": _dec_float, "c": _dec_complex, "b": _dec_bytes,
    "ba": _dec_bytearray, "r": _dec_range,
}


def _reject_constant(name: str) -> object:
    raise DecodeError(f"JSON constant {name} is not allowed")


_JSON_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
#: the (C) scanner: unlike ``JSONDecoder.decode`` it takes no whitespace around the value
_scan_json: Callable[[str, int], tuple[object, int]] = getattr(_JSON_DECODER, "scan_once")


def decode(data: bytes, limits: Limits = DEFAULT_LIMITS) -> object:
    """Decode one message made by :func:`encode`; total over all byte strings.

    Returns a value built only from exact ``NoneType``, ``bool``, ``int``, ``float``,
    ``complex``, ``str``, ``bytes``, ``bytearray``, ``tuple``, ``list``, ``dict``, ``set``,
    ``frozenset``, ``range`` and ``list_iterator`` objects. Raises :class:`DecodeError` for
    anything else: invalid UTF-8 or JSON, trailing data, NaN/Infinity literals, JSON integers
    over 4300 digits, untagged arrays, unknown tags, wrong tag arity or argument types, bad hex
    or base64, unhashable dict keys or set members, a zero range step, more than
    ``limits.max_bytes`` bytes, nesting beyond ``limits.max_depth`` (or the recursion limit),
    more than ``limits.max_items`` elements, or too many equal-hash keys. ``data`` must be
    ``bytes`` or ``bytearray`` (``TypeError`` otherwise: a caller bug, not hostile input).
    """
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"decode() takes bytes, not {_type_name(data)}")
    if len(data) > limits.max_bytes:
        raise DecodeError(f"message has {len(data)} bytes, more than "
                          f"max_bytes={limits.max_bytes}")
    try:
        text = data.decode("utf-8")
        try:
            tree, end = _scan_json(text, 0)
        except StopIteration:
            raise DecodeError("no JSON value at the start of the message") from None
        if end != len(text):
            raise DecodeError(f"trailing data after the JSON value at offset {end}")
        if type(tree) not in _JSON_CONTAINERS:
            return tree
        return _Decoder(limits).value(tree, 0)
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:
        # ValueError includes JSONDecodeError, UnicodeDecodeError and binascii.Error
        raise DecodeError(f"{type(exc).__name__}: {str(exc)[:200]}") from exc


# ------------------------------------------------------------------------------------- frames
_CHUNK = 1 << 18


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data).cast("B")
    while view:
        try:
            written = os.write(fd, view)
        except InterruptedError:
            continue
        if written <= 0:
            raise OSError(f"os.write({fd}) wrote nothing")
        view = view[written:]


def write_frame(fd: int, payload: bytes) -> None:
    """Write one frame to ``fd``: a 4-byte big-endian length, then ``payload``.

    Loops over partial writes and ``EINTR``. ``fd`` must be blocking (``BlockingIOError``
    otherwise); ``OSError`` such as ``BrokenPipeError`` propagates. A payload longer than
    :data:`MAX_FRAME_BYTES` raises :class:`EncodeError` before anything is written.
    """
    size = len(payload)
    if size > MAX_FRAME_BYTES:
        raise EncodeError(f"payload of {size} bytes does not fit in a frame")
    header = size.to_bytes(4, "big")
    if size <= 1 << 16:
        _write_all(fd, header + payload)  # one system call for the usual small message
    else:
        _write_all(fd, header)
        _write_all(fd, payload)


def _read_upto(fd: int, size: int) -> bytes:
    """Read ``size`` bytes, fewer only at end of file; never allocates much more than needed."""
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        try:
            chunk = os.read(fd, min(remaining, _CHUNK))
        except InterruptedError:
            continue
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_frame(fd: int, max_bytes: int) -> bytes | None:
    """Read one frame written by :func:`write_frame` from the blocking ``fd``.

    Returns the payload, or ``None`` on end of file before the first header byte. Raises
    :class:`DecodeError` on end of file inside the header or payload, and on a declared length
    above ``max_bytes`` (then nothing after the header has been read or allocated).
    ``OSError`` from ``os.read`` propagates.
    """
    header = _read_upto(fd, 4)
    if not header:
        return None
    if len(header) < 4:
        raise DecodeError(f"truncated frame header ({len(header)} of 4 bytes)")
    size = int.from_bytes(header, "big")
    if size > max_bytes:
        raise DecodeError(f"frame of {size} bytes exceeds max_bytes={max_bytes}")
    payload = _read_upto(fd, size)
    if len(payload) < size:
        raise DecodeError(f"truncated frame ({len(payload)} of {size} bytes)")
    return payload
