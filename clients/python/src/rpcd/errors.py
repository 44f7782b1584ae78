"""The error codes of rpcd (docs/protocol.md, "Error codes") and the exceptions of this package."""

from __future__ import annotations

import enum
from typing import Union


class Code(enum.IntEnum):
    """An rpcd error code. The numbers are gRPC's; codes above 16 are reserved, and a code
    this package does not know is kept as a plain int."""

    OK = 0
    CANCELED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


# The names protocol.md gives the codes, by number.
_NAMES = {c.value: "".join(w.capitalize() for w in c.name.split("_")) for c in Code}
_NAMES[Code.OK] = "OK"


def code_of(n: int) -> Union[Code, int]:
    """n as a Code when it is one, else the bare number ("a receiver that gets an unknown
    code keeps the number and reports it as such")."""
    try:
        return Code(n)
    except ValueError:
        return n


def code_name(n: int) -> str:
    """The name protocol.md gives code n ("NotFound"), or "code N" for one it does not name."""
    return _NAMES.get(n, "code %d" % n)


class RpcError(Exception):
    """A call, stream or subscription failed with an rpcd error code.

    code is a Code (or an int for a code above 16), message the text the peer sent, and
    unprocessed is True when the call was provably not acted on (the Unprocessed flag, or a
    call this client never sent): sending it again cannot run it twice."""

    def __init__(self, code: int, message: str = "", unprocessed: bool = False):
        self.code = code_of(code)
        self.message = message
        self.unprocessed = unprocessed
        super().__init__(code, message, unprocessed)

    def __str__(self) -> str:
        s = "rpcd: %s (%d): %s" % (code_name(self.code), self.code, self.message)
        return s + " [unprocessed]" if self.unprocessed else s

    def __repr__(self) -> str:
        return "RpcError(%s, %r, unprocessed=%s)" % (code_name(self.code), self.message, self.unprocessed)


class ProtocolError(Exception):
    """The peer sent bytes that break a rule of docs/protocol.md. The connection is closed
    with a GoAway Internal; calls in flight on it fail with RpcError Unavailable."""
