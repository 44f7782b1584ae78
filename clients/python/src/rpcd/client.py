"""The connection: calls, one-way calls, the handshake, calls from the server, publish and
subscribe, and streams, multiplexed on one TCP (or TLS, or Unix socket) connection with one
reader task (docs/protocol.md)."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import ssl as _ssl
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Mapping, NamedTuple, Optional, Set, Tuple, Union

from . import serving
from .errors import Code, ProtocolError, RpcError, code_name
from .protocol import (COMPRESS_MIN, COMPRESSION_MASK, COMPRESSIONS, DEFAULT_LIMITS, HEADER_SIZE, MAX_HELLO,
                       MAX_PING, MD_AUTH_METHOD, MD_COMPRESSION, Codec, ExpandError, ExpandOverflow, Frame,
                       FrameError, Kind, Limits, Metadata, after, kind_name, metadata_pairs, check_header, decode_body, encode_frame, encode_metadata,
                       error_body, expand, first_value, goaway_body, gzip_payload, parse_compressions,
                       parse_error, parse_goaway, topic_error)
from .pubsub import Message, Subscription
from .serving import Handler, ServerCall
from .stream import Stream

log = logging.getLogger("rpcd")

_NO_ARG = object()
_SYNC_ROUTE = "Sys/Ping"  # what flush() calls: any answer will do, as rpcd's Go client does
_LINGER_SECONDS, _LINGER_BYTES = 2.0, 4 * 1024 * 1024


def _frame(*args: Any, **kw: Any) -> bytes:
    """encode_frame for a frame the application asked for: one the page does not allow raises
    RpcError with the code the page gives it (InvalidArgument, ResourceExhausted), marked
    unprocessed, as every refusal of this client's own."""
    try:
        return encode_frame(*args, **kw)
    except FrameError as e:
        raise RpcError(e.code, str(e).replace("rpcd: ", "", 1), True) from None


class GoAway(NamedTuple):
    """A GoAway the server sent: the greatest id of this client's calls it took in and will
    answer, its code and its message."""

    last_call_id: int
    code: int
    message: str


class _Pending:
    __slots__ = ("fut", "route", "timer")

    def __init__(self, fut: "asyncio.Future[Frame]", route: str):
        self.fut, self.route = fut, route
        self.timer: Optional[asyncio.TimerHandle] = None


def _parse_address(address: str) -> Tuple[str, str, int]:
    """("unix", path, 0) or ("tcp", host, port) of "host:port", "[v6]:port" or "unix:///path"."""
    if address.startswith("unix://"):
        return ("unix", address[len("unix://"):], 0)
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError("rpcd: address %r is not host:port or unix:///path" % address)
    return ("tcp", host.strip("[]") or "127.0.0.1", int(port))


async def connect(address: str = "127.0.0.1:7070", *, token: Union[str, bytes, None] = None,
                  auth_method: Optional[str] = None, compression: Optional[str] = None, hello: bool = False,
                  ssl: Optional[_ssl.SSLContext] = None, server_hostname: Optional[str] = None,
                  handlers: Optional[Mapping[str, Handler]] = None,
                  on_publish_refused: Optional[Callable[[RpcError], None]] = None,
                  limits: Limits = DEFAULT_LIMITS, compress_min: int = COMPRESS_MIN,
                  timeout: Optional[float] = 10.0) -> "Client":
    """Open a connection to an rpcd server and, when asked for, do the handshake.

    address is "host:port", "[::1]:port" or "unix:///path". With ssl (an ssl.SSLContext) the
    connection speaks TLS. A Hello is sent when token, compression or hello is given; connect
    then waits for the Welcome, and raises RpcError Unauthenticated, unprocessed, when the server
    refuses the credentials (its GoAway's code and message). token is the credential (a token from the
    server's -auth-tokens file, or one rpcd token signed); auth_method, when given, names the
    method ("token", "hmac") under rpcd-auth-method; without it the server tries what it has.
    compression "gzip" asks for compressed payloads of 1 KiB or more both ways; "zstd" is
    refused, since Python's standard library has no Zstandard. handlers are routes the server
    may call (see Client.handle), registered before the Hello. timeout bounds the connect and
    the handshake: past it, RpcError DeadlineExceeded."""
    names: List[str] = []
    if compression is not None:
        if compression not in COMPRESSIONS:
            raise ValueError("rpcd: compression %r: this client does gzip only (Python's standard library "
                             "has no Zstandard)" % compression)
        names = [compression]
    addr = _parse_address(address)

    async def dial() -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if addr[0] == "unix":
            return await asyncio.open_unix_connection(addr[1], ssl=ssl, server_hostname=server_hostname)
        return await asyncio.open_connection(addr[1], addr[2], ssl=ssl, server_hostname=server_hostname)

    try:
        reader, writer = await asyncio.wait_for(dial(), timeout)
    except asyncio.TimeoutError:
        raise RpcError(Code.DEADLINE_EXCEEDED, "no connection within %s s" % timeout, True) from None
    c = Client(reader, writer, names, limits, compress_min, on_publish_refused)
    for route, fn in (handlers or {}).items():
        c.handle(route, fn)
    if token is not None or names or hello:
        try:
            await asyncio.wait_for(c._hello(token, auth_method), timeout)
        except asyncio.TimeoutError:
            await c.close()
            raise RpcError(Code.DEADLINE_EXCEEDED, "no Welcome within %s s" % timeout) from None
        except BaseException:
            await c.close()
            raise
    return c


class Client:
    """One connection to an rpcd server. Made by connect(); every method is called from the
    event loop's thread. Many tasks may call at once: calls are matched to their replies by
    call id, and one reader task reads the connection for all of them, serves the server's
    calls, and files Messages and stream data."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, compressions: List[str],
                 limits: Limits, compress_min: int, on_publish_refused: Optional[Callable[[RpcError], None]]):
        self._loop = asyncio.get_running_loop()
        self._reader, self._writer = reader, writer
        self._limits = limits
        self._compressions = compressions     # what this client names, in its Hello and elsewhere
        self._compress_min = compress_min
        self._send_flag = 0                   # the compression its calls go in, once the Welcome names it
        self.identity: Optional[str] = None   # what the Welcome says the server knows it by
        self.server_compressions: List[str] = []  # what the Welcome names
        self.goaway: Optional[GoAway] = None
        self._closed: Optional[RpcError] = None   # why the connection is done, once it is
        self._end_code: int = Code.UNAVAILABLE     # the code what is refused after that fails with
        self._pending: Dict[int, _Pending] = {}
        self._next_id = 1
        self._pongs: "Deque[asyncio.Future[bytes]]" = deque()
        self._welcome: "Optional[asyncio.Future[Frame]]" = None
        self._routes: Dict[str, Handler] = {}
        self._serving: "Dict[int, asyncio.Task[None]]" = {}  # the server's Requests being served
        self._oneways: "Set[asyncio.Task[None]]" = set()
        self._last_served = 0                 # the greatest id of the server's calls taken in
        self._subs: Dict[int, Subscription] = {}
        self._next_sub = 1
        self._streams: Dict[int, Stream] = {}
        self._next_stream = 1
        self._on_publish_refused = on_publish_refused
        self.refused_publishes = 0            # the server's refusals of this client's Publishes
        self.dropped_messages = 0             # Messages for no live subscription
        self._drain_lock = asyncio.Lock()
        self._high_water = writer.transport.get_write_buffer_limits()[1]
        self._reader_task = self._loop.create_task(self._read_loop())

    # --- the handshake ------------------------------------------------------------------

    async def _hello(self, token: Union[str, bytes, None], method: Optional[str]) -> None:
        cred = token.encode("utf-8") if isinstance(token, str) else bytes(token or b"")
        if len(cred) > MAX_HELLO:
            raise RpcError(Code.INVALID_ARGUMENT, "credentials of %d bytes, over the Hello's 4,096" % len(cred), True)
        md = []
        if method:
            md.append((MD_AUTH_METHOD, method))
        if self._compressions:
            md.append((MD_COMPRESSION, ",".join(self._compressions)))
        self._welcome = self._loop.create_future()
        self._write_nowait(encode_frame(Kind.HELLO, 0, payload=cred, metadata=md))
        f = await self._welcome
        self.identity = f.payload.decode("utf-8", "replace")
        # A Welcome without the key: the server takes none. Calls go in the first
        # compression of the server's list that this client named.
        self.server_compressions = parse_compressions(first_value(f.metadata, MD_COMPRESSION))
        ours = [COMPRESSIONS[n] for n in self.server_compressions if n in self._compressions]
        self._send_flag = ours[0] if ours else 0

    @property
    def compression(self) -> Optional[str]:
        """The compression this client's calls travel in, settled by the handshake; None."""
        return next((n for n, f in COMPRESSIONS.items() if f == self._send_flag), None)

    # --- writing ------------------------------------------------------------------------

    def _write_nowait(self, data: bytes) -> None:
        """Queue one whole frame: frames never interleave, since each is one write."""
        if self._closed is None:
            self._writer.write(data)

    async def _drain(self, deadline: Optional[float] = None) -> None:
        """Wait, when the server reads slowly, until the output has room again (TCP holds a
        fast sender back); until deadline at most. The reader task reads meanwhile."""
        if self._closed is not None or self._writer.transport.get_write_buffer_size() <= self._high_water:
            return
        async with self._drain_lock:
            try:
                if deadline is None:
                    await self._writer.drain()
                else:
                    await asyncio.wait_for(self._writer.drain(), max(deadline - self._loop.time(), 0))
            except (ConnectionError, asyncio.TimeoutError):
                pass  # the reader task fails the calls of a lost connection; a timer, a late one

    def _refuse_new(self, what: str) -> None:
        """Raise when nothing new may start: closed, or after the server's GoAway."""
        if self._closed is not None:
            raise RpcError(self._end_code, "%s; %s not sent" % (self._closed.message, what), True)
        if self.goaway is not None:
            raise RpcError(Code.UNAVAILABLE, "the server sent GoAway (%s); %s not sent"
                           % (self.goaway.message, what), True)

    def _deadline_ms(self, route: str, timeout: Optional[float]) -> Tuple[Optional[float], int]:
        """(loop deadline, the frame's milliseconds, rounded up) of a timeout in seconds."""
        if timeout is None:
            return None, 0
        if timeout <= 0:
            raise RpcError(Code.DEADLINE_EXCEEDED, "deadline passed before %s was sent" % route, True)
        return self._loop.time() + timeout, min(math.ceil(timeout * 1000), 0xFFFFFFFF)

    def _call_frame(self, kind: Kind, cid: int, route: str, payload: bytes, codec: int,
                    metadata: Metadata, ms: int) -> bytes:
        """A Request or OneWay, its payload gzipped once the Welcome named gzip when it is
        1 KiB or more and shrinks. The frame as it would be uncompressed must fit the limit."""
        if not route:
            raise RpcError(Code.INVALID_ARGUMENT, "empty route", True)
        payload = bytes(payload)
        frame = _frame(kind, cid, route, payload, codec, 0, ms, metadata, self._limits)
        if self._send_flag:
            packed = gzip_payload(payload, self._compress_min)
            if packed is not None:
                frame = _frame(kind, cid, route, packed, codec, self._send_flag, ms, metadata, self._limits)
        return frame

    def _new_id(self) -> int:
        """Count up from 1, wrap 0xFFFFFFFF to 1, skip ids still waiting for a reply."""
        while True:
            cid = self._next_id
            self._next_id = cid % 0xFFFFFFFF + 1
            if cid not in self._pending:
                return cid

    # --- calls --------------------------------------------------------------------------

    async def call(self, route: str, payload: bytes = b"", *, codec: int = Codec.RAW,
                   metadata: Metadata = None, timeout: Optional[float] = None) -> bytes:
        """Call route with payload (labelled codec) and return the reply's payload.

        timeout, in seconds, travels as the call's deadline (whole milliseconds, rounded up)
        and is enforced here too: when it passes, the call stops waiting, a Cancel is sent,
        and RpcError DeadlineExceeded is raised. Cancelling the task that awaits the call sends
        a Cancel as well. An Error from the server is raised as RpcError with its code,
        message and Unprocessed flag; a call that never left (closed, after a GoAway, a
        deadline already passed) raises RpcError marked unprocessed."""
        return (await self._roundtrip(route, payload, codec, metadata, timeout)).payload

    async def call_json(self, route: str, arg: Any = _NO_ARG, *, metadata: Metadata = None,
                        timeout: Optional[float] = None) -> Any:
        """Call a JSON route with arg encoded as JSON (no arg: an empty payload, "no argument")
        and return the reply decoded; None for an empty reply."""
        body = b"" if arg is _NO_ARG else json.dumps(arg, separators=(",", ":")).encode("utf-8")
        out = await self.call(route, body, codec=Codec.JSON, metadata=metadata, timeout=timeout)
        try:
            return json.loads(out) if out else None
        except ValueError as e:
            raise RpcError(Code.INTERNAL, "reply of %s is not JSON: %s" % (route, e)) from None

    async def _roundtrip(self, route: str, payload: bytes, codec: int, metadata: Metadata,
                         timeout: Optional[float]) -> Frame:
        self._refuse_new("call to " + route)
        deadline, ms = self._deadline_ms(route, timeout)
        cid = self._new_id()
        frame = self._call_frame(Kind.REQUEST, cid, route, payload, codec, metadata, ms)
        p = _Pending(self._loop.create_future(), route)
        self._pending[cid] = p
        self._writer.write(frame)
        if deadline is not None:
            p.timer = self._loop.call_at(deadline, self._expire, cid)
        try:
            await self._drain(deadline)
            return await p.fut
        except asyncio.CancelledError:
            self._abandon(cid, p)
            raise

    def _abandon(self, cid: int, p: _Pending) -> None:
        """Stop waiting for call cid and send its Cancel; an answer that crosses it is dropped."""
        if self._pending.get(cid) is p:
            del self._pending[cid]
            if p.timer is not None:
                p.timer.cancel()
            self._write_nowait(encode_frame(Kind.CANCEL, cid))

    def _expire(self, cid: int) -> None:
        p = self._pending.get(cid)
        if p is not None:
            self._abandon(cid, p)
            if not p.fut.done():
                p.fut.set_exception(RpcError(Code.DEADLINE_EXCEEDED, "deadline passed waiting for " + p.route))

    async def notify(self, route: str, payload: bytes = b"", *, codec: int = Codec.RAW,
                     metadata: Metadata = None, timeout: Optional[float] = None) -> None:
        """A one-way call: no Response and no Error ever come, even for an unknown route.
        Returns once it is written. timeout travels as the deadline of its handler."""
        self._refuse_new("one-way call to " + route)
        deadline, ms = self._deadline_ms(route, timeout)
        self._writer.write(self._call_frame(Kind.ONEWAY, self._new_id(), route, payload, codec, metadata, ms))
        await self._drain(deadline)

    async def notify_json(self, route: str, arg: Any = _NO_ARG, *, metadata: Metadata = None,
                          timeout: Optional[float] = None) -> None:
        """notify with arg encoded as JSON."""
        body = b"" if arg is _NO_ARG else json.dumps(arg, separators=(",", ":")).encode("utf-8")
        await self.notify(route, body, codec=Codec.JSON, metadata=metadata, timeout=timeout)

    async def ping(self, payload: bytes = b"", timeout: Optional[float] = None) -> bytes:
        """Send a Ping (0 to 64 bytes) and return its Pong's payload."""
        if len(payload) > MAX_PING:
            raise RpcError(Code.INVALID_ARGUMENT, "Ping payload of %d bytes, over 64" % len(payload), True)
        self._refuse_new("Ping")
        fut: "asyncio.Future[bytes]" = self._loop.create_future()
        self._pongs.append(fut)
        self._write_nowait(encode_frame(Kind.PING, 0, payload=bytes(payload)))
        return await asyncio.wait_for(asyncio.shield(fut), timeout) if timeout is not None else await fut

    # --- calls from the server ----------------------------------------------------------

    def handle(self, route: str, fn: Optional[Handler]) -> None:
        """Serve route to the server. fn(call: ServerCall) returns the Response's payload
        (bytes, or None for an empty one), or an awaitable of it; the Response carries the
        Request's codec. Raising RpcError answers an Error with its code, message and
        Unprocessed flag; any other exception answers Internal (an uncaught exception). Each
        call runs in a task of its own, within the call's deadline (past it: Error
        DeadlineExceeded), and a Cancel from the server cancels the task (no answer is
        sent). A OneWay (a push) runs the same way and is never answered; its failures are
        logged. fn None stops serving route; a route not served is answered NotFound,
        Unprocessed."""
        if fn is None:
            self._routes.pop(route, None)
            return
        r = route.encode("ascii")
        if not 1 <= len(r) <= self._limits.max_route or not all(0x21 <= b <= 0x7E for b in r):
            raise RpcError(Code.INVALID_ARGUMENT, "bad route %r" % route, True)
        self._routes[route] = fn

    def handle_json(self, route: str, fn: Callable[[Any], Any]) -> None:
        """Serve a JSON route: fn(arg) takes the decoded argument (None for an empty payload)
        and returns the reply's value (or an awaitable of it), encoded as JSON. Arguments in
        another codec, or that do not decode, are answered InvalidArgument, Unprocessed."""
        self.handle(route, serving.json_handler(route, fn))

    def _on_call(self, f: Frame) -> None:
        oneway = f.kind == Kind.ONEWAY
        if after(f.call_id, self._last_served) or self._last_served == 0:
            self._last_served = f.call_id

        def refuse(code: int, msg: str) -> None:
            if oneway:
                log.warning("rpcd: one-way call %s from the server failed: %s", f.route, msg)
            else:
                self._write_nowait(encode_frame(Kind.ERROR, f.call_id, payload=error_body(code, msg), flags=1))

        if not oneway and f.call_id in self._serving:
            return refuse(Code.INVALID_ARGUMENT, "call id %d still in flight" % f.call_id)
        fn = self._routes.get(f.route)
        if fn is None:  # refused as such before its payload is looked at
            return refuse(Code.NOT_FOUND, "no route %s on this client" % f.route)
        room = self._limits.max_frame - HEADER_SIZE - len(f.route) - len(encode_metadata(f.metadata))
        try:
            payload = expand(f.flags, f.payload, room)
        except ExpandOverflow as e:
            return refuse(Code.RESOURCE_EXHAUSTED, "payload %s" % e)
        except ExpandError as e:
            return refuse(Code.INVALID_ARGUMENT, "payload does not expand: %s" % e)
        call = ServerCall(f.route, payload, f.codec, f.metadata, f.call_id, oneway, f.deadline_ms, self._loop.time())
        task = self._loop.create_task(self._serve(fn, call))
        if oneway:
            self._oneways.add(task)
            task.add_done_callback(self._oneways.discard)
        else:
            self._serving[f.call_id] = task

    async def _serve(self, fn: Handler, call: ServerCall) -> None:
        try:
            out = await serving.run_handler(fn, call, self._loop)
        except asyncio.CancelledError:
            raise  # the server's Cancel, or close(): the callee may skip the reply
        except Exception as e:
            err = serving.failure(call.route, e)
            if call.oneway:
                log.warning("rpcd: one-way call %s from the server failed: %s", call.route, err)
            else:
                self._answer(call, encode_frame(Kind.ERROR, call.call_id, payload=error_body(
                    err.code, err.message), flags=1 if err.unprocessed else 0))
            return
        if call.oneway:
            return
        if HEADER_SIZE + len(out) > self._limits.max_frame:
            frame = encode_frame(Kind.ERROR, call.call_id, payload=error_body(
                Code.RESOURCE_EXHAUSTED, "reply of %d bytes over the frame limit" % len(out)))
        else:
            # rpcd's client does not compress its answers to the server's calls; nor does this one.
            frame = encode_frame(Kind.RESPONSE, call.call_id, payload=out, codec=call.codec, limits=self._limits)
        self._answer(call, frame)
        await self._drain()

    def _answer(self, call: ServerCall, frame: bytes) -> None:
        if self._serving.get(call.call_id) is asyncio.current_task():
            del self._serving[call.call_id]
            self._write_nowait(frame)

    # --- publish and subscribe ----------------------------------------------------------

    async def subscribe(self, pattern: str, *, queue: int = 1024, timeout: Optional[float] = None) -> Subscription:
        """Subscribe to pattern (NATS-style: '*' one token, a final '>' one or more) and return
        the Subscription, an async iterator of its Messages, once the server has taken it in
        (a call sent after it was answered: frames are taken in order). Raises RpcError when
        the server refuses it: PermissionDenied or Unauthenticated (topic permissions),
        ResourceExhausted (too many subscriptions). With compression, its Subscribe names it,
        and Messages may come compressed."""
        why = topic_error(pattern, pattern=True)
        if why:
            raise RpcError(Code.INVALID_ARGUMENT, "bad pattern: %s" % why, True)
        self._refuse_new("subscription to " + pattern)
        while self._next_sub in self._subs:
            self._next_sub = self._next_sub % 0xFFFFFFFF + 1
        sid = self._next_sub
        self._next_sub = sid % 0xFFFFFFFF + 1
        sub = Subscription(self, sid, pattern, queue)
        self._subs[sid] = sub
        md = [(MD_COMPRESSION, ",".join(self._compressions))] if self._compressions else None
        self._write_nowait(_frame(Kind.SUBSCRIBE, sid, pattern, metadata=md, limits=self._limits))
        try:
            await self.flush(timeout)
        except BaseException:
            self._subs.pop(sid, None)
            sub._end(None)
            raise
        if sub.error is not None:
            raise sub.error
        sub._taken = True
        return sub

    async def _unsubscribe(self, sid: int) -> None:
        if self._subs.pop(sid, None) is not None:
            self._write_nowait(encode_frame(Kind.UNSUBSCRIBE, sid))
            await self._drain()

    async def publish(self, topic: str, payload: bytes = b"", *, codec: int = Codec.RAW) -> None:
        """Publish payload to topic; returns once it is written. Delivery is at most once, to
        the subscriptions live when the server reads it, this client's included. A server with
        topic permissions may refuse it: nothing is delivered, and the refusal (RpcError
        PermissionDenied or Unauthenticated, Unprocessed, naming the topic) comes later, to
        connect's on_publish_refused and the count refused_publishes; flush() waits for it."""
        why = topic_error(topic)
        if why:
            raise RpcError(Code.INVALID_ARGUMENT, "bad topic: %s" % why, True)
        self._refuse_new("publish to " + topic)
        self._write_nowait(_frame(Kind.PUBLISH, 0, topic, bytes(payload), codec, limits=self._limits))
        await self._drain()

    async def publish_json(self, topic: str, value: Any) -> None:
        """publish with value encoded as JSON."""
        await self.publish(topic, json.dumps(value, separators=(",", ":")).encode("utf-8"), codec=Codec.JSON)

    async def flush(self, timeout: Optional[float] = None) -> None:
        """Return once the server has acted on every frame this client wrote before: each
        Publish delivered or refused (and its refusal counted), each Subscribe and Unsubscribe
        in place. It costs a call's round trip (to Sys/Ping; any answer will do)."""
        try:
            await self._roundtrip(_SYNC_ROUTE, b"", Codec.JSON, None, timeout)
        except RpcError as e:
            if e.code in (Code.UNAVAILABLE, Code.DEADLINE_EXCEEDED):
                raise

    # --- streams ------------------------------------------------------------------------

    def open_stream(self, route: str, *, window: int = 256 * 1024, metadata: Metadata = None,
                    codec: int = Codec.RAW, timeout: Optional[float] = None) -> Stream:
        """Open a stream to a stream route of the server: send its StreamOpen, granting the
        server window bytes, and return the Stream at once (a refusal, NotFound and the like,
        comes to its first read or write). timeout bounds the whole stream (its deadline): past
        it the stream is reset with DeadlineExceeded. With compression, the StreamOpen names
        it, and the data may travel compressed in the compression the server's first
        StreamCredit names. The Stream is an async context manager: leaving the block closes
        it (close()), or cancels it on an exception."""
        if not 1 <= window <= 2**31 - 1:
            raise RpcError(Code.INVALID_ARGUMENT, "window %d, want 1 to 2^31-1" % window, True)
        self._refuse_new("stream to " + route)
        deadline, ms = self._deadline_ms(route, timeout)
        while self._next_stream in self._streams:
            self._next_stream = (self._next_stream + 2) % 0x100000000
        sid = self._next_stream
        self._next_stream = (sid + 2) % 0x100000000  # odd ids: the client's; never 0
        md = metadata_pairs(metadata)
        if self._compressions:  # the first entry: a reader takes a key's first value
            md.insert(0, (MD_COMPRESSION, ",".join(self._compressions).encode("ascii")))
        frame = _frame(Kind.STREAM_OPEN, sid, route, window.to_bytes(4, "big"), codec,
                             deadline_ms=ms, metadata=md, limits=self._limits)
        st = Stream(self, sid, route, window, self._compressions, deadline)
        self._streams[sid] = st
        self._writer.write(frame)
        return st

    # --- reading --------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        why: Optional[RpcError] = None
        try:
            while True:
                head = await self._reader.readexactly(HEADER_SIZE)
                h = check_header(head, self._limits)  # before the rest is read
                body = await self._reader.readexactly(h.body_len) if h.body_len else b""
                self._dispatch(decode_body(h, body))
        except asyncio.IncompleteReadError as e:
            if e.partial:
                why = RpcError(Code.UNAVAILABLE, "connection closed inside a frame")
            else:
                why = RpcError(Code.UNAVAILABLE, "connection closed by the server")
        except ProtocolError as e:
            why = RpcError(Code.UNAVAILABLE, "protocol error from the server: %s" % e)
            log.warning("rpcd: %s", why.message)
            self._write_nowait(encode_frame(Kind.GOAWAY, payload=goaway_body(self._last_served, Code.INTERNAL, str(e))))
            self._finish(why)
            await self._linger()
            return
        except (ConnectionError, OSError) as e:
            why = RpcError(Code.UNAVAILABLE, "connection lost: %s" % e)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a bug of this package's: fail what waits rather than hang
            log.exception("rpcd: the reader task failed")
            why = RpcError(Code.INTERNAL, "the client's reader failed: %r" % e)
            self._writer.close()
        self._finish(why)

    async def _linger(self) -> None:
        """After a GoAway: shut the write side, read and discard for a while, then close, so
        that a reset does not destroy the GoAway before the server reads it."""
        try:
            if self._writer.can_write_eof():
                self._writer.write_eof()
            left, end = _LINGER_BYTES, self._loop.time() + _LINGER_SECONDS
            while left > 0 and self._loop.time() < end:
                data = await asyncio.wait_for(self._reader.read(65536), end - self._loop.time())
                if not data:
                    break
                left -= len(data)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass
        finally:
            self._writer.close()

    def _dispatch(self, f: Frame) -> None:
        k = f.kind
        if k in (Kind.RESPONSE, Kind.ERROR):
            if k == Kind.ERROR and f.call_id == 0:
                return self._publish_refused(f)
            p = self._pending.pop(f.call_id, None)
            if p is None:
                return  # late, after a Cancel or the deadline: dropped
            if p.timer is not None:
                p.timer.cancel()
            if p.fut.done():
                return
            if k == Kind.ERROR:
                code, msg = parse_error(f.payload)
                p.fut.set_exception(RpcError(code, msg, bool(f.flags & 1)))
                return
            room = self._limits.max_frame - HEADER_SIZE - len(encode_metadata(f.metadata))
            try:
                p.fut.set_result(f._replace(payload=expand(f.flags, f.payload, room), flags=f.flags & ~COMPRESSION_MASK))
            except ExpandError as e:  # "A Response that does not expand fails its call": DataLoss, it ran
                p.fut.set_exception(RpcError(Code.DATA_LOSS, "response does not expand: %s" % e))
        elif k in (Kind.REQUEST, Kind.ONEWAY):
            self._on_call(f)
        elif k == Kind.CANCEL:
            task = self._serving.pop(f.call_id, None)  # else answered, or never seen: ignored
            if task is not None:
                task.cancel()
        elif k == Kind.MESSAGE:
            self._on_message(f)
        elif k == Kind.UNSUBSCRIBE:
            sub = self._subs.pop(f.call_id, None)  # else one this client ended: ignored
            if sub is not None:
                if f.payload:  # before it was taken in, a refusal: it never was in place
                    code, msg = parse_error(f.payload)
                    sub._end(RpcError(code, msg, not sub._taken))
                else:
                    sub._end(RpcError(Code.UNKNOWN, "subscription ended by the server, no reason given", not sub._taken))
        elif Kind.STREAM_DATA <= k <= Kind.STREAM_RESET:
            if k == Kind.STREAM_RESET and f.call_id % 2 == 0 and parse_error(f.payload)[0] == 0:
                raise ProtocolError("StreamReset with code 0 from the opener of stream %d" % f.call_id)
            st = self._streams.get(f.call_id)
            if st is not None:  # else finished: in flight when it finished, dropped
                st._on_frame(f)
        elif k == Kind.STREAM_OPEN:
            if f.call_id % 2:
                raise ProtocolError("StreamOpen with odd id %d from the server" % f.call_id)
            self._write_nowait(encode_frame(Kind.STREAM_RESET, f.call_id, flags=1, payload=error_body(
                Code.NOT_FOUND, "no stream route %s on this client" % f.route)))
        elif k == Kind.PING:
            self._write_nowait(encode_frame(Kind.PONG, 0, payload=f.payload))
        elif k == Kind.PONG:
            if self._pongs:  # Pongs come in the order of the Pings: one each
                fut = self._pongs.popleft()
                if not fut.done():  # else its ping was cancelled
                    fut.set_result(f.payload)
        elif k == Kind.GOAWAY:
            self.goaway = GoAway(*parse_goaway(f.payload))
            if self._welcome is not None and not self._welcome.done():
                # The server refused the Hello: it acted on nothing this connection sent.
                self._welcome.set_exception(RpcError(self.goaway.code, self.goaway.message, True))
        elif k == Kind.WELCOME:
            if self._welcome is None or self._welcome.done():
                raise ProtocolError("Welcome without a Hello")
            self._welcome.set_result(f)
        else:  # Subscribe, Publish, Hello: the client's kinds
            raise ProtocolError("%s from the server" % kind_name(k))

    def _on_message(self, f: Frame) -> None:
        sub = self._subs.get(f.call_id)
        if sub is None:  # on the wire when it was unsubscribed
            self.dropped_messages += 1
            return
        payload = f.payload
        if f.flags & COMPRESSION_MASK:
            room = self._limits.max_frame - HEADER_SIZE - len(f.route) - len(encode_metadata(f.metadata))
            try:
                payload = expand(f.flags, payload, room)
            except ExpandError:  # lost: there is no one to answer
                sub.dropped += 1
                return
        sub._deliver(Message(f.route, payload, f.codec))

    def _publish_refused(self, f: Frame) -> None:
        code, msg = parse_error(f.payload)
        err = RpcError(code, msg, bool(f.flags & 1))
        self.refused_publishes += 1
        if self._on_publish_refused is not None:
            try:
                self._on_publish_refused(err)
            except Exception:
                log.exception("rpcd: on_publish_refused raised")
        else:
            log.info("rpcd: publish refused: %s", err)

    # --- the end ----------------------------------------------------------------------

    def _finish(self, why: Optional[RpcError]) -> None:
        """The connection is done: fail what waits on it. A call whose id comes after the
        GoAway's last call id is known unprocessed; the fate of the others is unknown."""
        if self._closed is not None:
            return
        self._closed = why or RpcError(Code.UNAVAILABLE, "connection closed")
        code: int = Code.UNAVAILABLE
        msg = self._closed.message
        if self.goaway is not None and self.goaway.code:  # the server said why
            code = self.goaway.code
            msg += " after its GoAway (%s: %s)" % (code_name(code), self.goaway.message)
        self._end_code = code
        for cid, p in list(self._pending.items()):
            if p.timer is not None:
                p.timer.cancel()
            if not p.fut.done():
                unprocessed = self.goaway is not None and after(cid, self.goaway.last_call_id)
                p.fut.set_exception(RpcError(code, "%s: no answer to %s" % (msg, p.route), unprocessed))
        self._pending.clear()
        for fut in self._pongs:
            if not fut.done():
                fut.set_exception(self._closed)
        self._pongs.clear()
        if self._welcome is not None and not self._welcome.done():
            self._welcome.set_exception(self._closed)
        for sub in list(self._subs.values()):
            sub._end(RpcError(Code.UNAVAILABLE, self._closed.message))
        self._subs.clear()
        for st in list(self._streams.values()):
            st._finish(RpcError(Code.UNAVAILABLE, self._closed.message))
        for task in list(self._serving.values()) + list(self._oneways):
            task.cancel()
        self._serving.clear()

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def close(self) -> None:
        """Close the connection. Calls still waiting fail with RpcError Unavailable, streams
        and subscriptions end, the server's calls being served are cancelled."""
        self._finish(RpcError(Code.UNAVAILABLE, "client closed"))
        self._reader_task.cancel()
        self._writer.close()
        try:
            await self._reader_task
        except (asyncio.CancelledError, Exception):
            pass
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError, _ssl.SSLError):
            pass

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
