"""Subscriptions (docs/protocol.md, "Publish and subscribe")."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from typing import TYPE_CHECKING, Any, Deque, NamedTuple, Optional

from .errors import RpcError

if TYPE_CHECKING:
    from .client import Client


class Message(NamedTuple):
    """A published message as a subscription delivers it: the topic it was published to, its
    payload (expanded, if it came compressed) and the codec it was published in."""

    topic: str
    payload: bytes
    codec: int

    def json(self) -> Any:
        """The payload decoded as JSON; None for an empty one."""
        return json.loads(self.payload) if self.payload else None


class Subscription:
    """A subscription to a pattern, and an async iterator of its Messages in the order they
    came.

    The task that reads the connection never waits for a subscriber: Messages past `queue`
    waiting are dropped and counted in `dropped`, as are compressed ones that do not expand.
    Iteration ends (StopAsyncIteration) after unsubscribe(), once the Messages already queued
    are taken; it raises RpcError when the server ends the subscription (its Unsubscribe says
    why: PermissionDenied, ResourceExhausted, ...) or the connection is lost (Unavailable)."""

    def __init__(self, client: "Client", sid: int, pattern: str, queue: int):
        self._client = client
        self.id = sid
        self.pattern = pattern
        self.dropped = 0
        self._limit = queue
        self._queue: Deque[Message] = deque()
        self._ended = False
        self._taken = False  # the server took it in: its end is no refusal
        self._error: Optional[RpcError] = None
        self._changed = asyncio.Event()

    @property
    def live(self) -> bool:
        """Whether the subscription is in place: not unsubscribed, nor ended by the server."""
        return not self._ended

    @property
    def error(self) -> Optional[RpcError]:
        """Why the server (or a lost connection) ended the subscription; None if it did not."""
        return self._error

    def _wake(self) -> None:
        self._changed.set()

    def _deliver(self, m: Message) -> None:
        if len(self._queue) >= self._limit:
            self.dropped += 1
            return
        self._queue.append(m)
        self._wake()

    def _end(self, error: Optional[RpcError]) -> None:
        if not self._ended:
            self._ended, self._error = True, error
        self._wake()

    def __aiter__(self) -> "Subscription":
        return self

    async def __anext__(self) -> Message:
        while not self._queue:
            if self._ended:
                if self._error is not None:
                    raise self._error
                raise StopAsyncIteration
            self._changed.clear()
            await self._changed.wait()
        return self._queue.popleft()

    async def get(self, timeout: Optional[float] = None) -> Message:
        """The next Message, waiting at most timeout seconds (asyncio.TimeoutError past it).
        Raises StopAsyncIteration after unsubscribe() once none is left."""
        if timeout is None:
            return await self.__anext__()
        return await asyncio.wait_for(self.__anext__(), timeout)

    def pending(self) -> int:
        """How many Messages are queued, not yet taken."""
        return len(self._queue)

    async def unsubscribe(self) -> None:
        """Send an Unsubscribe; the server stops delivering. Messages already on the wire are
        dropped when they arrive; those already queued are still yielded."""
        if self._ended:
            return
        self._end(None)
        await self._client._unsubscribe(self.id)

    async def __aenter__(self) -> "Subscription":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.unsubscribe()

    def __repr__(self) -> str:
        return "Subscription(%d, %r, %s)" % (self.id, self.pattern, "live" if self.live else "ended")
