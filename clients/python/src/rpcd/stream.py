"""Streams this client opens (docs/protocol.md, "Streams"): flow-controlled bytes both ways
beside the calls, to a stream route of the server."""

from __future__ import annotations

import asyncio
import struct
from typing import TYPE_CHECKING, Any, List, Optional

from .errors import Code, ProtocolError, RpcError
from .protocol import (COMPRESSION_MASK, COMPRESSIONS, HEADER_SIZE, MAX_WINDOW, MD_COMPRESSION,
                       ExpandError, ExpandOverflow, Frame, Kind, encode_metadata, encode_frame, error_body,
                       expand, first_value, gzip_payload, parse_compressions, parse_error)

if TYPE_CHECKING:
    from .client import Client

CHUNK = 32 * 1024  # the stream bytes this client puts in one StreamData, at most, as rpcd does


class Stream:
    """One stream this client opened: odd id, the client the opener, the server's handler the
    acceptor, which decides the outcome.

    Flow control: this end grants the server `window` bytes in its StreamOpen and grants back
    what the application has read (once a quarter of the window has been read, or a
    sixteenth when nothing is left unread, as rpcd does), so it never holds more than one
    window of unread bytes; write() never sends past the credit the server granted, and waits
    for more. Both count the stream's bytes as expanded when they travel compressed."""

    def __init__(self, client: "Client", sid: int, route: str, window: int, names: List[str],
                 deadline: Optional[float]):
        self._client = client
        self.id = sid
        self.route = route
        self.window = window
        self._names = names              # what this end named in its StreamOpen
        self._granted = window           # bytes the server may still send, not yet arrived
        self._unacked = 0                # bytes the application read, not yet granted back
        self._buf = bytearray()
        self._credit = 0                 # bytes this end may send: none before the first StreamCredit
        self.accepted = False            # the server's first StreamCredit arrived
        self.server_compressions: List[str] = []  # what that StreamCredit named
        self._send_flag = 0              # the compression this end's StreamData goes in
        self._recv_ended = False         # the server's StreamEnd arrived
        self._send_ended = False         # this end's StreamEnd was sent
        self._finished = False           # a StreamReset was sent or received, or the connection lost
        self._error: Optional[RpcError] = None  # why it finished, when not with code 0
        self._changed = asyncio.Event()
        self._done = asyncio.get_running_loop().create_future()  # set when finished
        self._timer = None
        if deadline is not None:
            self._timer = asyncio.get_running_loop().call_at(deadline, self._expire)

    # --- the reader task's side --------------------------------------------------------

    def _on_frame(self, f: Frame) -> None:
        if f.kind == Kind.STREAM_DATA:
            self._on_data(f)
        elif f.kind == Kind.STREAM_CREDIT:
            (n,) = struct.unpack(">I", f.payload)
            if self._credit + n > MAX_WINDOW:
                raise ProtocolError("StreamCredit lifts stream %d's credit past 2^31-1" % self.id)
            self._credit += n
            if not self.accepted:
                # The acceptor's list counts on its first StreamCredit only; without the key
                # it takes none. This end sends in the first of that list that it named.
                self.accepted = True
                if self._names:
                    self.server_compressions = parse_compressions(first_value(f.metadata, MD_COMPRESSION))
                    ours = [COMPRESSIONS[n] for n in self.server_compressions if n in self._names]
                    self._send_flag = ours[0] if ours else 0
        elif f.kind == Kind.STREAM_END:
            if self._recv_ended:
                raise ProtocolError("StreamEnd after StreamEnd on stream %d" % self.id)
            self._recv_ended = True
        elif f.kind == Kind.STREAM_RESET:
            code, msg = parse_error(f.payload)
            if code == 0:
                self._finish(None)
            else:
                self._finish(RpcError(code, msg, bool(f.flags & 0x01)))
        self._changed.set()

    def _on_data(self, f: Frame) -> None:
        if self._recv_ended:
            raise ProtocolError("StreamData after StreamEnd on stream %d" % self.id)
        data = f.payload
        if f.flags & COMPRESSION_MASK:
            room = self._client._limits.max_frame - HEADER_SIZE - len(encode_metadata(f.metadata))
            try:
                data = expand(f.flags, f.payload, min(self._granted, room))
            except ExpandOverflow:
                raise ProtocolError("compressed StreamData on stream %d expands past the %s" % (
                    self.id, "window granted" if self._granted <= room else "frame limit")) from None
            except ExpandError as e:
                # It finishes the stream: StreamReset InvalidArgument, without Unprocessed.
                msg = "stream data does not expand: %s" % e
                self._send_reset(Code.INVALID_ARGUMENT, msg)
                self._finish(RpcError(Code.INVALID_ARGUMENT, msg))
                return
        elif len(data) > self._granted:
            raise ProtocolError("StreamData of %d bytes past the window (%d) on stream %d"
                                % (len(data), self._granted, self.id))
        self._granted -= len(data)
        self._buf += data

    def _finish(self, error: Optional[RpcError]) -> None:
        """The stream is finished for this end: the id is free, waiters wake."""
        if self._finished:
            return
        self._finished = True
        self._error = error
        if error is not None:
            self._buf.clear()  # a non-zero reset discards what was not read
        if self._timer is not None:
            self._timer.cancel()
        self._client._streams.pop(self.id, None)
        if not self._done.done():
            self._done.set_result(None)
        self._changed.set()

    def _send_reset(self, code: int, message: str) -> None:
        self._client._write_nowait(encode_frame(Kind.STREAM_RESET, self.id, payload=error_body(code, message)))

    def _expire(self) -> None:
        if not self._finished:
            msg = "deadline passed on stream %s" % self.route
            self._send_reset(Code.DEADLINE_EXCEEDED, msg)
            self._finish(RpcError(Code.DEADLINE_EXCEEDED, msg))

    # --- the application's side --------------------------------------------------------

    async def _wait(self) -> None:
        self._changed.clear()
        await self._changed.wait()

    def _grant(self, n: int) -> None:
        """n bytes were read: grant them back once enough have gathered."""
        self._unacked += n
        if self._recv_ended or self._finished or self._unacked == 0:
            return
        if self._unacked >= self.window // 4 or not self._buf and self._unacked >= self.window // 16:
            n, self._unacked = self._unacked, 0
            self._granted += n
            self._client._write_nowait(encode_frame(Kind.STREAM_CREDIT, self.id, payload=struct.pack(">I", n)))

    async def read(self, n: int = -1) -> bytes:
        """Up to n bytes as soon as some are here; b"" after the server's StreamEnd once all
        before it were read. With n < 0, all the bytes to the server's StreamEnd. Raises
        RpcError when the stream finished with an error: the handler's code, NotFound (and
        the other refusals, Unprocessed), Canceled, DeadlineExceeded, Unavailable."""
        if n < 0:
            out = bytearray()
            while True:
                chunk = await self.read(max(self.window, 1))
                if not chunk:
                    return bytes(out)
                out += chunk
        while True:
            if self._error is not None:
                raise self._error
            if self._buf:
                data = bytes(self._buf[:n])
                del self._buf[:n]
                self._grant(len(data))
                return data
            if self._recv_ended or self._finished or n == 0:
                return b""
            await self._wait()

    async def readexactly(self, n: int) -> bytes:
        """Exactly n bytes; asyncio.IncompleteReadError if the stream ends first."""
        out = bytearray()
        while len(out) < n:
            chunk = await self.read(n - len(out))
            if not chunk:
                raise asyncio.IncompleteReadError(bytes(out), n)
            out += chunk
        return bytes(out)

    def __aiter__(self) -> "Stream":
        return self

    async def __anext__(self) -> bytes:
        chunk = await self.read(CHUNK)
        if not chunk:
            raise StopAsyncIteration
        return chunk

    async def write(self, data: bytes) -> None:
        """Send data in StreamData frames, never past the credit the server granted, waiting
        for more. Raises RpcError when the stream failed, and EOFError when the handler ended
        the stream (code 0) before taking all of it."""
        if self._send_ended:
            raise RpcError(Code.FAILED_PRECONDITION, "stream %s: write after close_send" % self.route)
        view = memoryview(bytes(data))
        while view:
            while self._credit == 0 or self._finished:
                if self._error is not None:
                    raise self._error
                if self._finished:
                    raise EOFError("rpcd: the handler of %s ended the stream" % self.route)
                await self._wait()
            n = min(len(view), self._credit, CHUNK)
            chunk, flags = bytes(view[:n]), 0
            if self._send_flag:
                packed = gzip_payload(chunk, self._client._compress_min)
                if packed is not None:
                    chunk, flags = packed, self._send_flag
            self._credit -= n
            view = view[n:]
            self._client._write_nowait(encode_frame(Kind.STREAM_DATA, self.id, payload=chunk, flags=flags))
            await self._client._drain()

    async def close_send(self) -> None:
        """Send StreamEnd: this end sends no more; reading goes on."""
        if self._send_ended or self._finished:
            return
        self._send_ended = True
        self._client._write_nowait(encode_frame(Kind.STREAM_END, self.id))
        await self._client._drain()

    def cancel(self, message: str = "canceled") -> None:
        """Abandon the stream: StreamReset Canceled; the handler's context is cancelled, and
        reads and writes here raise RpcError Canceled."""
        if not self._finished:
            self._send_reset(Code.CANCELED, message)
            self._finish(RpcError(Code.CANCELED, "stream %s %s" % (self.route, message)))

    async def wait(self) -> None:
        """Wait for the stream's final StreamReset: return on success (code 0), raise the
        RpcError it carried otherwise."""
        await asyncio.shield(self._done)
        if self._error is not None:
            raise self._error

    async def close(self) -> None:
        """Finish the stream from this end. Once the server has ended its direction: end this
        one (if open) and wait for the handler's outcome, raising its error. Before that:
        cancel the stream."""
        if self._finished:
            if self._error is not None and self._error.code != Code.CANCELED:
                raise self._error
            return
        if not self._recv_ended:
            self.cancel()
            return
        await self.close_send()
        await self.wait()

    @property
    def finished(self) -> bool:
        return self._finished

    async def __aenter__(self) -> "Stream":
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            await self.close()
        else:
            self.cancel()

    def __repr__(self) -> str:
        return "Stream(%d, %r)" % (self.id, self.route)
