"""The rpcd wire format, version 1 (docs/protocol.md): frames, metadata, bodies, topics and
gzip. Bytes in, bytes out; no I/O.

A frame is a 24-byte big-endian header (magic "RD", version, kind, flags, codec, route length,
call id, deadline in ms, metadata length, reserved 0, payload length), then the route, the
metadata and the payload. check_header checks a header as soon as its 24 bytes have arrived,
before the rest is read; decode_body checks the rest.
"""

from __future__ import annotations

import enum
import struct
import zlib
from typing import Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from .errors import Code, ProtocolError

HEADER = struct.Struct(">2sBBBBHIIHHI")
HEADER_SIZE = HEADER.size  # 24
MAGIC = b"RD"
VERSION = 0x01


class Kind(enum.IntEnum):
    """What a frame is ("Kinds"). Other values are reserved: a protocol error."""

    REQUEST = 0x01
    RESPONSE = 0x02
    ERROR = 0x03
    ONEWAY = 0x04
    CANCEL = 0x05
    PING = 0x06
    PONG = 0x07
    GOAWAY = 0x08
    SUBSCRIBE = 0x09
    UNSUBSCRIBE = 0x0A
    PUBLISH = 0x0B
    MESSAGE = 0x0C
    HELLO = 0x10
    WELCOME = 0x11
    STREAM_OPEN = 0x18
    STREAM_DATA = 0x19
    STREAM_CREDIT = 0x1A
    STREAM_END = 0x1B
    STREAM_RESET = 0x1C


def kind_name(k: int) -> str:
    """The name protocol.md gives kind k ("OneWay", "StreamOpen")."""
    return _KIND_NAMES.get(k, "kind 0x%02x" % k)


_KIND_NAMES: Dict[int, str] = {k: "".join(w.capitalize() for w in k.name.split("_")) for k in Kind}
_KIND_NAMES.update({Kind.ONEWAY: "OneWay", Kind.GOAWAY: "GoAway"})


class Codec(enum.IntEnum):
    """How a payload is encoded ("Codecs"): 0x80-0xFF are for an application's own codecs,
    which this package passes as plain ints."""

    RAW = 0x00
    JSON = 0x01


# Flags ("Flags"): Unprocessed on Error and StreamReset; the two bits 0x06 say how a
# payload is compressed (0 none, 1 gzip, 2 Zstandard, 3 reserved); 0x08-0x80 reserved.
FLAG_UNPROCESSED = 0x01
COMPRESSION_MASK = 0x06
FLAG_GZIP = 0x02
FLAG_ZSTD = 0x04
FLAGS_RESERVED = 0xF8

# Default limits ("Limits"), the same on both sides of rpcd.
MAX_FRAME = 4 * 1024 * 1024
MAX_ROUTE = 256
MAX_METADATA = 8 * 1024
MAX_PING = 64
MAX_HELLO = 4096
MAX_WINDOW = 2**31 - 1

# Metadata keys rpcd gives a meaning ("Metadata", "The handshake", "Compression").
MD_AUTH_METHOD = "rpcd-auth-method"
MD_COMPRESSION = "rpcd-compression"

# The compressions this package can send and expand, by name. Zstandard is not in Python's
# standard library, so this package never names it and cannot expand it.
COMPRESSIONS = {"gzip": FLAG_GZIP}
# rpcd compresses payloads of this many bytes or more, when that makes them smaller
# (CompressMin); this package follows the same rule.
COMPRESS_MIN = 1024

_ANY = -1
_COMP = COMPRESSION_MASK


class _Rule(NamedTuple):
    """What a kind's header must hold ("Rules per kind"). id: 1 for "1 or more", 0 for "0",
    _ANY for the Error's "1 or more; 0 refusing a Publish"; route: whether one is required
    (else none may be present); payload: (least, most) bytes, most _ANY for no bound."""

    id: int
    raw_only: bool
    route: bool
    deadline: bool
    flags: int
    payload: Tuple[int, int]


_RULES = {
    Kind.REQUEST: _Rule(1, False, True, True, _COMP, (0, _ANY)),
    Kind.RESPONSE: _Rule(1, False, False, False, _COMP, (0, _ANY)),
    Kind.ERROR: _Rule(_ANY, True, False, False, FLAG_UNPROCESSED, (2, _ANY)),
    Kind.ONEWAY: _Rule(1, False, True, True, _COMP, (0, _ANY)),
    Kind.CANCEL: _Rule(1, True, False, False, 0, (0, 0)),
    Kind.PING: _Rule(0, True, False, False, 0, (0, MAX_PING)),
    Kind.PONG: _Rule(0, True, False, False, 0, (0, MAX_PING)),
    Kind.GOAWAY: _Rule(0, True, False, False, 0, (6, _ANY)),
    Kind.HELLO: _Rule(0, True, False, False, 0, (0, MAX_HELLO)),
    Kind.WELCOME: _Rule(0, True, False, False, 0, (0, MAX_HELLO)),
    Kind.SUBSCRIBE: _Rule(1, True, True, False, 0, (0, 0)),
    Kind.UNSUBSCRIBE: _Rule(1, True, False, False, 0, (0, _ANY)),
    Kind.PUBLISH: _Rule(0, False, True, False, 0, (0, _ANY)),
    Kind.MESSAGE: _Rule(1, False, True, False, _COMP, (0, _ANY)),
    Kind.STREAM_OPEN: _Rule(1, False, True, True, 0, (4, 4)),
    Kind.STREAM_DATA: _Rule(1, True, False, False, _COMP, (0, _ANY)),
    Kind.STREAM_CREDIT: _Rule(1, True, False, False, 0, (4, 4)),
    Kind.STREAM_END: _Rule(1, True, False, False, 0, (0, 0)),
    Kind.STREAM_RESET: _Rule(1, True, False, False, FLAG_UNPROCESSED, (2, _ANY)),
}

Metadata = Union[Mapping[str, Union[str, bytes]], Iterable[Tuple[str, Union[str, bytes]]], None]


class Header(NamedTuple):
    """A frame's 24-byte header, decoded and checked."""

    kind: Kind
    flags: int
    codec: int
    route_len: int
    call_id: int
    deadline_ms: int
    metadata_len: int
    payload_len: int

    @property
    def body_len(self) -> int:
        return self.route_len + self.metadata_len + self.payload_len


class Frame(NamedTuple):
    """One whole frame; metadata is a list of (key, value) pairs in wire order."""

    kind: Kind
    flags: int
    codec: int
    call_id: int
    deadline_ms: int
    route: str
    metadata: List[Tuple[str, bytes]]
    payload: bytes


class Limits(NamedTuple):
    """The limits a receiver checks and a sender keeps to ("Limits")."""

    max_frame: int = MAX_FRAME
    max_route: int = MAX_ROUTE
    max_metadata: int = MAX_METADATA


DEFAULT_LIMITS = Limits()


def _printable(b: bytes) -> bool:
    return all(0x21 <= c <= 0x7E for c in b)


def metadata_pairs(md: Metadata) -> List[Tuple[str, bytes]]:
    """md as a list of (key, bytes) pairs: a mapping or pairs; str values are UTF-8."""
    if not md:
        return []
    items = md.items() if isinstance(md, Mapping) else md
    return [(k, v.encode("utf-8") if isinstance(v, str) else bytes(v)) for k, v in items]


class FrameError(ValueError):
    """A frame this end must not send: a field the page does not allow, or one past the
    limits. code is what the page calls the refusal: InvalidArgument for a route or metadata
    the rules do not allow, ResourceExhausted for a frame or metadata past a limit. The client
    raises it as an RpcError with that code, marked unprocessed."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def encode_metadata(md: Metadata) -> bytes:
    """The metadata section: entries of keylen (1 B, 1 to 255), key (printable ASCII), vallen
    (2 B BE), value. Raises FrameError for an entry the page does not allow."""
    out = bytearray()
    for key, value in metadata_pairs(md):
        k = key.encode("ascii", "replace")
        if not 1 <= len(k) <= 255 or not _printable(k) or not key.isascii():
            raise FrameError(Code.INVALID_ARGUMENT, "rpcd: bad metadata key %r" % key)
        if len(value) > 0xFFFF:
            raise FrameError(Code.INVALID_ARGUMENT, "rpcd: metadata value of %r over 65,535 bytes" % key)
        out += bytes([len(k)]) + k + struct.pack(">H", len(value)) + value
    return bytes(out)


def decode_metadata(section: bytes) -> List[Tuple[str, bytes]]:
    """The entries of a metadata section, which they must fill exactly."""
    out, i, n = [], 0, len(section)
    while i < n:
        klen = section[i]
        if klen == 0:
            raise ProtocolError("metadata entry with key length 0 at offset %d" % i)
        if i + 1 + klen + 2 > n:
            raise ProtocolError("metadata entry at offset %d runs past the section" % i)
        key = bytes(section[i + 1:i + 1 + klen])
        if not _printable(key):
            raise ProtocolError("metadata key byte outside 0x21-0x7E at offset %d" % i)
        (vlen,) = struct.unpack_from(">H", section, i + 1 + klen)
        i += 3 + klen
        if i + vlen > n:
            raise ProtocolError("metadata value of %r runs past the section" % key.decode("ascii"))
        out.append((key.decode("ascii"), bytes(section[i:i + vlen])))
        i += vlen
    return out


def first_value(md: Sequence[Tuple[str, bytes]], key: str) -> Optional[bytes]:
    """The first value of key: keys may repeat, and a reader that wants one takes the first."""
    return next((v for k, v in md if k == key), None)


def encode_frame(kind: int, call_id: int = 0, route: str = "", payload: bytes = b"",
                 codec: int = Codec.RAW, flags: int = 0, deadline_ms: int = 0,
                 metadata: Metadata = None, limits: Limits = DEFAULT_LIMITS) -> bytes:
    """One whole frame: the header, then route, metadata and payload. Raises FrameError (a
    ValueError) for a frame the page does not allow or past the limits: a sender must not
    send one."""
    if not route.isascii():
        raise FrameError(Code.INVALID_ARGUMENT, "rpcd: route %r is not ASCII" % route)
    r = route.encode("ascii")
    md = encode_metadata(metadata)
    if len(r) > limits.max_route:
        raise FrameError(Code.INVALID_ARGUMENT, "rpcd: route of %d bytes over the limit of %d" % (len(r), limits.max_route))
    if len(md) > limits.max_metadata:
        raise FrameError(Code.RESOURCE_EXHAUSTED, "rpcd: metadata of %d bytes over the limit of %d" % (len(md), limits.max_metadata))
    size = HEADER_SIZE + len(r) + len(md) + len(payload)
    if size > limits.max_frame:
        raise FrameError(Code.RESOURCE_EXHAUSTED, "rpcd: frame of %d bytes over the limit of %d" % (size, limits.max_frame))
    head = HEADER.pack(MAGIC, VERSION, kind, flags, codec, len(r), call_id,
                       deadline_ms, len(md), 0, len(payload))
    return b"".join((head, r, md, payload))


def check_header(head: bytes, limits: Limits = DEFAULT_LIMITS) -> Header:
    """Decode and check a 24-byte header against "Frame layout", "Flags", "Limits" and
    "Rules per kind"; raises ProtocolError naming the rule a bad one breaks."""
    magic, ver, kind, flags, codec, rlen, cid, deadline, mlen, reserved, plen = HEADER.unpack(head)
    if magic != MAGIC:
        raise ProtocolError("bad magic %r" % magic)
    if ver != VERSION:
        raise ProtocolError("unknown version %d" % ver)
    if reserved:
        raise ProtocolError("reserved header field 0x%04x is not 0" % reserved)
    try:
        k = Kind(kind)
    except ValueError:
        raise ProtocolError("reserved kind 0x%02x" % kind) from None
    if flags & FLAGS_RESERVED:
        raise ProtocolError("reserved flag bits set: 0x%02x" % flags)
    if flags & COMPRESSION_MASK == COMPRESSION_MASK:
        raise ProtocolError("reserved compression 3")
    rule, name = _RULES[k], kind_name(k)
    if flags & ~rule.flags:
        raise ProtocolError("%s with flags 0x%02x" % (name, flags))
    if rule.id == 1 and cid == 0 or rule.id == 0 and cid != 0:
        raise ProtocolError("%s with call id %d" % (name, cid))
    if rule.raw_only and codec != Codec.RAW:
        raise ProtocolError("%s with codec 0x%02x, not Raw" % (name, codec))
    if rule.route and rlen == 0:
        raise ProtocolError("%s without a route" % name)
    if not rule.route and rlen:
        raise ProtocolError("%s with a route" % name)
    if deadline and not rule.deadline:
        raise ProtocolError("%s with a deadline" % name)
    least, most = rule.payload
    if plen < least or most != _ANY and plen > most:
        raise ProtocolError("%s with a payload of %d bytes" % (name, plen))
    if k == Kind.UNSUBSCRIBE and plen == 1:
        raise ProtocolError("Unsubscribe with a 1-byte body")
    if rlen > limits.max_route:
        raise ProtocolError("route of %d bytes over the limit of %d" % (rlen, limits.max_route))
    if mlen > limits.max_metadata:
        raise ProtocolError("metadata of %d bytes over the limit of %d" % (mlen, limits.max_metadata))
    if HEADER_SIZE + rlen + mlen + plen > limits.max_frame:
        raise ProtocolError("frame of %d bytes over the limit of %d"
                            % (HEADER_SIZE + rlen + mlen + plen, limits.max_frame))
    return Header(k, flags, codec, rlen, cid, deadline, mlen, plen)


def decode_body(h: Header, body: bytes) -> Frame:
    """The frame of a checked header and its body (route, metadata, payload)."""
    route = bytes(body[:h.route_len])
    if not _printable(route):
        raise ProtocolError("route byte outside 0x21-0x7E in %r" % route)
    r = route.decode("ascii")
    if h.kind in (Kind.SUBSCRIBE, Kind.PUBLISH, Kind.MESSAGE):
        why = topic_error(r, pattern=h.kind == Kind.SUBSCRIBE)
        if why:
            raise ProtocolError("%s with a bad %s: %s" % (
                kind_name(h.kind), "pattern" if h.kind == Kind.SUBSCRIBE else "topic", why))
    md = decode_metadata(body[h.route_len:h.route_len + h.metadata_len])
    payload = bytes(body[h.route_len + h.metadata_len:])
    if h.kind in (Kind.STREAM_OPEN, Kind.STREAM_CREDIT):
        (n,) = struct.unpack(">I", payload)
        if n > MAX_WINDOW or h.kind == Kind.STREAM_CREDIT and n == 0:
            raise ProtocolError("%s of %d" % ("window" if h.kind == Kind.STREAM_OPEN else "credit", n))
    return Frame(h.kind, h.flags, h.codec, h.call_id, h.deadline_ms, r, md, payload)


def decode_frame(data: bytes, limits: Limits = DEFAULT_LIMITS) -> Frame:
    """Exactly one whole frame from data (for tests and tools)."""
    if len(data) < HEADER_SIZE:
        raise ProtocolError("frame shorter than its header")
    h = check_header(data[:HEADER_SIZE], limits)
    if len(data) != HEADER_SIZE + h.body_len:
        raise ProtocolError("frame of %d bytes, its header says %d" % (len(data), HEADER_SIZE + h.body_len))
    return decode_body(h, data[HEADER_SIZE:])


def error_body(code: int, message: str) -> bytes:
    """An Error's (or StreamReset's, or Unsubscribe's) body: code (2 B BE), then UTF-8."""
    return struct.pack(">H", code) + message.encode("utf-8")


def parse_error(payload: bytes) -> Tuple[int, str]:
    """(code, message) of an error body; shorter than 2 bytes is a protocol error."""
    if len(payload) < 2:
        raise ProtocolError("error body shorter than 2 bytes")
    return struct.unpack_from(">H", payload)[0], payload[2:].decode("utf-8", "replace")


def goaway_body(last_call_id: int, code: int, message: str) -> bytes:
    """A GoAway's body: last call id (4 B BE), code (2 B BE), then UTF-8."""
    return struct.pack(">IH", last_call_id, code) + message.encode("utf-8")


def parse_goaway(payload: bytes) -> Tuple[int, int, str]:
    """(last call id, code, message) of a GoAway body; shorter than 6 bytes is a protocol error."""
    if len(payload) < 6:
        raise ProtocolError("GoAway body shorter than 6 bytes")
    last, code = struct.unpack_from(">IH", payload)
    return last, code, payload[6:].decode("utf-8", "replace")


def after(a: int, b: int) -> bool:
    """Whether call id a comes after b (RFC 1982: the signed 32-bit a - b is positive)."""
    return 0 < ((a - b) & 0xFFFFFFFF) < 0x80000000


def topic_error(s: str, pattern: bool = False) -> Optional[str]:
    """Why s is not a topic (or, with pattern, not a pattern), or None when it is ("Topics
    and patterns"): tokens of bytes 0x21-0x7E other than '.', '*' and '>' separated by '.';
    in a pattern a token may be '*' (one token) or, last, '>' (one or more)."""
    if not s:
        return "empty"
    tokens = s.split(".")
    for i, tok in enumerate(tokens):
        if not tok:
            return "empty token in %r" % s
        if pattern and tok == "*":
            continue
        if pattern and tok == ">":
            if i != len(tokens) - 1:
                return "'>' before the last token in %r" % s
            continue
        for ch in tok:
            if ch in "*>" or not 0x21 <= ord(ch) <= 0x7E:
                return "%r not allowed in a token of %r" % (ch, s)
    return None


def topic_matches(pattern: str, topic: str) -> bool:
    """Whether pattern matches topic: '*' one token, a final '>' one or more."""
    p, t = pattern.split("."), topic.split(".")
    if p[-1] == ">":
        if len(t) < len(p):
            return False
        p, t = p[:-1], t[:len(p) - 1]
    return len(p) == len(t) and all(a == "*" or a == b for a, b in zip(p, t))


def parse_compressions(value: Optional[bytes]) -> List[str]:
    """The names of an rpcd-compression value, comma-separated, in order of preference;
    spaces around a comma are ignored."""
    if not value:
        return []
    return [n.strip() for n in value.decode("ascii", "replace").split(",") if n.strip()]


def gzip_payload(payload: bytes, least: int = COMPRESS_MIN) -> Optional[bytes]:
    """payload as one gzip member, or None when it stays as it is: shorter than least, or no
    smaller compressed."""
    if len(payload) < least:
        return None
    c = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    packed = c.compress(payload) + c.flush()
    return packed if len(packed) < len(payload) else None


class ExpandError(ValueError):
    """A compressed payload that does not expand: not valid data for its compression, empty,
    or in a compression this package cannot do."""


class ExpandOverflow(ExpandError):
    """A compressed payload that expands past the room it has."""


def expand(flags: int, data: bytes, limit: int) -> bytes:
    """data expanded as flags's compression bits say, to at most limit bytes. Gzip: one member
    or several one after the other (RFC 1952). Raises ExpandOverflow past limit, ExpandError
    for data that does not expand."""
    comp = flags & COMPRESSION_MASK
    if not comp:
        return data
    if comp != FLAG_GZIP:
        raise ExpandError("compression 0x%02x is not one this client does" % comp)
    if not data:
        raise ExpandError("empty compressed payload")
    out, rest = bytearray(), bytes(data)
    try:
        while rest:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out += d.decompress(rest, limit - len(out) + 1)
            if len(out) > limit:
                raise ExpandOverflow("expands past %d bytes" % limit)
            if not d.eof:
                raise ExpandError("truncated gzip data")
            rest = d.unused_data
    except zlib.error as e:
        raise ExpandError("not gzip data: %s" % e) from None
    return bytes(out)
