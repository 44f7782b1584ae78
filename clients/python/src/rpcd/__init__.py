"""rpcd: an asyncio client for rpcd servers (wire protocol version 1, docs/protocol.md).

    import asyncio, rpcd

    async def main():
        async with await rpcd.connect("127.0.0.1:7070") as c:
            print(await c.call_json("Math/Sum", {"a": 1, "b": 2}))   # 3

    asyncio.run(main())

Standard library only. Calls (JSON and raw, deadlines, cancellation), one-way calls, the
handshake (a token, gzip), the server's calls to the client, publish/subscribe and streams,
multiplexed on one connection.
"""

import logging

from .client import Client, GoAway, connect
from .errors import Code, ProtocolError, RpcError, code_name
from .protocol import Codec, Kind
from .pubsub import Message, Subscription
from .serving import ServerCall
from .stream import Stream

__version__ = "0.1.0"

# A library logs to "rpcd" and leaves where it goes to the application.
logging.getLogger("rpcd").addHandler(logging.NullHandler())

__all__ = ["Client", "Code", "Codec", "GoAway", "Kind", "Message", "ProtocolError", "RpcError",
           "ServerCall", "Stream", "Subscription", "code_name", "connect"]
