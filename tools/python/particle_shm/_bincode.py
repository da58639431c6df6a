"""A minimal bincode 2 codec, standard configuration: what the forwarder's TCP protocol encodes
its headers with (tools/forwarder/PROTOCOL.md; shm-protocol/LAYOUT.md "bincode encoding").

The rules, from the bincode 2 specification, for the types the protocol uses:

- ``u8``, ``i8``: one raw byte. ``bool``: one byte, 0 or 1 (anything else is an error).
- ``u16``, ``u32``, ``u64`` (and ``usize``: lengths): varints. A value below 251 is one byte;
  otherwise a marker 251, 252 or 253 followed by the value as u16, u32 or u64 little-endian.
  A marker wider than the type (253 for a u32), 254 (u128) and 255 are errors.
- ``i16``, ``i32``, ``i64``: zigzag (0, -1, 1, -2 ... become 0, 1, 2, 3 ...), then the varint.
- ``f32``, ``f64``: IEEE 754, little-endian, raw.
- Strings: a varint length, then the UTF-8 bytes. Sequences (``Vec``): a varint length, then
  the elements. Tuples, fixed-size arrays and structs: their elements in order, no length.
- Enums: the variant's index as a u32 varint, then its content. ``Option``: a byte 0 (None) or
  1 followed by the value. ``Result``: an enum with ``Ok`` = 0 and ``Err`` = 1.

Values follow serde's data model as ``serde_json`` writes it, so that vectors produced by the
Rust side compare directly (tests/test_wire.py): structs are dicts, tuples and arrays are lists,
an enum value is ``"Variant"`` (no content) or ``{"Variant": content}``, None is None.

Decoding never trusts a length: a count is checked against the bytes left before anything is
built, and running out of bytes raises ``Short`` (a ``DecodeError``).
"""

import operator
import struct


class DecodeError(ValueError):
    """The bytes are not a valid encoding of the expected type."""


class Short(DecodeError):
    """The bytes end before the value does (the rest may still be coming)."""


class EncodeError(ValueError):
    """A value does not fit its type (negative for an unsigned, too large, wrong kind)."""


U8_MAX = 0xFF
_MARKERS = {251: (16, "<H", 2), 252: (32, "<I", 4), 253: (64, "<Q", 8)}


def varint(n):
    """The unsigned varint of ``n`` (0 to 2**64 - 1)."""
    if n < 251:
        return bytes((n,))
    if n < 1 << 16:
        return b"\xfb" + struct.pack("<H", n)
    if n < 1 << 32:
        return b"\xfc" + struct.pack("<I", n)
    return b"\xfd" + struct.pack("<Q", n)


def zigzag(n):
    """bincode's signed-to-unsigned mapping: 0, -1, 1, -2 ... -> 0, 1, 2, 3 ..."""
    return 2 * n if n >= 0 else -2 * n - 1


def unzigzag(u):
    return u // 2 if u % 2 == 0 else -(u + 1) // 2


class Reader:
    """Reads values from ``buf`` (bytes-like) starting at ``at``."""

    def __init__(self, buf, at=0):
        self.buf = memoryview(buf).cast("B")
        self.at = at

    def left(self):
        return len(self.buf) - self.at

    def take(self, n):
        if n > self.left():
            raise Short(f"needs {n} more bytes at offset {self.at}, {self.left()} left")
        start, self.at = self.at, self.at + n
        return self.buf[start : self.at]

    def byte(self):
        return self.take(1)[0]

    def varint(self, bits):
        """An unsigned varint of a type of ``bits`` bits (16, 32 or 64)."""
        first = self.byte()
        if first < 251:
            return first
        width = _MARKERS.get(first)
        if width is None:
            raise DecodeError(f"varint marker {first} at offset {self.at - 1} (u128 or invalid)")
        wbits, fmt, size = width
        if wbits > bits:
            raise DecodeError(f"a u{wbits} varint (marker {first}) where a u{bits} is expected")
        return struct.unpack(fmt, self.take(size))[0]


class Type:
    """A bincode type: ``encode(out, value)`` appends to a bytearray, ``decode(reader)``."""

    def encode(self, out, value):
        raise NotImplementedError

    def decode(self, r):
        raise NotImplementedError

    def to_bytes(self, value):
        out = bytearray()
        self.encode(out, value)
        return bytes(out)

    def from_bytes(self, buf):
        """Decodes one value that must fill ``buf`` exactly."""
        r = Reader(buf)
        v = self.decode(r)
        if r.left():
            raise DecodeError(f"{r.left()} trailing bytes")
        return v


class _Unsigned(Type):
    def __init__(self, bits):
        self.bits = bits

    def encode(self, out, value):
        v = _integer(value)
        if not 0 <= v < 1 << self.bits:
            raise EncodeError(f"{value!r} is not a u{self.bits}")
        out += bytes((v,)) if self.bits == 8 else varint(v)

    def decode(self, r):
        return r.byte() if self.bits == 8 else r.varint(self.bits)


class _Signed(Type):
    def __init__(self, bits):
        self.bits = bits

    def encode(self, out, value):
        v = _integer(value)
        if not -(1 << (self.bits - 1)) <= v < 1 << (self.bits - 1):
            raise EncodeError(f"{value!r} is not an i{self.bits}")
        out += struct.pack("<b", v) if self.bits == 8 else varint(zigzag(v))

    def decode(self, r):
        if self.bits == 8:
            return struct.unpack("<b", r.take(1))[0]
        return unzigzag(r.varint(self.bits))


class _Float(Type):
    def __init__(self, fmt):
        self.fmt, self.size = fmt, struct.calcsize(fmt)

    def encode(self, out, value):
        try:
            out += struct.pack(self.fmt, value)
        except (struct.error, TypeError, OverflowError) as e:
            raise EncodeError(f"{value!r}: {e}") from None

    def decode(self, r):
        return struct.unpack(self.fmt, r.take(self.size))[0]


class _Bool(Type):
    def encode(self, out, value):
        if not isinstance(value, bool):
            raise EncodeError(f"{value!r} is not a bool")
        out.append(int(value))

    def decode(self, r):
        b = r.byte()
        if b > 1:
            raise DecodeError(f"bool byte {b} at offset {r.at - 1}")
        return b == 1


class _Str(Type):
    def encode(self, out, value):
        if not isinstance(value, str):
            raise EncodeError(f"{value!r} is not a str")
        raw = value.encode("utf-8")
        out += varint(len(raw)) + raw

    def decode(self, r):
        raw = r.take(r.varint(64))
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"string is not UTF-8: {e}") from None


U8, U16, U32, U64 = (_Unsigned(b) for b in (8, 16, 32, 64))
I8, I16, I32, I64 = (_Signed(b) for b in (8, 16, 32, 64))
F32, F64 = _Float("<f"), _Float("<d")
BOOL = _Bool()
STR = _Str()


class Option(Type):
    def __init__(self, inner):
        self.inner = inner

    def encode(self, out, value):
        if value is None:
            out.append(0)
        else:
            out.append(1)
            self.inner.encode(out, value)

    def decode(self, r):
        tag = r.byte()
        if tag > 1:
            raise DecodeError(f"Option tag {tag} at offset {r.at - 1}")
        return self.inner.decode(r) if tag else None


class Seq(Type):
    """``Vec<T>``: a length, then the elements (each at least one byte)."""

    def __init__(self, inner):
        self.inner = inner

    def encode(self, out, value):
        out += varint(len(value))
        for v in value:
            self.inner.encode(out, v)

    def decode(self, r):
        n = r.varint(64)
        if n > r.left():
            raise Short(f"a sequence of {n} elements in {r.left()} bytes")
        return [self.inner.decode(r) for _ in range(n)]


class Tuple(Type):
    """A tuple or fixed-size array: the elements in order, no length."""

    def __init__(self, *types):
        self.types = types

    def encode(self, out, value):
        if len(value) != len(self.types):
            raise EncodeError(f"{value!r} does not have {len(self.types)} elements")
        for t, v in zip(self.types, value):
            t.encode(out, v)

    def decode(self, r):
        return [t.decode(r) for t in self.types]


def Array(inner, n):
    """``[T; n]``."""
    return Tuple(*([inner] * n))


class Struct(Type):
    """Named fields in declaration order; the value is a dict."""

    def __init__(self, *fields):
        self.fields = fields

    def encode(self, out, value):
        for name, t in self.fields:
            try:
                v = value[name]
            except (KeyError, TypeError):
                raise EncodeError(f"missing field {name!r} in {value!r}") from None
            t.encode(out, v)

    def decode(self, r):
        return {name: t.decode(r) for name, t in self.fields}


class Enum(Type):
    """Variants in declaration order, each ``(name, content type or None)``."""

    def __init__(self, *variants):
        self.variants = variants
        self.index = {name: (i, t) for i, (name, t) in enumerate(variants)}

    def encode(self, out, value):
        if isinstance(value, str):
            name, content = value, None
        elif isinstance(value, dict) and len(value) == 1:
            ((name, content),) = value.items()
        else:
            raise EncodeError(f"{value!r} is not a variant name or {{name: content}}")
        if name not in self.index:
            raise EncodeError(f"unknown variant {name!r}")
        i, t = self.index[name]
        if (t is None) != isinstance(value, str):
            raise EncodeError(f"variant {name!r} {'has no' if t is None else 'needs a'} content")
        out += varint(i)
        if t is not None:
            t.encode(out, content)

    def decode(self, r):
        i = r.varint(32)
        if i >= len(self.variants):
            raise DecodeError(f"variant index {i} of an enum of {len(self.variants)}")
        name, t = self.variants[i]
        return name if t is None else {name: t.decode(r)}


def Result(ok, err):
    return Enum(("Ok", ok), ("Err", err))


def _integer(value):
    if isinstance(value, bool):
        raise EncodeError(f"{value!r} is a bool, not an integer")
    try:
        return operator.index(value)
    except TypeError:
        raise EncodeError(f"{value!r} is not an integer") from None
