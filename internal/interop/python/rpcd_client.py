"""A minimal rpcd client (wire protocol version 1), written from docs/protocol.md alone.

Standard library only, Python 3.9+. Encodes Request, OneWay, Cancel and Ping frames
with optional metadata and deadline, cuts frames out of a socket stream however the
bytes arrive, matches replies by call id, and raises RpcError for Error frames.
Opens streams ("Streams"): odd ids, credit-based flow control both ways, half-close
and the final StreamReset. Optionally sends a Hello naming gzip ("Compression"), then
gzips calls of 1 KiB or more and expands gzipped replies. A stream opened with
compression=("gzip",) names gzip in its StreamOpen, reads the server's list from its
first StreamCredit, then gzips StreamData of 1 KiB or more and expands gzipped
StreamData, counting flow control by the bytes once expanded ("Compression", "Streams").
Publishes and subscribes ("Publish and subscribe"): Subscribe with the next subscription
id (optionally naming gzip for its Messages, "Compression"), a Request after it to know it
is live, Unsubscribe, Publish, and Messages filed by subscription, gzipped ones expanded
within the frame limit and dropped (counted) when they do not expand. Topics and patterns
are checked where the page says a receiver must. A server's refusal of a Publish (an Error
of call id 0, "Permissions") is kept in publish_refusals; a refused Subscribe ends its
Subscription as any Unsubscribe from the server does.
Serves the calls the server makes to it ("Calls from the server"): handlers registered
with Client.handle answer the server's Requests with a Response in the Request's codec or
an Error with their code, as frames are read (also while waiting for a reply of its own);
a route it does not serve is answered Error NotFound with Unprocessed; OneWays are handed
to their handler and never answered; a Cancel marks the call cancelled and its reply is
skipped. Headers of the call kinds are checked against "Rules per kind".
"""

import gzip
import json
import socket
import struct
import time
import zlib
from collections import deque
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

# Header: magic "RD", version, kind, flags, codec, route length, call id,
# deadline (ms), metadata length, reserved (0), payload length. Big-endian, 24 bytes.
HEADER = struct.Struct(">2sBBBBHIIHHI")
MAGIC, VERSION = b"RD", 0x01
REQUEST, RESPONSE, ERROR, ONEWAY, CANCEL, PING, PONG, GOAWAY = range(1, 9)
STREAM_OPEN, STREAM_DATA, STREAM_CREDIT, STREAM_END, STREAM_RESET = range(0x18, 0x1D)
HELLO, WELCOME = 0x10, 0x11
SUBSCRIBE, UNSUBSCRIBE, PUBLISH, MESSAGE = range(0x09, 0x0D)
FLAG_UNPROCESSED = 0x01
# Flags: the two bits 0x06 say how a Request's, Response's, OneWay's, Message's or
# StreamData's payload is compressed: 0 not at all, gzip 0x02, Zstandard 0x04; 0x06 is
# reserved ("Flags"). Bits 0x08-0x80 are reserved.
COMPRESSION_MASK, FLAG_GZIP, FLAG_ZSTD, FLAGS_RESERVED = 0x06, 0x02, 0x04, 0xF8
COMPRESSIBLE_KINDS = (REQUEST, RESPONSE, ONEWAY, MESSAGE, STREAM_DATA)
# "Compression": the metadata key of the handshake (and of a stream's StreamOpen and
# first StreamCredit, and of a Subscribe), and the compressions this client can expand
# and send, by name (Python's standard library has no Zstandard).
MD_COMPRESSION, MD_AUTH_METHOD = "rpcd-compression", "rpcd-auth-method"
COMPRESSIONS = {"gzip": FLAG_GZIP}
COMPRESS_MIN = 1024  # calls and StreamData of 1 KiB or more are compressed, when that makes them smaller
MAX_HELLO = 4096     # Hello and Welcome payloads ("Limits")
CODEC_RAW, CODEC_JSON = 0x00, 0x01
# Default limits ("Limits"): whole frame incl. header, route, metadata; Ping payload.
MAX_FRAME, MAX_ROUTE, MAX_METADATA, MAX_PING = 4 * 1024 * 1024, 256, 8 * 1024, 64
MAX_SUBSCRIPTIONS = 1024  # rpcd's per connection ("Publish and subscribe", Frames)

# Error codes (the numbers are gRPC's); codes above 16 are kept as bare numbers.
CODE_NAMES = ("OK Canceled Unknown InvalidArgument DeadlineExceeded NotFound "
              "AlreadyExists PermissionDenied ResourceExhausted FailedPrecondition "
              "Aborted OutOfRange Unimplemented Internal Unavailable DataLoss "
              "Unauthenticated").split()
CANCELED, UNKNOWN, DEADLINE_EXCEEDED, PERMISSION_DENIED, FAILED_PRECONDITION, ABORTED = 1, 2, 4, 7, 9, 10
INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE = 3, 5, 8, 13, 14
DATA_LOSS, UNAUTHENTICATED = 15, 16

Metadata = Sequence[Tuple[str, bytes]]


class ProtocolError(Exception):
    """The peer sent bytes that break a rule of the protocol (fatal to the connection)."""


class RpcError(Exception):
    """An Error frame: one call failed; the connection stays usable."""

    def __init__(self, code: int, message: str, unprocessed: bool = False):
        name = CODE_NAMES[code] if code < len(CODE_NAMES) else "code"
        super().__init__("%s (%d): %s" % (name, code, message))
        self.code, self.message, self.unprocessed = code, message, unprocessed


class GoAwayError(Exception):
    """The peer sent GoAway: no new calls may be sent on this connection."""

    def __init__(self, last_call_id: int, code: int, message: str):
        super().__init__("GoAway last=%d code=%d: %s" % (last_call_id, code, message))
        self.last_call_id, self.code, self.message = last_call_id, code, message


# One decoded frame; metadata is a list of (key, value) pairs in wire order.
Frame = NamedTuple("Frame", [("kind", int), ("flags", int), ("codec", int),
                             ("call_id", int), ("deadline_ms", int), ("route", str),
                             ("metadata", List[Tuple[str, bytes]]), ("payload", bytes)])


def encode_metadata(md: Optional[Metadata]) -> bytes:
    """Entries of keylen (1 B, 1..255), key (printable ASCII), vallen (2 B BE), value."""
    out = bytearray()
    for key, value in md or ():
        k = key.encode("ascii")
        if not 1 <= len(k) <= 255 or any(b < 0x21 or b > 0x7E for b in k) or len(value) > 0xFFFF:
            raise ValueError("bad metadata entry %r" % key)
        out += bytes([len(k)]) + k + struct.pack(">H", len(value)) + value
    return bytes(out)


def encode_frame(kind: int, call_id: int, route: str = "", payload: bytes = b"",
                 codec: int = CODEC_RAW, flags: int = 0, deadline_ms: int = 0,
                 metadata: Optional[Metadata] = None) -> bytes:
    """One whole frame: the 24-byte header, then route, metadata and payload."""
    r, md = route.encode("ascii"), encode_metadata(metadata)
    if len(r) > MAX_ROUTE or len(md) > MAX_METADATA or \
            HEADER.size + len(r) + len(md) + len(payload) > MAX_FRAME:
        raise ValueError("frame over the default limits")
    head = HEADER.pack(MAGIC, VERSION, kind, flags, codec, len(r), call_id,
                       deadline_ms, len(md), 0, len(payload))
    return head + r + md + bytes(payload)


def decode_metadata(section: bytes) -> List[Tuple[str, bytes]]:
    """The entries must fill the section exactly; keys may repeat."""
    out, i = [], 0
    while i < len(section):
        klen = section[i]
        if klen == 0 or i + 1 + klen + 2 > len(section):
            raise ProtocolError("malformed metadata entry at offset %d" % i)
        key = section[i + 1:i + 1 + klen].decode("ascii", "replace")
        (vlen,) = struct.unpack_from(">H", section, i + 1 + klen)
        i += 3 + klen
        if i + vlen > len(section):
            raise ProtocolError("metadata value runs past the section")
        out.append((key, bytes(section[i:i + vlen])))
        i += vlen
    return out


def parse_error(payload: bytes) -> Tuple[int, str]:
    """Error body: code (2 B BE), then a UTF-8 message (may be empty)."""
    if len(payload) < 2:
        raise ProtocolError("Error body shorter than 2 bytes")
    return struct.unpack_from(">H", payload)[0], payload[2:].decode("utf-8", "replace")


def parse_goaway(payload: bytes) -> Tuple[int, int, str]:
    """GoAway body: last call id (4 B BE), code (2 B BE), then a UTF-8 message."""
    if len(payload) < 6:
        raise ProtocolError("GoAway body shorter than 6 bytes")
    last, code = struct.unpack_from(">IH", payload)
    return last, code, payload[6:].decode("utf-8", "replace")


def check_flags(kind: int, flags: int) -> None:
    """Reserved bits, the reserved compression 3, or a compression on a kind that
    cannot carry one are protocol errors ("Flags", "Protocol errors")."""
    if flags & FLAGS_RESERVED:
        raise ProtocolError("reserved flag bit set: 0x%02x" % flags)
    comp = flags & COMPRESSION_MASK
    if comp == COMPRESSION_MASK:
        raise ProtocolError("reserved compression 3")
    if comp and kind not in COMPRESSIBLE_KINDS:
        raise ProtocolError("compression on kind 0x%02x" % kind)


def topic_error(route: str, pattern: bool = False) -> Optional[str]:
    """Why route is not a topic (or, with pattern, not a pattern), or None when it is.
    "Topics and patterns": one or more tokens separated by '.'; a token is one or more
    bytes in 0x21-0x7E other than '.', '*' and '>'; in a pattern a token may be the
    wildcard '*' (exactly one token) or '>' (one or more tokens, last token only)."""
    if not route:
        return "empty"
    tokens = route.split(".")
    for i, tok in enumerate(tokens):
        if not tok:
            return "empty token %d in %r" % (i, route)
        if pattern and tok == "*":
            continue
        if pattern and tok == ">":
            if i != len(tokens) - 1:
                return "'>' before the last token in %r" % route
            continue
        for ch in tok:
            if ch in "*>" or not 0x21 <= ord(ch) <= 0x7E:
                return "byte %r not allowed in a %s token: %r" % (
                    ch, "pattern" if pattern else "topic", route)
    return None


def check_topic(route: str, pattern: bool = False) -> None:
    """A route field that breaks the rules where a topic or pattern belongs is a
    protocol error ("Topics and patterns")."""
    why = topic_error(route, pattern)
    if why:
        raise ProtocolError("bad %s: %s" % ("pattern" if pattern else "topic", why))


def topic_matches(pattern: str, topic: str) -> bool:
    """Whether pattern matches topic: '*' matches exactly one token, a final '>' one
    or more ("Topics and patterns"). Both must be valid."""
    p, t = pattern.split("."), topic.split(".")
    if p[-1] == ">":
        if len(t) < len(p):  # '>' needs at least one token
            return False
        p, t = p[:-1], t[:len(p) - 1]
    return len(p) == len(t) and all(a == "*" or a == b for a, b in zip(p, t))


def check_pubsub_header(kind: int, flags: int, codec: int, rlen: int, cid: int,
                        deadline: int, plen: int) -> None:
    """"Rules per kind" for Subscribe, Unsubscribe, Publish and Message, checked on the
    header alone (flags already passed check_flags); anything else is a protocol error.

    | kind        | call id | codec | route        | deadline | flags         | payload |
    | Subscribe   | 1+      | Raw   | a pattern    | 0        | 0             | none |
    | Unsubscribe | 1+      | Raw   | none         | 0        | 0             | none, or 2 B+ |
    | Publish     | 0       | any   | a topic      | 0        | 0             | any |
    | Message     | 1+      | any   | a topic      | 0        | 0 or a compr. | any |
    """
    name = {SUBSCRIBE: "Subscribe", UNSUBSCRIBE: "Unsubscribe",
            PUBLISH: "Publish", MESSAGE: "Message"}[kind]
    if (cid == 0) != (kind == PUBLISH):
        raise ProtocolError("%s with call id %d" % (name, cid))
    if deadline:
        raise ProtocolError("%s with a deadline" % name)
    if kind in (SUBSCRIBE, UNSUBSCRIBE) and codec != CODEC_RAW:
        raise ProtocolError("%s with codec 0x%02x, not Raw" % (name, codec))
    if (rlen == 0) != (kind == UNSUBSCRIBE):
        raise ProtocolError("%s with route length %d" % (name, rlen))
    if flags & ~(COMPRESSION_MASK if kind == MESSAGE else 0):  # Message: 0 or a compression
        raise ProtocolError("%s with flags 0x%02x" % (name, flags))
    if kind == SUBSCRIBE and plen:
        raise ProtocolError("Subscribe with a payload")
    if kind == UNSUBSCRIBE and plen == 1:  # an error body is 2 bytes or more
        raise ProtocolError("Unsubscribe with a 1-byte body")


def check_call_header(kind: int, flags: int, codec: int, rlen: int, cid: int,
                      deadline: int, plen: int) -> None:
    """"Rules per kind" for Request, Response, Error, OneWay and Cancel, checked on the
    header alone (flags already passed check_flags); anything else is a protocol error.

    | kind     | call id | codec | route            | deadline | flags              | payload |
    | Request  | 1+      | any   | 1 B to the limit | any      | 0 or a compression | any |
    | Response | 1+      | any   | none             | 0        | 0 or a compression | any |
    | Error    | 0+ (*)  | Raw   | none             | 0        | 0 or Unprocessed   | 2 B+ |
    | OneWay   | 1+      | any   | 1 B to the limit | any      | 0 or a compression | any |
    | Cancel   | 1+      | Raw   | none             | 0        | 0                  | none |

    (*) an Error of call id 0 is the server's refusal of a Publish ("Permissions").
    """
    name = {REQUEST: "Request", RESPONSE: "Response", ERROR: "Error",
            ONEWAY: "OneWay", CANCEL: "Cancel"}[kind]
    if cid == 0 and kind != ERROR:
        raise ProtocolError("%s with call id 0" % name)
    if kind in (ERROR, CANCEL) and codec != CODEC_RAW:
        raise ProtocolError("%s with codec 0x%02x, not Raw" % (name, codec))
    if (rlen == 0) == (kind in (REQUEST, ONEWAY)):
        raise ProtocolError("%s with route length %d" % (name, rlen))
    if deadline and kind not in (REQUEST, ONEWAY):
        raise ProtocolError("%s with a deadline" % name)
    allowed = {ERROR: FLAG_UNPROCESSED, CANCEL: 0}.get(kind, COMPRESSION_MASK)
    if flags & ~allowed:
        raise ProtocolError("%s with flags 0x%02x" % (name, flags))
    if kind == ERROR and plen < 2:
        raise ProtocolError("Error body shorter than 2 bytes")
    if kind == CANCEL and plen:
        raise ProtocolError("Cancel with a payload")


def check_route(route: bytes) -> None:
    """A route is printable ASCII, 0x21-0x7E ("Route"); another byte is a protocol error."""
    if any(b < 0x21 or b > 0x7E for b in route):
        raise ProtocolError("route byte outside 0x21-0x7E in %r" % route)


def first_value(md: Metadata, key: str) -> Optional[bytes]:
    """Keys may repeat; a reader that wants one value takes the first ("Metadata")."""
    return next((v for k, v in md if k == key), None)


def parse_compressions(value: Optional[bytes]) -> List[str]:
    """rpcd-compression: names, comma-separated, in order of preference ("Compression")."""
    if not value:
        return []
    return [n.strip() for n in value.decode("ascii", "replace").split(",") if n.strip()]


def gzip_payload(payload: bytes) -> Optional[bytes]:
    """The payload gzipped, or None when it stays as it is: under COMPRESS_MIN, or no
    smaller compressed ("Compression": rpcd's rule, for calls and StreamData alike,
    which a client follows too)."""
    if len(payload) < COMPRESS_MIN:
        return None
    packed = gzip.compress(payload)
    return packed if len(packed) < len(payload) else None


def gunzip(data: bytes, limit: int) -> bytes:
    """Expand one gzip member or several one after the other (RFC 1952), never past
    limit bytes. Raises ValueError for data that does not expand, or empty data."""
    if not data:
        raise ValueError("empty compressed payload")
    out, rest = bytearray(), data
    try:
        while rest:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip header and trailer
            out += d.decompress(rest, limit - len(out) + 1)
            if len(out) > limit:
                raise OverflowError("expands past %d bytes" % limit)
            if not d.eof:
                raise ValueError("truncated gzip data")
            rest = d.unused_data
    except zlib.error as e:
        raise ValueError("not gzip data: %s" % e) from e
    return bytes(out)


def expand(f: Frame) -> Frame:
    """A Request, Response, OneWay or Message with its payload expanded and its
    compression bits cleared; a frame without compression comes back as it is. What the
    payload expands to counts against the frame limit ("Compression": the room its frame
    has, the limit less the header, the route and the metadata). Raises ValueError
    (does not expand, or a compression this client cannot do) or OverflowError."""
    comp = f.flags & COMPRESSION_MASK
    if not comp:
        return f
    if comp != FLAG_GZIP:
        raise ValueError("compression 0x%02x not supported" % comp)
    room = MAX_FRAME - HEADER.size - len(f.route) - len(encode_metadata(f.metadata))
    return f._replace(flags=f.flags & ~COMPRESSION_MASK, payload=gunzip(f.payload, room))


def after(a: int, b: int) -> bool:
    """RFC 1982: id a comes after id b when the signed 32-bit a - b is positive."""
    return 0 < ((a - b) & 0xFFFFFFFF) < 0x80000000


class FrameReader:
    """Cuts whole frames out of a socket's byte stream, whatever the recv sizes."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buf = sock, bytearray()

    def _fill(self, n: int) -> bool:
        """Buffer at least n bytes; False if the stream ended cleanly first."""
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                if self.buf:
                    raise ProtocolError("connection closed inside a frame")
                return False
            self.buf += chunk
        return True

    def read_frame(self) -> Optional[Frame]:
        """The next frame, or None when the peer closed between frames."""
        if not self._fill(HEADER.size):
            return None
        magic, ver, kind, flags, codec, rlen, cid, deadline, mlen, reserved, plen = \
            HEADER.unpack_from(self.buf)
        # Check the header as soon as it is here, before buffering the rest.
        if magic != MAGIC or ver != VERSION:
            raise ProtocolError("bad magic %r or version %d" % (magic, ver))
        if not (REQUEST <= kind <= MESSAGE or kind in (HELLO, WELCOME)
                or STREAM_OPEN <= kind <= STREAM_RESET) or reserved:
            raise ProtocolError("reserved kind or header field set")
        check_flags(kind, flags)
        if SUBSCRIBE <= kind <= MESSAGE:
            check_pubsub_header(kind, flags, codec, rlen, cid, deadline, plen)
        elif REQUEST <= kind <= CANCEL:
            check_call_header(kind, flags, codec, rlen, cid, deadline, plen)
        total = HEADER.size + rlen + mlen + plen
        if rlen > MAX_ROUTE or mlen > MAX_METADATA or total > MAX_FRAME:
            raise ProtocolError("frame of %d bytes over a limit" % total)
        self._fill(total)  # raises if the stream ends inside the frame
        body = bytes(self.buf[HEADER.size:total])
        del self.buf[:total]
        if kind in (REQUEST, ONEWAY):
            check_route(body[:rlen])
        route = body[:rlen].decode("ascii", "replace")
        if kind in (SUBSCRIBE, PUBLISH, MESSAGE):  # a pattern, or a topic
            check_topic(route, pattern=kind == SUBSCRIBE)
        return Frame(kind, flags, codec, cid, deadline, route,
                     decode_metadata(body[rlen:rlen + mlen]), body[rlen + mlen:])


# What a handler returns to answer later, through ServerCall.reply or ServerCall.fail.
LATER = object()

Handler = Callable[["ServerCall"], object]


class ServerCall:
    """A Request or OneWay the server sent this client ("Calls from the server"), its
    payload expanded if it came compressed. call_id is the server's own id, in a space
    apart from this client's calls ("Call ids"). deadline_ms is the milliseconds the
    server will wait, counted from when this client read the frame (`received`, on
    time.monotonic()); 0 means none ("Frame layout", "A deadline"). cancelled is set
    when the server's Cancel for it arrives; its reply is then skipped ("A cancelled
    call": the callee "may skip the reply")."""

    def __init__(self, client: "Client", f: Frame, wire_flags: int):
        self.client, self.frame, self.wire_flags = client, f, wire_flags
        self.kind, self.call_id, self.route = f.kind, f.call_id, f.route
        self.codec, self.metadata, self.payload = f.codec, f.metadata, f.payload
        self.deadline_ms = f.deadline_ms
        self.received = time.monotonic()
        self.cancelled = False
        self.answer: Optional[Frame] = None  # the Response or Error sent, once sent

    @property
    def oneway(self) -> bool:
        return self.kind == ONEWAY

    @property
    def expired(self) -> bool:
        """Whether the server's deadline has passed: it no longer waits for the answer,
        and drops one that comes ("Edge cases a receiver meets")."""
        return bool(self.deadline_ms) and \
            time.monotonic() >= self.received + self.deadline_ms / 1000.0

    def reply(self, payload: bytes = b"", codec: Optional[int] = None) -> None:
        """Answer with a Response carrying the server's id and, unless codec says
        otherwise, the codec of its Request ("Codecs"). A reply over the frame limit is
        answered Error ResourceExhausted instead ("Error codes"). Skipped for a call the
        server cancelled; a OneWay is never answered."""
        if self.oneway:
            raise ValueError("a OneWay is never answered")
        if self.cancelled:
            return
        codec = self.codec if codec is None else codec
        if HEADER.size + len(payload) > MAX_FRAME:  # the frame as it would be uncompressed
            return self.fail(RESOURCE_EXHAUSTED, "reply of %d bytes over the frame limit"
                             % len(payload))
        flags, packed = 0, None
        if self.client.compress_answers and self.client.compression == FLAG_GZIP:
            packed = gzip_payload(payload)
        if packed is not None:
            flags = FLAG_GZIP
        data = encode_frame(RESPONSE, self.call_id, payload=payload if packed is None else packed,
                            codec=codec, flags=flags)
        self._send(Frame(RESPONSE, flags, codec, self.call_id, 0, "", [], payload), data)

    def fail(self, code: int, message: str = "", unprocessed: bool = False) -> None:
        """Answer with an Error: code, message, and the Unprocessed flag when the call
        was not acted on ("Flags"). Skipped for a cancelled call."""
        if self.oneway:
            raise ValueError("a OneWay is never answered")
        if self.cancelled:
            return
        text = message.encode("utf-8")[:4096].decode("utf-8", "ignore")  # a whole UTF-8 text
        body = struct.pack(">H", code) + text.encode("utf-8")
        flags = FLAG_UNPROCESSED if unprocessed else 0
        self._send(Frame(ERROR, flags, CODEC_RAW, self.call_id, 0, "", [], body),
                   encode_frame(ERROR, self.call_id, payload=body, flags=flags))

    def _send(self, answer: Frame, data: bytes) -> None:
        if self.answer is not None:
            raise ValueError("call %d already answered" % self.call_id)
        self.answer = answer
        if self.client.serving.get(self.call_id) is self:
            del self.client.serving[self.call_id]
        self.client.send_raw(data)


class Client:
    """One connection. Not thread-safe: one caller sends and reads."""

    def __init__(self, host: str, port: int, timeout: float = 5.0,
                 compression: Sequence[str] = ()):
        """compression names what this client takes, e.g. ("gzip",): then a Hello
        is sent and its Welcome read before the constructor returns ("Compression")."""
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)  # every send and recv is bounded
        self.reader = FrameReader(self.sock)
        self.next_id = 1
        self.pending: set = set()            # ids of our Requests not yet answered
        self.replies: Dict[int, Frame] = {}  # replies read before they were asked for
        self.pongs: deque = deque()
        self.goaway: Optional[GoAwayError] = None
        self.streams: Dict[int, "Stream"] = {}  # open streams, by id
        self.next_stream = 1                    # a client opens odd stream ids
        self.welcome: Optional[Frame] = None    # the server's Welcome, once read
        self.peer_compressions: List[str] = []  # what the Welcome names, in its order
        self.compression = 0                    # flag bits calls are sent with; 0: none
        self.subs: Dict[int, "Subscription"] = {}  # live subscriptions, by id
        self.next_sub = 1                       # subscription ids: a space of their own
        self.stray_messages = 0                 # Messages for no live subscription, dropped
        # The server's refusals of this client's Publishes, in the order they came:
        # (code, message, Unprocessed) of each Error of call id 0 ("Permissions").
        self.publish_refusals: List[Tuple[int, str, bool]] = []
        # Calls from the server ("Calls from the server"): handlers by route; the
        # server's Requests being served and not yet answered, by the server's id; a
        # log of the OneWays that failed (no route, a handler error), which are never
        # answered; Cancels for no call being served, ignored.
        self.routes: Dict[str, Handler] = {}
        self.serving: Dict[int, ServerCall] = {}
        self.oneway_log: List[Tuple[int, str, str]] = []  # (server's id, route, why)
        self.stray_cancels = 0
        # rpcd's client does not compress its answers to the server's calls; set this
        # to gzip those of 1 KiB or more, once the Welcome named gzip ("Compression").
        self.compress_answers = False
        if compression:
            self.hello(compression)

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:  # sendall: one write per call
        self.sock.sendall(data)

    def new_id(self) -> int:
        """Count up from 1, wrap 0xFFFFFFFF -> 1, skip ids still pending."""
        while True:
            cid, self.next_id = self.next_id, self.next_id % 0xFFFFFFFF + 1
            if cid not in self.pending:
                return cid

    def hello(self, compression: Sequence[str] = ("gzip",), credentials: bytes = b"",
              method: Optional[str] = None) -> Frame:
        """Send a Hello naming the compressions this client takes (and credentials,
        with the rpcd-auth-method key when method is given), then read frames up to
        the Welcome and record what it names ("The handshake", "Compression").
        Raises GoAwayError if the server refuses the Hello."""
        unknown = [n for n in compression if n not in COMPRESSIONS]
        if unknown:  # naming one is a promise to expand it
            raise ValueError("this client cannot expand %s" % ", ".join(unknown))
        if len(credentials) > MAX_HELLO:
            raise ValueError("Hello payload over 4,096 bytes")
        md = [(MD_AUTH_METHOD, method.encode("ascii"))] if method else []
        if compression:
            md.append((MD_COMPRESSION, ",".join(compression).encode("ascii")))
        self.send_raw(encode_frame(HELLO, 0, payload=credentials, metadata=md))
        while self.welcome is None:
            if self.goaway:  # GoAway Unauthenticated: the server closes
                raise self.goaway
            self.read_one()
        # A Welcome without the key means the server takes none. Calls go in the
        # first compression of the server's list that this client does too.
        self.peer_compressions = parse_compressions(
            first_value(self.welcome.metadata, MD_COMPRESSION))
        ours = [COMPRESSIONS[n] for n in self.peer_compressions if n in compression]
        self.compression = ours[0] if ours else 0
        return self.welcome

    @property
    def identity(self) -> Optional[str]:
        """The identity the Welcome gave (empty for a server that requires none)."""
        return None if self.welcome is None else self.welcome.payload.decode("utf-8", "replace")

    def request_frame(self, route: str, payload: bytes = b"", codec: int = CODEC_RAW,
                      metadata: Optional[Metadata] = None, deadline_ms: int = 0,
                      kind: int = REQUEST) -> Tuple[int, bytes]:
        """A Request (or OneWay) with a fresh id, built but not sent (for pipelining).
        Once the Welcome named gzip, a payload of 1 KiB or more goes gzipped."""
        if self.goaway:  # the receiver of GoAway sends no new calls
            raise self.goaway
        flags, packed = 0, None
        if self.compression == FLAG_GZIP:
            # What the payload expands to counts against the frame limit.
            if HEADER.size + len(route) + len(encode_metadata(metadata)) + len(payload) > MAX_FRAME:
                raise ValueError("frame over the default limits once expanded")
            packed = gzip_payload(payload)
        if packed is not None:
            flags, payload = FLAG_GZIP, packed
        cid = self.new_id()
        if kind == REQUEST:
            self.pending.add(cid)
        return cid, encode_frame(kind, cid, route, payload, codec, flags=flags,
                                 deadline_ms=deadline_ms, metadata=metadata)

    def send_request(self, route: str, payload: bytes = b"", codec: int = CODEC_RAW,
                     metadata: Optional[Metadata] = None, deadline_ms: int = 0) -> int:
        cid, data = self.request_frame(route, payload, codec, metadata, deadline_ms)
        self.send_raw(data)
        return cid

    def oneway(self, route: str, payload: bytes = b"", codec: int = CODEC_RAW,
               metadata: Optional[Metadata] = None) -> None:
        self.send_raw(self.request_frame(route, payload, codec, metadata, kind=ONEWAY)[1])

    def cancel(self, call_id: int) -> None:
        """Stop waiting for call_id; a reply that crosses the Cancel is dropped."""
        self.pending.discard(call_id)
        self.replies.pop(call_id, None)
        self.send_raw(encode_frame(CANCEL, call_id))

    def handle(self, route: str, fn: Optional[Handler]) -> None:
        """Serve route to the server ("Calls from the server"). fn gets a ServerCall and
        returns the Response's payload (bytes; None for an empty one), or LATER to answer
        later through the ServerCall; it raises RpcError to answer an Error with that
        code (and the Unprocessed flag, if set), and any other exception to answer Error
        Unknown ("a handler's error that carries no code"). For a OneWay its return
        value is dropped and its error logged in oneway_log. fn runs as the frame is
        read, inside whatever call of this client is reading: it may make calls of its
        own on this connection. fn None stops serving the route."""
        if fn is None:
            self.routes.pop(route, None)
            return
        r = route.encode("ascii")
        if not 1 <= len(r) <= MAX_ROUTE or any(b < 0x21 or b > 0x7E for b in r):
            raise ValueError("bad route %r" % route)
        self.routes[route] = fn

    def run_until(self, done: Callable[[], bool]) -> None:
        """Read (and serve) frames until done() holds."""
        while not done():
            self.read_one()

    def _oneway_failed(self, f: Frame, why: str) -> None:
        """"A OneWay that fails (no route, a handler error): logs it; it never
        answers a OneWay" ("Edge cases a receiver meets")."""
        self.oneway_log.append((f.call_id, f.route, why))

    def on_call(self, f: Frame) -> None:
        """A Request or OneWay from the server ("Calls from the server"): refused as
        a server refuses one, or run by the route's handler and, for a Request,
        answered with the server's id."""
        oneway = f.kind == ONEWAY
        if not oneway and f.call_id in self.serving:
            # "A Request whose call id is still in flight on this connection": this
            # client answers Error InvalidArgument with Unprocessed, as rpcd does for
            # calls on its blocking pool; the call in flight is still answered.
            body = struct.pack(">H", INVALID_ARGUMENT) + \
                b"call id %d still in flight" % f.call_id
            self.send_raw(encode_frame(ERROR, f.call_id, payload=body, flags=FLAG_UNPROCESSED))
            return
        fn = self.routes.get(f.route)
        refusal = None
        if fn is None:  # refused as such before its payload is looked at
            refusal = (NOT_FOUND, "no route %s on this client" % f.route)
        else:
            try:
                g = expand(f)
            except OverflowError as e:
                refusal = (RESOURCE_EXHAUSTED, "payload %s" % e)
            except ValueError as e:
                refusal = (INVALID_ARGUMENT, "payload does not expand: %s" % e)
        if refusal is not None:
            if oneway:
                self._oneway_failed(f, refusal[1])
            else:
                body = struct.pack(">H", refusal[0]) + refusal[1].encode("utf-8")
                self.send_raw(encode_frame(ERROR, f.call_id, payload=body, flags=FLAG_UNPROCESSED))
            return
        call = ServerCall(self, g, f.flags)
        if not oneway:
            self.serving[f.call_id] = call
        try:
            out = fn(call)
            if not oneway and out is not LATER:
                out = b"" if out is None else bytes(out)
        except RpcError as e:
            if oneway:
                self._oneway_failed(f, str(e))
            elif call.answer is None:
                call.fail(e.code, e.message, e.unprocessed)
            return
        except Exception as e:  # an error that carries no code
            if oneway:
                self._oneway_failed(f, repr(e))
            elif call.answer is None:
                call.fail(UNKNOWN, "%s: %s" % (type(e).__name__, e))
            return
        if not oneway and out is not LATER and call.answer is None:
            call.reply(out)

    def read_one(self) -> Frame:
        """Read one frame and file it by kind. Raises when the stream ends."""
        f = self.reader.read_frame()
        if f is None:
            raise self.goaway or ConnectionError("connection closed by peer")
        if f.kind == ERROR and f.call_id == 0:  # a Publish of ours, refused
            code, msg = parse_error(f.payload)
            self.publish_refusals.append((code, msg, bool(f.flags & FLAG_UNPROCESSED)))
        elif f.kind in (RESPONSE, ERROR):
            if f.call_id in self.pending:  # else cancelled or unknown: drop it
                self.replies[f.call_id] = f
        elif f.kind in (REQUEST, ONEWAY):  # the server calls this client
            self.on_call(f)
        elif f.kind == CANCEL:  # of a call the server made; else ignored
            call = self.serving.pop(f.call_id, None)
            if call is None:
                self.stray_cancels += 1
            else:
                call.cancelled = True
        elif f.kind == PONG:
            self.pongs.append(f.payload)
        elif f.kind == WELCOME:
            self.welcome = f
        elif f.kind == GOAWAY:  # keep reading: calls up to `last` still get answers
            self.goaway = GoAwayError(*parse_goaway(f.payload))
        elif f.kind == PING:  # the protocol is symmetric: answer Pings
            self.send_raw(encode_frame(PONG, 0, payload=f.payload))
        elif f.kind == STREAM_OPEN:  # this client serves no stream route
            self.send_raw(encode_frame(STREAM_RESET, f.call_id, flags=FLAG_UNPROCESSED,
                                       payload=struct.pack(">H", NOT_FOUND) + b"no stream routes here"))
        elif STREAM_DATA <= f.kind <= STREAM_RESET and f.call_id in self.streams:
            self.streams[f.call_id].on_frame(f)  # frames of unknown streams are dropped
        elif f.kind == MESSAGE:
            sub = self.subs.get(f.call_id)
            if sub is None:  # on the wire when we unsubscribed: dropped
                self.stray_messages += 1
            else:
                sub.on_message(f)
        elif f.kind == UNSUBSCRIBE:  # the server ended (or refused) a subscription
            sub = self.subs.pop(f.call_id, None)
            if sub is not None:      # else one we had ended ourselves: nothing to do
                sub.ended = parse_error(f.payload) if f.payload else (None, "")
        elif f.kind in (SUBSCRIBE, PUBLISH):
            # Sent by the client only (Kinds); the page names no rule for a client
            # that receives one. This client treats it as breaking the protocol.
            raise ProtocolError("kind 0x%02x from the server" % f.kind)
        return f

    def new_subscription_id(self) -> int:
        """From 1 up, in a space of their own; never an id whose subscription lives.
        Counting on (wrapping 0xFFFFFFFF -> 1) keeps a just-ended id unused for long,
        so that its Messages still on the wire are not taken for a new subscription's."""
        while True:
            sid, self.next_sub = self.next_sub, self.next_sub % 0xFFFFFFFF + 1
            if sid not in self.subs:
                return sid

    def subscribe(self, pattern: str, compression: Sequence[str] = (),
                  metadata: Optional[Metadata] = None, confirm: bool = False) -> "Subscription":
        """Send a Subscribe for pattern with the next subscription id ("Publish and
        subscribe"). compression names what this subscriber takes on its Messages, e.g.
        ("gzip",): it goes in the Subscribe's metadata under rpcd-compression, first
        ("Compression"). The server does not answer a Subscribe it takes; with confirm,
        a Request follows it and this returns once that is answered, raising RpcError
        if the server refused the subscription (its Unsubscribe arrives first)."""
        if self.goaway:
            raise self.goaway
        why = topic_error(pattern, pattern=True)
        if why:
            raise ValueError("bad pattern: %s" % why)
        unknown = [n for n in compression if n not in COMPRESSIONS]
        if unknown:  # naming one is a promise to expand it
            raise ValueError("this client cannot expand %s" % ", ".join(unknown))
        md = list(metadata or ())
        if compression:
            md.insert(0, (MD_COMPRESSION, ",".join(compression).encode("ascii")))
        sid = self.new_subscription_id()
        sub = Subscription(self, sid, pattern, compression)
        self.subs[sid] = sub
        self.send_raw(encode_frame(SUBSCRIBE, sid, pattern, metadata=md))
        if confirm:
            sub.confirm()
        return sub

    def sync(self, route: str = "Sys/Ping") -> None:
        """Send a Request and wait for its answer, a Response or an Error alike. Frames
        are handled in order, so every Subscribe, Unsubscribe and Publish sent before it
        has been taken in: a subscription is live, or its refusal has arrived, and so
        has the refusal of a Publish ("Publish and subscribe", Frames, Permissions)."""
        try:
            self.wait(self.send_request(route, codec=CODEC_JSON))
        except RpcError:
            pass  # any answer will do

    def unsubscribe(self, sub) -> None:
        """Send an Unsubscribe (no payload) for a Subscription or a subscription id.
        Messages already on the wire may still arrive: they are dropped, counted in
        stray_messages, since the id is no longer known."""
        sid = sub.sid if isinstance(sub, Subscription) else sub
        self.subs.pop(sid, None)
        self.send_raw(encode_frame(UNSUBSCRIBE, sid))

    def publish(self, topic: str, payload: bytes = b"", codec: int = CODEC_RAW,
                metadata: Optional[Metadata] = None) -> None:
        """Send a Publish: id 0, route = the topic, the payload as it is (a Publish is
        never compressed), no deadline. Not answered when taken; a server with topic
        permissions answers one it refuses with an Error of call id 0, which read_one
        keeps in publish_refusals: after sync(), every refusal of the Publishes sent
        before it has arrived ("Permissions")."""
        if self.goaway:
            raise self.goaway
        why = topic_error(topic)
        if why:
            raise ValueError("bad topic: %s" % why)
        self.send_raw(encode_frame(PUBLISH, 0, topic, payload, codec, metadata=metadata))

    def publish_json(self, topic: str, value) -> None:
        self.publish(topic, json.dumps(value).encode("utf-8"), CODEC_JSON)

    def open_stream(self, route: str, window: int = 65536,
                    metadata: Optional[Metadata] = None, deadline_ms: int = 0,
                    compression: Sequence[str] = ()) -> "Stream":
        """StreamOpen with the next odd id, granting the server `window` bytes.
        compression names the compressions this end takes for the stream's data, e.g.
        ("gzip",): it goes in the StreamOpen's metadata under rpcd-compression, and the
        server's first StreamCredit says which it takes ("Compression", Streams). The
        handshake's lists speak of calls alone: a stream settles its own."""
        if self.goaway:
            raise self.goaway
        unknown = [n for n in compression if n not in COMPRESSIONS]
        if unknown:  # naming one is a promise to expand it
            raise ValueError("this client cannot expand %s" % ", ".join(unknown))
        md = list(metadata or ())
        if compression:  # the first entry: a reader takes a key's first value
            md.insert(0, (MD_COMPRESSION, ",".join(compression).encode("ascii")))
        sid = self.next_stream
        self.next_stream = (self.next_stream + 2) & 0xFFFFFFFF or 1
        st = Stream(self, sid, window, compression)
        self.streams[sid] = st
        self.send_raw(encode_frame(STREAM_OPEN, sid, route, struct.pack(">I", window),
                                   deadline_ms=deadline_ms, metadata=md))
        return st

    def wait(self, call_id: int) -> Frame:
        """The Response for call_id, its payload expanded if it came compressed (and
        its compression bits then cleared); raises RpcError if the answer is an Error,
        or DataLoss if a compressed Response does not expand ("Compression")."""
        if call_id not in self.pending:
            raise KeyError("call %d is not pending" % call_id)
        try:
            while call_id not in self.replies:
                self.read_one()
        except GoAwayError as g:  # closed after GoAway, our call unanswered
            self.pending.discard(call_id)
            raise RpcError(UNAVAILABLE, "closed after GoAway: " + g.message,
                           unprocessed=after(call_id, g.last_call_id)) from g
        f = self.replies.pop(call_id)
        self.pending.discard(call_id)
        if f.kind == ERROR:
            code, msg = parse_error(f.payload)
            raise RpcError(code, msg, bool(f.flags & FLAG_UNPROCESSED))
        try:
            return expand(f)
        except OverflowError as e:  # the call ran; its reply is over the limit
            raise RpcError(RESOURCE_EXHAUSTED, "response %s" % e) from e
        except ValueError as e:  # "A Response that does not expand fails its call"
            raise RpcError(DATA_LOSS, "response does not expand: %s" % e) from e

    def call(self, route: str, payload: bytes = b"", codec: int = CODEC_RAW,
             metadata: Optional[Metadata] = None, deadline_ms: int = 0) -> bytes:
        return self.wait(self.send_request(route, payload, codec, metadata, deadline_ms)).payload

    def call_json(self, route: str, arg=None, **kw):
        """A JSON call; arg None sends an empty payload ("no argument")."""
        body = b"" if arg is None else json.dumps(arg).encode("utf-8")
        out = self.call(route, body, CODEC_JSON, **kw)
        return json.loads(out) if out else None

    def ping(self, payload: bytes = b"") -> bytes:
        """Send Ping (0 to 64 bytes) and return the Pong's payload."""
        if len(payload) > MAX_PING:
            raise ValueError("Ping payload over 64 bytes")
        self.send_raw(encode_frame(PING, 0, payload=payload))
        while not self.pongs:
            self.read_one()
        return self.pongs.popleft()


class Subscription:
    """One subscription of this client. Messages for it are kept in order in
    `messages`, their payloads expanded; `dropped` counts the compressed ones that did
    not expand within the frame limit ("Edge cases a receiver meets"); `ended` is the
    (code, message) of the server's Unsubscribe, once the server ended or refused it."""

    def __init__(self, client: Client, sid: int, pattern: str,
                 compression: Sequence[str] = ()):
        self.client, self.sid, self.pattern = client, sid, pattern
        self.compressions = tuple(compression)  # what its Subscribe named
        self.messages: deque = deque()          # Frames, payload expanded, flags cleared
        self.received = self.gzip_in = self.dropped = 0
        self.wire_in = 0                        # Message payload bytes as on the wire
        self.ended: Optional[Tuple[Optional[int], str]] = None

    @property
    def live(self) -> bool:
        return self.client.subs.get(self.sid) is self

    def on_message(self, f: Frame) -> None:
        """A subscriber expands a compressed Message within its frame limit; one that
        does not expand (not valid data, empty, or a compression this client cannot
        do), or expands past that, is lost: dropped and counted ("Compression")."""
        self.received += 1
        self.wire_in += len(f.payload)
        if f.flags & COMPRESSION_MASK:
            if f.flags & COMPRESSION_MASK == FLAG_GZIP:
                self.gzip_in += 1
            try:
                f = expand(f)
            except (ValueError, OverflowError):
                self.dropped += 1
                return
        self.messages.append(f)

    def _fail(self) -> None:
        code, msg = self.ended
        raise RpcError(UNAVAILABLE if code is None else code,
                       msg or "subscription ended by the server")

    def confirm(self) -> None:
        """Return once the subscription is live (a Request after it was answered);
        raise RpcError if the server refused it or ended it."""
        self.client.sync()
        if self.ended is not None:
            self._fail()

    def next(self) -> Frame:
        """The next Message (in the order received), reading frames until one comes;
        raises RpcError once the server ended the subscription and none is left, and
        socket.timeout when none comes within the client's timeout."""
        while not self.messages:
            if self.ended is not None:
                self._fail()
            if not self.live:
                raise KeyError("subscription %d was unsubscribed" % self.sid)
            self.client.read_one()
        return self.messages.popleft()


class Stream:
    """One stream this client opened. Data received is kept whole (read()), and
    credit for it is granted back as it arrives, a quarter window at a time.
    Flow control counts the stream's bytes as expanded: a compressed StreamData
    counts the length it expands to, both ways ("Compression", "Streams")."""

    CHUNK = 32 * 1024  # StreamData payload this client sends at most (before compression)

    def __init__(self, client: Client, sid: int, window: int,
                 compression: Sequence[str] = ()):
        self.client, self.sid, self.window = client, sid, window
        self.credit = 0              # bytes we may send: none before the first StreamCredit
        self.granted = window        # bytes the server may still send us (expanded)
        self.unacked = 0             # bytes received and not yet granted back
        self.data = bytearray()
        self.ended = False           # the server's StreamEnd arrived
        self.reset: Optional[Tuple[int, str, bool]] = None  # the final StreamReset
        self.compressions = tuple(compression)  # what this end named in its StreamOpen
        self.first_credit: Optional[Frame] = None  # the server's first StreamCredit
        self.peer_compressions: List[str] = []  # what that StreamCredit names, in its order
        self.compression = 0         # flag bits our StreamData goes with; 0: none
        # StreamData frames, and how many of them were gzipped, each way.
        self.frames_in = self.gzip_frames_in = self.frames_out = self.gzip_frames_out = 0
        self.wire_in = self.wire_out = 0  # StreamData payload bytes as on the wire

    def _expand(self, f: Frame) -> Optional[bytes]:
        """A StreamData's bytes, expanded if it came compressed. Its expanded length
        may not pass the credit granted, nor the frame limit less the header (and its
        metadata: the limit applies to the frame as if uncompressed): past either it
        is a protocol error. One that does not expand (not valid data, empty, or a
        compression this client cannot do) finishes the stream: StreamReset
        InvalidArgument, and this end fails with the same error; returns None."""
        comp = f.flags & COMPRESSION_MASK
        if not comp:
            return f.payload
        room = MAX_FRAME - HEADER.size - len(encode_metadata(f.metadata))
        try:
            if comp != FLAG_GZIP:
                raise ValueError("compression 0x%02x not supported" % comp)
            return gunzip(f.payload, min(self.granted, room))
        except OverflowError as e:
            raise ProtocolError("compressed StreamData %s: past the %s" % (
                e, "window granted" if self.granted <= room else "frame limit")) from e
        except ValueError as e:
            msg = "stream data does not expand: %s" % e
            self.client.send_raw(encode_frame(STREAM_RESET, self.sid, payload=struct.pack(
                ">H", INVALID_ARGUMENT) + msg.encode("utf-8")))
            self.reset = (INVALID_ARGUMENT, msg, False)
            del self.client.streams[self.sid]  # finished for us: the id is free
            return None

    def on_frame(self, f: Frame) -> None:
        if f.kind == STREAM_DATA:
            self.frames_in += 1
            self.wire_in += len(f.payload)
            if f.flags & COMPRESSION_MASK:
                self.gzip_frames_in += 1
            elif len(f.payload) > self.granted:
                raise ProtocolError("server sent past the window")
            data = self._expand(f)
            if data is None:
                return
            self.granted -= len(data)
            self.data += data
            self.unacked += len(data)
            if self.unacked >= self.window // 4 and not self.ended:
                self.client.send_raw(encode_frame(STREAM_CREDIT, self.sid,
                                                  payload=struct.pack(">I", self.unacked)))
                self.granted, self.unacked = self.granted + self.unacked, 0
        elif f.kind == STREAM_CREDIT:
            (n,) = struct.unpack(">I", f.payload)
            self.credit += n
            if self.first_credit is None:
                # The acceptor's list, in its first StreamCredit only; without the
                # key it takes none. Our data goes in the first compression of its
                # list that this end named (and can send).
                self.first_credit = f
                if self.compressions:
                    self.peer_compressions = parse_compressions(
                        first_value(f.metadata, MD_COMPRESSION))
                    ours = [COMPRESSIONS[n] for n in self.peer_compressions
                            if n in self.compressions]
                    self.compression = ours[0] if ours else 0
        elif f.kind == STREAM_END:
            self.ended = True
        elif f.kind == STREAM_RESET:
            code, msg = parse_error(f.payload)
            self.reset = (code, msg, bool(f.flags & FLAG_UNPROCESSED))
            del self.client.streams[self.sid]  # finished: the id is free

    def _fail(self) -> None:
        code, msg, unprocessed = self.reset
        if code:
            raise RpcError(code, msg, unprocessed)

    def data_frame(self, chunk: bytes) -> bytes:
        """A StreamData of chunk, gzipped when the server named gzip and it is 1 KiB
        or more and shrinks so; it counts len(chunk) against the credit either way."""
        flags, packed = 0, None
        if self.compression == FLAG_GZIP:
            packed = gzip_payload(chunk)
        if packed is not None:
            flags, chunk = FLAG_GZIP, packed
            self.gzip_frames_out += 1
        self.frames_out += 1
        self.wire_out += len(chunk)
        return encode_frame(STREAM_DATA, self.sid, payload=chunk, flags=flags)

    def write(self, data: bytes) -> None:
        """Send data in StreamData frames, never past the credit granted (counted by
        the bytes before compression)."""
        view = memoryview(data)
        while view:
            while self.credit == 0 and self.reset is None:
                self.client.read_one()
            if self.reset is not None:
                self._fail()
                raise EOFError("the handler returned before reading everything")
            n = min(len(view), self.credit, self.CHUNK)
            self.client.send_raw(self.data_frame(bytes(view[:n])))
            self.credit -= n
            view = view[n:]

    def close_send(self) -> None:
        self.client.send_raw(encode_frame(STREAM_END, self.sid))

    def read(self) -> bytes:
        """Everything the server sends, to its StreamEnd and final StreamReset;
        raises RpcError if that reset carries a code."""
        while self.reset is None:
            self.client.read_one()
        self._fail()
        return bytes(self.data)

    def cancel(self) -> None:
        if self.reset is None:
            self.client.send_raw(encode_frame(STREAM_RESET, self.sid,
                                              payload=struct.pack(">H", 1) + b"canceled"))
            self.client.streams.pop(self.sid, None)
            self.reset = (1, "canceled", False)
