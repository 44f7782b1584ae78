"""Calls from the server (reverse calls and pushes) against an rpcd server that has the test
routes of clients/python/python_test.go, whose address is in $RPCD_PY_CALLBACK_ADDR:

  go test ./clients/python      (starts the server and runs this module)

PyTest/CallMeBack has the server call a route on the calling client and answers what the
client's handler answered; PyTest/Push sends the client one-way messages; PyTest/Wait waits
until its context ends, and PyTest/WaitState says what ended it, so a Cancel or a deadline
from this client can be seen to reach a handler. `rpcd serve` has none of these routes.
"""

import asyncio
import base64
import json
import os
import unittest

from support import AsyncTest, eventually, rpcd

from rpcd.errors import Code, RpcError

ADDR = os.environ.get("RPCD_PY_CALLBACK_ADDR", "")
NO_ADDR = "RPCD_PY_CALLBACK_ADDR is not set: these tests run from `go test ./clients/python`"
OK = (0, "", False)


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


@unittest.skipUnless(ADDR, NO_ADDR)
class ServerCalls(AsyncTest):
    async def asyncSetUp(self):
        self.c = await rpcd.connect(ADDR)

    async def asyncTearDown(self):
        await self.c.close()

    async def call_me_back(self, route, payload=b"", **kw):
        """(the client's reply, (code, message, unprocessed) of the server's call)."""
        arg = {"route": route, "payload": b64(payload), **kw}
        out = await self.c.call_json("PyTest/CallMeBack", arg, timeout=20)
        return base64.b64decode(out["reply"] or ""), (out["code"], out["message"], out["unprocessed"])

    async def test_raw_and_json_routes(self):
        calls = []

        async def double(call):
            calls.append(call)
            return b"a:" + call.payload

        self.c.handle("Client/Double", double)
        self.c.handle_json("Client/Inc", lambda arg: {"n": arg["n"] + 1})
        self.assertEqual(await self.call_me_back("Client/Double", b"42"), (b"a:42", OK))
        body = os.urandom(300_000)
        self.assertEqual(await self.call_me_back("Client/Double", body), (b"a:" + body, OK))
        self.assertEqual(await self.call_me_back("Client/Double"), (b"a:", OK))
        self.assertEqual([(c.route, c.oneway, c.codec) for c in calls], [("Client/Double", False, 0)] * 3)
        # The server's call carries the deadline of the handler's context: call_me_back's 20 s.
        self.assertTrue(all(15000 < c.deadline_ms <= 20000 for c in calls), [c.deadline_ms for c in calls])
        self.assertEqual(len({c.call_id for c in calls}), 3)
        reply, err = await self.call_me_back("Client/Inc", b'{"n":41}', json=True)
        self.assertEqual((json.loads(reply), err), ({"n": 42}, OK))
        self.assertEqual(self.c._serving, {})

    async def test_errors_reach_the_server(self):
        def raiser(e):
            def fn(call):
                raise e
            return fn

        self.c.handle("Client/Deny", raiser(RpcError(Code.PERMISSION_DENIED, "not you")))
        self.c.handle("Client/Busy", raiser(RpcError(Code.ABORTED, "try again", unprocessed=True)))
        self.c.handle("Client/Crash", raiser(ValueError("boom")))

        class Declined(Exception):
            pass

        self.c.handle("Client/Declined", raiser(Declined("no")))
        self.assertEqual(await self.call_me_back("Client/Deny"), (b"", (Code.PERMISSION_DENIED, "not you", False)))
        self.assertEqual(await self.call_me_back("Client/Busy"), (b"", (Code.ABORTED, "try again", True)))
        self.assertEqual(await self.call_me_back("Client/Crash"), (b"", (Code.INTERNAL, "ValueError: boom", False)))
        # An exception of the application's, no crash, carries no code: Unknown, as in clients/ts.
        self.assertEqual(await self.call_me_back("Client/Declined"), (b"", (Code.UNKNOWN, "Declined: no", False)))
        _, (code, msg, unprocessed) = await self.call_me_back("No/SuchOnClient")
        self.assertEqual((code, unprocessed), (Code.NOT_FOUND, True))
        self.assertIn("No/SuchOnClient", msg)
        self.assertEqual(await self.c.call_json("Math/Sum", {"a": 1, "b": 2}), 3)  # the connection goes on

    async def test_pushes(self):
        got = []
        self.c.handle("Client/News", got.append)
        raws = [b"first", b"", os.urandom(70_000)]
        n = await self.c.call_json("PyTest/Push", {"route": "Client/News", "payloads": [b64(x) for x in raws]})
        self.assertEqual(n, 3)
        jsons = [b'{"flash":1}', b'"two"']
        n = await self.c.call_json("PyTest/Push", {"route": "Client/News", "json": True,
                                                   "payloads": [b64(x) for x in jsons]})
        self.assertEqual(n, 2)
        await eventually(lambda: len(got) == 5, what="5 pushes")
        self.assertEqual([(c.oneway, c.codec, c.payload) for c in got],
                         [(True, 0, x) for x in raws] + [(True, 1, x) for x in jsons])
        # A push to no route here: logged, never answered; the connection goes on.
        with self.assertLogs("rpcd", "WARNING") as logged:
            await self.c.call_json("PyTest/Push", {"route": "No/SuchNews", "payloads": [b64(b"x")]})
            await eventually(lambda: logged.output, what="the log of the lost push")
        self.assertIn("No/SuchNews", logged.output[0])
        self.assertEqual(self.c._serving, {})

    async def test_deadline_and_cancel_from_the_server(self):
        seen, ended = [], []

        async def hold(call):
            seen.append(call)
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                ended.append(call.call_id)
                raise

        self.c.handle("Client/Hold", hold)
        self.c.handle("Client/Deadline", lambda call: b"%d" % call.deadline_ms)
        reply, err = await self.call_me_back("Client/Deadline", deadline_ms=3000)
        self.assertEqual(err, OK)
        self.assertTrue(2000 < int(reply) <= 3000, reply)  # what was left when it was sent
        _, (code, msg, _) = await self.call_me_back("Client/Hold", deadline_ms=200)
        self.assertEqual(code, Code.DEADLINE_EXCEEDED, msg)
        await eventually(lambda: len(ended) == 1, what="the handler's task cancelled at the deadline")
        _, (code, msg, _) = await self.call_me_back("Client/Hold", cancel_after_ms=100)
        self.assertEqual(code, Code.CANCELED, msg)
        await eventually(lambda: len(ended) == 2, what="the handler's task cancelled by the server's Cancel")
        self.assertEqual(ended, [c.call_id for c in seen])
        self.assertEqual(self.c._serving, {})

    async def test_handler_calls_the_server(self):
        async def nested(call):
            return b"%d" % await self.c.call_json("Math/Sum", {"a": int(call.payload), "b": 1})

        self.c.handle("Client/Nested", nested)
        self.assertEqual(await self.call_me_back("Client/Nested", b"41"), (b"42", OK))

    async def test_cancel_and_deadline_reach_the_handler(self):
        async def state():
            return await self.c.call_json("PyTest/WaitState")

        t = asyncio.ensure_future(self.c.call_json("PyTest/Wait"))
        await eventually_async(lambda: state(), lambda s: s["state"] == "waiting")
        self.assertEqual((await state())["deadline_ms"], -1)
        t.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await t
        await eventually_async(state, lambda s: s["state"] == "context canceled")
        with self.assertRaises(RpcError) as cm:
            await self.c.call_json("PyTest/Wait", timeout=0.3)
        self.assertEqual(cm.exception.code, Code.DEADLINE_EXCEEDED)
        s = await eventually_async(state, lambda s: s["state"] != "waiting")
        self.assertTrue(200 < s["deadline_ms"] <= 300, s)  # the deadline travelled with the call
        # Ended by the deadline it carried, or by the Cancel sent when it passed here.
        self.assertIn(s["state"], ("context deadline exceeded", "context canceled"))


async def eventually_async(get, cond, seconds=5.0):
    """Poll get() until cond holds of its value; returns that value."""
    end = asyncio.get_running_loop().time() + seconds
    while True:
        v = await get()
        if cond(v):
            return v
        if asyncio.get_running_loop().time() > end:
            raise AssertionError("timed out; last value %r" % (v,))
        await asyncio.sleep(0.01)


if __name__ == "__main__":
    unittest.main()
