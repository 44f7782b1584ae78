"""Calls from the server to this client (docs/protocol.md, "Calls from the server"): the
server's Requests, answered by the handler registered for their route, and its OneWays
(pushes), never answered."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from typing import Any, Awaitable, Callable, List, Optional, Tuple, Union

from .errors import Code, RpcError
from .protocol import Codec, first_value

log = logging.getLogger("rpcd")

# A handler takes the ServerCall and returns the Response's payload (bytes-like, or None for
# an empty one), or an awaitable of it.
Handler = Callable[["ServerCall"], Union[bytes, None, Awaitable[Optional[bytes]]]]


class ServerCall:
    """A Request or a OneWay the server sent this client, its payload expanded.

    call_id is the server's own id, in a space apart from this client's calls; deadline is the
    event loop's time (loop.time()) by which the server stops waiting, counted from when this
    client read the frame, or None when the call carries none."""

    __slots__ = ("route", "payload", "codec", "metadata", "call_id", "oneway", "deadline_ms", "deadline")

    def __init__(self, route: str, payload: bytes, codec: int, metadata: List[Tuple[str, bytes]],
                 call_id: int, oneway: bool, deadline_ms: int, received: float):
        self.route, self.payload, self.codec, self.metadata = route, payload, codec, metadata
        self.call_id, self.oneway, self.deadline_ms = call_id, oneway, deadline_ms
        self.deadline = received + deadline_ms / 1000.0 if deadline_ms else None

    def meta(self, key: str) -> Optional[bytes]:
        """The first value of metadata key, or None."""
        return first_value(self.metadata, key)

    def json(self) -> Any:
        """The payload decoded as JSON; None for an empty one ("no argument")."""
        return json.loads(self.payload) if self.payload else None

    def __repr__(self) -> str:
        return "ServerCall(%s %r id=%d, %d bytes)" % (
            "OneWay" if self.oneway else "Request", self.route, self.call_id, len(self.payload))


def json_handler(route: str, fn: Callable[[Any], Any]) -> Handler:
    """A handler for a JSON route: fn takes the decoded argument (None for an empty payload)
    and returns a value to encode as the reply, or an awaitable of it. A Request in another
    codec, or whose payload does not decode, is answered InvalidArgument with Unprocessed, as
    an rpcd typed route answers it."""

    async def handle(call: ServerCall) -> bytes:
        if call.codec != Codec.JSON:
            raise RpcError(Code.INVALID_ARGUMENT, "%s takes JSON, not codec 0x%02x" % (route, call.codec), True)
        try:
            arg = call.json()
        except ValueError as e:
            raise RpcError(Code.INVALID_ARGUMENT, "arguments of %s do not decode: %s" % (route, e), True) from None
        out = fn(arg)
        if inspect.isawaitable(out):
            out = await out
        return json.dumps(out, separators=(",", ":")).encode("utf-8")

    return handle


async def run_handler(fn: Handler, call: ServerCall, loop: asyncio.AbstractEventLoop) -> bytes:
    """Run fn for call within the call's deadline and return the reply's payload. Raises what
    the handler raises, and RpcError DeadlineExceeded when the deadline passes while it runs
    (its task is cancelled)."""
    out = fn(call)
    if inspect.isawaitable(out):
        if call.deadline is None:
            out = await out
        else:
            left = call.deadline - loop.time()
            try:
                out = await asyncio.wait_for(out, max(left, 0))
            except asyncio.TimeoutError:
                if loop.time() < call.deadline:
                    raise  # the handler's own timeout, not the call's
                raise RpcError(Code.DEADLINE_EXCEEDED, "deadline passed while %s ran on the client" % call.route) from None
    if out is None:
        return b""
    if not isinstance(out, (bytes, bytearray, memoryview)):
        raise TypeError("handler of %s returned %s, want bytes or None" % (call.route, type(out).__name__))
    return bytes(out)


# The interpreter's own errors: a handler that raises one crashed ("Internal is for a handler
# that crashed"), as the JavaScript engine's TypeError, RangeError, ... say in clients/ts.
_CRASHES = (TypeError, ValueError, NameError, UnboundLocalError, AttributeError, KeyError, IndexError,
            LookupError, ZeroDivisionError, ArithmeticError, OverflowError, AssertionError, RecursionError,
            RuntimeError, NotImplementedError, UnicodeError, SyntaxError, MemoryError, ImportError)


def failure(route: str, e: BaseException) -> RpcError:
    """The Error a handler's exception answers: an RpcError as it is (Unknown for code 0); one
    of the interpreter's own errors (TypeError, KeyError, ...), a crash, Internal; any other
    exception, a failure without a code of its own, Unknown (docs/protocol.md, "Calls from the
    server")."""
    if isinstance(e, RpcError):
        return e if e.code != Code.OK else RpcError(Code.UNKNOWN, e.message, e.unprocessed)
    log.error("rpcd: handler of %s raised", route, exc_info=e)
    code = Code.INTERNAL if type(e) in _CRASHES else Code.UNKNOWN
    return RpcError(code, "%s: %s" % (type(e).__name__, e))
