"""The client against a scripted server in this process: the exact frames it sends and how it
takes what comes back, where a real rpcd cannot be made to misbehave or to wait on cue."""

import asyncio
import gzip
import struct
import unittest

from support import AsyncTest, eventually, rpcd

from rpcd import protocol as p
from rpcd.errors import Code, RpcError

K = p.Kind


class Peer:
    """The server's end of one connection, read and written frame by frame."""

    def __init__(self, reader, writer):
        self.r, self.w = reader, writer

    async def read(self, timeout=5.0):
        head = await asyncio.wait_for(self.r.readexactly(24), timeout)
        h = p.check_header(head)
        body = await asyncio.wait_for(self.r.readexactly(h.body_len), timeout) if h.body_len else b""
        return p.decode_body(h, body)

    async def expect(self, kind, timeout=5.0):
        f = await self.read(timeout)
        if f.kind != kind:
            raise AssertionError("want %s, got %r" % (kind.name, f))
        return f

    async def at_eof(self, timeout=5.0):
        """Whether the client closed its side, after anything it still sends."""
        while True:
            data = await asyncio.wait_for(self.r.read(65536), timeout)
            if not data:
                return True

    def send(self, kind, cid=0, route="", payload=b"", codec=0, flags=0, deadline_ms=0, metadata=None):
        self.w.write(p.encode_frame(kind, cid, route, payload, codec, flags, deadline_ms, metadata))

    async def sync(self):
        """A Ping and its Pong: every frame the client sent in answer to those before it has
        been read (the client answers in order)."""
        self.send(K.PING, payload=b"sync")
        while True:
            f = await self.read()
            if f.kind == K.PONG and f.payload == b"sync":
                return
            raise AssertionError("a frame before the Pong: %r" % (f,))


class FakeServerTest(AsyncTest):
    async def asyncSetUp(self):
        self.peers, self.writers = asyncio.Queue(), []

        def accept(r, w):
            self.writers.append(w)
            self.peers.put_nowait(Peer(r, w))

        self.server = await asyncio.start_server(accept, "127.0.0.1", 0)
        self.addr = "127.0.0.1:%d" % self.server.sockets[0].getsockname()[1]
        self.clients = []

    async def asyncTearDown(self):
        for c in self.clients:
            await c.close()
        for w in self.writers:
            w.close()
        self.server.close()
        await self.server.wait_closed()

    async def connect(self, **kw):
        task = asyncio.ensure_future(rpcd.connect(self.addr, **kw))
        peer = await asyncio.wait_for(self.peers.get(), 5)
        return task, peer

    async def client(self, **kw):
        task, peer = await self.connect(**kw)
        c = await task
        self.clients.append(c)
        return c, peer


class Calls(FakeServerTest):
    async def test_replies_matched_by_id_in_any_order(self):
        c, peer = await self.client()
        tasks = [asyncio.ensure_future(c.call("Echo/%d" % i, b"%d" % i)) for i in range(3)]
        reqs = [await peer.expect(K.REQUEST) for _ in range(3)]
        self.assertEqual([f.call_id for f in reqs], [1, 2, 3])
        self.assertEqual([(f.route, f.payload, f.codec, f.deadline_ms) for f in reqs],
                         [("Echo/%d" % i, b"%d" % i, 0, 0) for i in range(3)])
        for f in reversed(reqs):
            peer.send(K.RESPONSE, f.call_id, payload=b"re:" + f.payload)
        self.assertEqual(await asyncio.gather(*tasks), [b"re:0", b"re:1", b"re:2"])
        self.assertEqual(c._pending, {})

    async def test_ids_wrap_and_skip_those_waiting(self):
        c, peer = await self.client()
        first = asyncio.ensure_future(c.call("A/A"))
        self.assertEqual((await peer.expect(K.REQUEST)).call_id, 1)
        c._next_id = 0xFFFFFFFF
        more = [asyncio.ensure_future(c.call("A/B")) for _ in range(2)]
        ids = [(await peer.expect(K.REQUEST)).call_id for _ in range(2)]
        self.assertEqual(ids, [0xFFFFFFFF, 2])  # wrapped past 0, and 1 still waits
        for cid in (1, 0xFFFFFFFF, 2):
            peer.send(K.RESPONSE, cid)
        await asyncio.gather(first, *more)

    async def test_json_and_metadata(self):
        c, peer = await self.client()
        t = asyncio.ensure_future(c.call_json("Math/Sum", {"a": 1, "b": 2}, metadata={"tenant": "acme"}))
        f = await peer.expect(K.REQUEST)
        self.assertEqual((f.codec, f.payload, f.metadata), (p.Codec.JSON, b'{"a":1,"b":2}', [("tenant", b"acme")]))
        peer.send(K.RESPONSE, f.call_id, payload=b"3", codec=p.Codec.JSON)
        self.assertEqual(await t, 3)
        t = asyncio.ensure_future(c.call_json("Sys/Routes"))  # no argument: an empty payload
        f = await peer.expect(K.REQUEST)
        self.assertEqual(f.payload, b"")
        peer.send(K.RESPONSE, f.call_id, payload=b"", codec=p.Codec.JSON)
        self.assertIsNone(await t)

    async def test_error_carries_code_message_and_unprocessed(self):
        c, peer = await self.client()
        for code, flags, want in ((Code.FAILED_PRECONDITION, 0, False), (Code.NOT_FOUND, 1, True), (99, 0, False)):
            t = asyncio.ensure_future(c.call("X/Y"))
            f = await peer.expect(K.REQUEST)
            peer.send(K.ERROR, f.call_id, payload=p.error_body(code, "why é"), flags=flags)
            with self.assertRaises(RpcError) as cm:
                await t
            self.assertEqual((cm.exception.code, cm.exception.message, cm.exception.unprocessed), (code, "why é", want))

    async def test_what_no_frame_may_carry_is_refused_here(self):
        # The one rule both clients keep (README, "Errors"): what this client refuses before
        # sending is an RpcError with the code the receiver would answer, marked unprocessed.
        c, peer = await self.client(limits=p.Limits(max_frame=1024))
        s = c.open_stream("Big/Stream")  # a stream open: the window is checked before the frame
        cases = (
            (lambda: c.call("Big/Echo", bytes(1024)), Code.RESOURCE_EXHAUSTED),
            (lambda: c.call_json("Big/Echo", "x" * 1024), Code.RESOURCE_EXHAUSTED),
            (lambda: c.notify("Big/Echo", bytes(1024)), Code.RESOURCE_EXHAUSTED),
            (lambda: c.publish("big.topic", bytes(1024)), Code.RESOURCE_EXHAUSTED),
            (lambda: c.call("X/Y", metadata={"k": "v" * 9000}), Code.RESOURCE_EXHAUSTED),
            (lambda: c.call("X/Y", metadata={"bad key": "v"}), Code.INVALID_ARGUMENT),
            (lambda: c.call("X/" + "y" * 300), Code.INVALID_ARGUMENT),
            (lambda: c.call("X/é"), Code.INVALID_ARGUMENT),
            (lambda: c.call(""), Code.INVALID_ARGUMENT),
            (lambda: c.publish("a..b", b""), Code.INVALID_ARGUMENT),
            (lambda: c.subscribe("a.>.b"), Code.INVALID_ARGUMENT),
            (lambda: c.ping(bytes(65)), Code.INVALID_ARGUMENT),
        )
        for i, (op, code) in enumerate(cases):
            with self.subTest(case=i), self.assertRaises(RpcError) as cm:
                await op()
            self.assertEqual((cm.exception.code, cm.exception.unprocessed), (code, True), cm.exception)
        with self.assertRaises(RpcError) as cm:
            c.open_stream("Big/Stream", window=0)
        self.assertEqual((cm.exception.code, cm.exception.unprocessed), (Code.INVALID_ARGUMENT, True))
        await s.close_send()
        with self.assertRaises(RpcError) as cm:
            await s.write(b"x")
        self.assertEqual((cm.exception.code, cm.exception.unprocessed), (Code.FAILED_PRECONDITION, False))
        self.assertEqual([f.kind for f in [await peer.expect(K.STREAM_OPEN), await peer.expect(K.STREAM_END)]],
                         [K.STREAM_OPEN, K.STREAM_END], "nothing else was sent")

    async def test_a_reply_that_is_not_json(self):
        c, peer = await self.client()
        t = asyncio.ensure_future(c.call_json("X/Y"))
        f = await peer.expect(K.REQUEST)
        peer.send(K.RESPONSE, f.call_id, payload=b"{not json", codec=p.Codec.JSON)
        with self.assertRaises(RpcError) as cm:
            await t
        self.assertEqual((cm.exception.code, cm.exception.unprocessed), (Code.INTERNAL, False))

    async def test_a_response_past_the_limit_is_data_loss(self):
        c, peer = await self.client(limits=p.Limits(max_frame=2048))
        t = asyncio.ensure_future(c.call("Big/Echo"))
        f = await peer.expect(K.REQUEST)
        peer.send(K.RESPONSE, f.call_id, payload=gzip.compress(bytes(4096)), flags=p.FLAG_GZIP)
        with self.assertRaises(RpcError) as cm:
            await t
        self.assertEqual((cm.exception.code, cm.exception.unprocessed), (Code.DATA_LOSS, False))

    async def test_cancel_sends_cancel_and_drops_the_late_reply(self):
        c, peer = await self.client()
        t = asyncio.ensure_future(c.call("Slow/Op"))
        f = await peer.expect(K.REQUEST)
        t.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await t
        cancel = await peer.expect(K.CANCEL)
        self.assertEqual((cancel.call_id, cancel.payload, cancel.codec), (f.call_id, b"", 0))
        self.assertEqual(c._pending, {})
        peer.send(K.RESPONSE, f.call_id, payload=b"late")  # crosses the Cancel: dropped
        t = asyncio.ensure_future(c.call("Next/Op"))
        g = await peer.expect(K.REQUEST)
        peer.send(K.RESPONSE, g.call_id, payload=b"mine")
        self.assertEqual(await t, b"mine")

    async def test_deadline_travels_rounded_up_and_is_kept_here(self):
        c, peer = await self.client()
        for timeout, want in ((1.5, 1500), (2.0001, 2001)):
            t = asyncio.ensure_future(c.call("A/B", timeout=timeout))
            f = await peer.expect(K.REQUEST)
            self.assertEqual(f.deadline_ms, want)
            peer.send(K.RESPONSE, f.call_id)
            await t
        # No answer: the call stops waiting at its deadline and sends Cancel.
        for timeout, want in ((0.05, 50), (0.0003, 1)):
            t = asyncio.ensure_future(c.call("Slow/Op", timeout=timeout))
            f = await peer.expect(K.REQUEST)
            self.assertEqual(f.deadline_ms, want)
            with self.assertRaises(RpcError) as cm:
                await t
            self.assertEqual((cm.exception.code, cm.exception.unprocessed), (Code.DEADLINE_EXCEEDED, False))
            self.assertEqual((await peer.expect(K.CANCEL)).call_id, f.call_id)
            self.assertEqual(c._pending, {})
        # A deadline already passed: not sent at all.
        for timeout in (0, -1):
            with self.assertRaises(RpcError) as cm:
                await c.call("Never/Sent", timeout=timeout)
            self.assertEqual((cm.exception.code, cm.exception.unprocessed), (Code.DEADLINE_EXCEEDED, True))
            self.assertIn("deadline passed before Never/Sent was sent", cm.exception.message)
        await peer.sync()  # nothing came before the Pong

    async def test_oneway(self):
        c, peer = await self.client()
        await c.notify("Log/Write", b"x", timeout=2)
        await c.notify_json("Log/Json", {"k": 1})
        f, g = await peer.expect(K.ONEWAY), await peer.expect(K.ONEWAY)
        self.assertEqual((f.call_id, f.route, f.payload, f.deadline_ms), (1, "Log/Write", b"x", 2000))
        self.assertEqual((g.call_id, g.codec, g.payload), (2, p.Codec.JSON, b'{"k":1}'))
        self.assertEqual(c._pending, {})

    async def test_ping_both_ways(self):
        c, peer = await self.client()
        peer.send(K.PING, payload=b"abc")
        self.assertEqual((await peer.expect(K.PONG)).payload, b"abc")
        t = asyncio.ensure_future(c.ping(b"x"))
        f = await peer.expect(K.PING)
        peer.send(K.PONG, payload=f.payload)
        self.assertEqual(await t, b"x")
        with self.assertRaises(RpcError) as cm:
            await c.ping(bytes(65))
        self.assertEqual((cm.exception.code, cm.exception.unprocessed), (Code.INVALID_ARGUMENT, True))
        # A ping cancelled before its Pong: that Pong is its own, not the next ping's.
        first = asyncio.ensure_future(c.ping(b"1"))
        await peer.expect(K.PING)
        first.cancel()
        second = asyncio.ensure_future(c.ping(b"2"))
        await peer.expect(K.PING)
        peer.send(K.PONG, payload=b"1")
        peer.send(K.PONG, payload=b"2")
        self.assertEqual(await second, b"2")


class Handshake(FakeServerTest):
    async def test_hello_with_token_and_gzip(self):
        task, peer = await self.connect(token="s3cr3t-token", auth_method="token", compression="gzip")
        hello = await peer.expect(K.HELLO)
        self.assertEqual((hello.call_id, hello.payload), (0, b"s3cr3t-token"))
        self.assertEqual(hello.metadata, [("rpcd-auth-method", b"token"), ("rpcd-compression", b"gzip")])
        peer.send(K.WELCOME, payload=b"alice", metadata=[("rpcd-compression", b"zstd,gzip")])
        c = await task
        self.clients.append(c)
        self.assertEqual((c.identity, c.server_compressions, c.compression), ("alice", ["zstd", "gzip"], "gzip"))
        body = b'{"text":"%s"}' % (b"compress me " * 200)
        t = asyncio.ensure_future(c.call("Big/Echo", body, codec=p.Codec.JSON))
        f = await peer.expect(K.REQUEST)
        self.assertEqual(f.flags, p.FLAG_GZIP)
        self.assertEqual(gzip.decompress(f.payload), body)
        peer.send(K.RESPONSE, f.call_id, payload=gzip.compress(body), codec=p.Codec.JSON, flags=p.FLAG_GZIP)
        self.assertEqual(await t, body)
        t = asyncio.ensure_future(c.call("Small/Echo", b"tiny"))  # under 1 KiB: as it is
        f = await peer.expect(K.REQUEST)
        self.assertEqual((f.flags, f.payload), (0, b"tiny"))
        peer.send(K.RESPONSE, f.call_id, payload=b"not gzip", flags=p.FLAG_GZIP)
        with self.assertRaises(RpcError) as cm:  # a Response that does not expand
            await t
        self.assertEqual(cm.exception.code, Code.DATA_LOSS)

    async def test_welcome_without_gzip_means_none(self):
        task, peer = await self.connect(compression="gzip")
        self.assertEqual((await peer.expect(K.HELLO)).metadata, [("rpcd-compression", b"gzip")])
        peer.send(K.WELCOME, metadata=[("rpcd-compression", b"zstd")])
        c = await task
        self.clients.append(c)
        self.assertEqual((c.identity, c.compression), ("", None))
        t = asyncio.ensure_future(c.call("Big/Echo", b"a" * 4096))
        self.assertEqual((await peer.expect(K.REQUEST)).flags, 0)
        t.cancel()

    async def test_refused_credentials(self):
        task, peer = await self.connect(token=b"wrong")
        self.assertEqual((await peer.expect(K.HELLO)).metadata, [])  # no method named
        peer.send(K.GOAWAY, payload=p.goaway_body(0, Code.UNAUTHENTICATED, "token refused"))
        peer.w.close()
        with self.assertRaises(RpcError) as cm:
            await task
        self.assertEqual((cm.exception.code, cm.exception.message), (Code.UNAUTHENTICATED, "token refused"))
        self.assertTrue(cm.exception.unprocessed, "a refused Hello: nothing the connection sent was acted on")

    async def test_no_welcome_in_time(self):
        task, peer = await self.connect(hello=True, timeout=0.2)
        await peer.expect(K.HELLO)
        with self.assertRaises(RpcError) as cm:  # as clients/ts: DeadlineExceeded, not TimeoutError
            await task
        self.assertEqual((cm.exception.code, cm.exception.unprocessed), (Code.DEADLINE_EXCEEDED, False))

    async def test_zstd_is_not_offered(self):
        with self.assertRaises(ValueError) as cm:
            await rpcd.connect(self.addr, compression="zstd")
        self.assertIn("Zstandard", str(cm.exception))


class TheConnection(FakeServerTest):
    async def test_goaway_then_close(self):
        c, peer = await self.client()
        t1, t2 = asyncio.ensure_future(c.call("A/One")), asyncio.ensure_future(c.call("A/Two"))
        ids = [(await peer.expect(K.REQUEST)).call_id for _ in range(2)]
        peer.send(K.GOAWAY, payload=p.goaway_body(ids[0], Code.UNAVAILABLE, "draining"))
        await eventually(lambda: c.goaway is not None, what="the GoAway")
        self.assertEqual(c.goaway, rpcd.GoAway(ids[0], Code.UNAVAILABLE, "draining"))
        with self.assertRaises(RpcError) as cm:  # no new calls: refused here, never sent
            await c.call("A/Three")
        self.assertEqual((cm.exception.code, cm.exception.unprocessed), (Code.UNAVAILABLE, True))
        peer.w.close()  # closed before either was answered
        with self.assertRaises(RpcError) as one:
            await t1
        with self.assertRaises(RpcError) as two:
            await t2
        self.assertEqual((one.exception.code, one.exception.unprocessed), (Code.UNAVAILABLE, False))  # fate unknown
        self.assertEqual((two.exception.code, two.exception.unprocessed), (Code.UNAVAILABLE, True))  # after last

    async def test_protocol_error_is_answered_with_goaway(self):
        c, peer = await self.client()
        t = asyncio.ensure_future(c.call("A/B"))
        await peer.expect(K.REQUEST)
        peer.w.write(b"XX" + bytes(22))
        g = await peer.expect(K.GOAWAY)
        last, code, msg = p.parse_goaway(g.payload)
        self.assertEqual((last, code), (0, Code.INTERNAL))
        self.assertIn("bad magic", msg)
        self.assertTrue(await peer.at_eof())
        with self.assertRaises(RpcError) as cm:
            await t
        self.assertEqual(cm.exception.code, Code.UNAVAILABLE)
        self.assertTrue(c.closed)

    async def test_kinds_a_client_must_not_receive(self):
        for kind, route in ((K.SUBSCRIBE, "a.b"), (K.PUBLISH, "a.b"), (K.WELCOME, "")):
            c, peer = await self.client()
            peer.send(kind, 1 if kind == K.SUBSCRIBE else 0, route)
            g = await peer.expect(K.GOAWAY)
            self.assertEqual(p.parse_goaway(g.payload)[1], Code.INTERNAL)


class CallsFromTheServer(FakeServerTest):
    async def test_handlers_answer_with_the_servers_id(self):
        c, peer = await self.client()
        seen = []

        async def echo(call):
            seen.append(call)
            return b"echo:" + call.payload

        c.handle("Client/Echo", echo)
        c.handle_json("Client/Inc", lambda n: n + 1)
        c.handle("Client/Deny", lambda call: (_ for _ in ()).throw(RpcError(Code.ABORTED, "not now", True)))
        c.handle("Client/Crash", lambda call: 1 / 0)
        peer.send(K.REQUEST, 7, "Client/Echo", b"x", codec=0x80, metadata=[("k", b"v")], deadline_ms=3000)
        f = await peer.expect(K.RESPONSE)
        self.assertEqual((f.call_id, f.codec, f.payload, f.flags), (7, 0x80, b"echo:x", 0))  # the Request's codec
        call = seen[0]
        self.assertEqual((call.call_id, call.route, call.meta("k"), call.oneway, call.deadline_ms),
                         (7, "Client/Echo", b"v", False, 3000))
        peer.send(K.REQUEST, 1, "Client/Inc", b"41", codec=p.Codec.JSON)  # id 1, also this client's first
        f = await peer.expect(K.RESPONSE)
        self.assertEqual((f.call_id, f.codec, f.payload), (1, p.Codec.JSON, b"42"))
        for route, payload, codec, want in (("No/Such", b"", 0, (Code.NOT_FOUND, 1)),
                                            ("Client/Inc", b"{bad", p.Codec.JSON, (Code.INVALID_ARGUMENT, 1)),
                                            ("Client/Inc", b"41", p.Codec.RAW, (Code.INVALID_ARGUMENT, 1)),
                                            ("Client/Deny", b"", 0, (Code.ABORTED, 1)),
                                            ("Client/Crash", b"", 0, (Code.INTERNAL, 0))):
            peer.send(K.REQUEST, 9, route, payload, codec)
            if route == "Client/Crash":
                with self.assertLogs("rpcd", "ERROR") as logged:
                    f = await peer.expect(K.ERROR)
                self.assertIn("handler of Client/Crash raised", logged.output[0])
            else:
                f = await peer.expect(K.ERROR)
            code, msg = p.parse_error(f.payload)
            self.assertEqual((f.call_id, code, f.flags), (9, want[0], want[1]), (route, msg))
        self.assertIn("ZeroDivisionError", msg)

    async def test_oneway_cancel_and_deadline(self):
        c, peer = await self.client()
        got, started, cancelled = [], asyncio.Event(), asyncio.Event()

        async def hold(call):
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        c.handle("Client/News", got.append)
        c.handle("Client/Hold", hold)
        peer.send(K.ONEWAY, 3, "Client/News", b"flash")
        peer.send(K.ONEWAY, 4, "No/Such", b"lost")  # logged, never answered
        await peer.sync()  # no answer to either came before the Pong
        self.assertEqual([(x.oneway, x.payload) for x in got], [(True, b"flash")])
        peer.send(K.REQUEST, 5, "Client/Hold")
        await asyncio.wait_for(started.wait(), 5)
        peer.send(K.REQUEST, 5, "Client/Hold")  # the same id while the first is in flight
        f = await peer.expect(K.ERROR)
        self.assertEqual((f.call_id, f.flags, p.parse_error(f.payload)[0]), (5, 1, Code.INVALID_ARGUMENT))
        peer.send(K.CANCEL, 5)
        await asyncio.wait_for(cancelled.wait(), 5)
        peer.send(K.CANCEL, 77)  # a call never seen: ignored
        await peer.sync()  # the cancelled call was not answered
        peer.send(K.REQUEST, 6, "Client/Hold", deadline_ms=50)
        f = await peer.expect(K.ERROR)
        self.assertEqual((f.call_id, f.flags, p.parse_error(f.payload)[0]), (6, 0, Code.DEADLINE_EXCEEDED))

    async def test_streams_from_the_server_are_refused(self):
        c, peer = await self.client()
        peer.send(K.STREAM_OPEN, 2, "Client/Upload", struct.pack(">I", 65536))
        f = await peer.expect(K.STREAM_RESET)
        self.assertEqual((f.call_id, f.flags, p.parse_error(f.payload)[0]), (2, 1, Code.NOT_FOUND))


class PublishSubscribe(FakeServerTest):
    async def answer_sync(self, peer):
        f = await peer.expect(K.REQUEST)
        self.assertEqual(f.route, "Sys/Ping")
        peer.send(K.RESPONSE, f.call_id, payload=b'"pong"', codec=p.Codec.JSON)

    async def test_subscribe_deliver_end(self):
        c, peer = await self.client()
        t = asyncio.ensure_future(c.subscribe("orders.*.created", queue=3))
        f = await peer.expect(K.SUBSCRIBE)
        self.assertEqual((f.call_id, f.route, f.metadata), (1, "orders.*.created", []))
        await self.answer_sync(peer)
        sub = await t
        for i in range(5):  # two past the queue: dropped, counted
            peer.send(K.MESSAGE, 1, "orders.eu.created", b'{"n":%d}' % i, codec=p.Codec.JSON)
        peer.send(K.MESSAGE, 9, "orders.x.created", b"")  # no such subscription: dropped
        peer.send(K.UNSUBSCRIBE, 1, payload=p.error_body(Code.PERMISSION_DENIED, "no more"))
        await peer.sync()
        self.assertEqual([m.json()["n"] async for m in _take(sub, 3)], [0, 1, 2])
        self.assertEqual((sub.dropped, c.dropped_messages), (2, 1))
        with self.assertRaises(RpcError) as cm:
            await sub.get()
        self.assertEqual((cm.exception.code, cm.exception.message), (Code.PERMISSION_DENIED, "no more"))
        self.assertFalse(cm.exception.unprocessed, "a subscription that was in place was acted on")

    async def test_refused_subscribe_and_publish(self):
        refused = []
        c, peer = await self.client(on_publish_refused=refused.append)
        t = asyncio.ensure_future(c.subscribe("secrets.>"))
        f = await peer.expect(K.SUBSCRIBE)
        peer.send(K.UNSUBSCRIBE, f.call_id, payload=p.error_body(Code.PERMISSION_DENIED, "alice may not"))
        await self.answer_sync(peer)
        with self.assertRaises(RpcError) as cm:
            await t
        self.assertEqual((cm.exception.code, cm.exception.unprocessed), (Code.PERMISSION_DENIED, True))
        await c.publish("secrets.payroll", b"x")
        f = await peer.expect(K.PUBLISH)
        self.assertEqual((f.call_id, f.route, f.payload, f.deadline_ms), (0, "secrets.payroll", b"x", 0))
        peer.send(K.ERROR, 0, payload=p.error_body(Code.PERMISSION_DENIED, "alice may not publish to secrets.payroll"),
                  flags=1)
        t = asyncio.ensure_future(c.flush())
        await self.answer_sync(peer)
        await t
        self.assertEqual(c.refused_publishes, 1)
        self.assertEqual([(e.code, e.unprocessed) for e in refused], [(Code.PERMISSION_DENIED, True)])

    async def test_unsubscribe_and_gzip_messages(self):
        task, peer = await self.connect(hello=True, compression="gzip")
        await peer.expect(K.HELLO)
        peer.send(K.WELCOME, metadata=[("rpcd-compression", b"zstd,gzip")])
        c = await task
        self.clients.append(c)
        with self.assertRaises(RpcError) as cm:
            await c.subscribe("a..b")
        self.assertEqual((cm.exception.code, cm.exception.unprocessed), (Code.INVALID_ARGUMENT, True))
        t = asyncio.ensure_future(c.subscribe(">"))
        f = await peer.expect(K.SUBSCRIBE)
        self.assertEqual(f.metadata, [("rpcd-compression", b"gzip")])
        await self.answer_sync(peer)
        sub = await t
        body = b"x" * 5000
        peer.send(K.MESSAGE, f.call_id, "a.b", gzip.compress(body), flags=p.FLAG_GZIP)
        peer.send(K.MESSAGE, f.call_id, "a.b", b"not gzip", flags=p.FLAG_GZIP)  # lost, counted
        peer.send(K.MESSAGE, f.call_id, "a.c", b"plain")
        self.assertEqual([(m.topic, m.payload) async for m in _take(sub, 2)], [("a.b", body), ("a.c", b"plain")])
        self.assertEqual(sub.dropped, 1)
        await sub.unsubscribe()
        self.assertEqual((await peer.expect(K.UNSUBSCRIBE)).call_id, f.call_id)
        with self.assertRaises(StopAsyncIteration):
            await sub.get()


async def _take(sub, n):
    for _ in range(n):
        yield await sub.get(5)


class Streams(FakeServerTest):
    async def test_flow_control_both_ways(self):
        c, peer = await self.client()
        st = c.open_stream("File/Up", window=1024, metadata={"name": "f"}, timeout=30)
        f = await peer.expect(K.STREAM_OPEN)
        self.assertEqual((f.call_id, f.route, f.payload, f.metadata, f.deadline_ms),
                         (1, "File/Up", struct.pack(">I", 1024), [("name", b"f")], 30000))
        w = asyncio.ensure_future(st.write(bytes(3000)))
        await peer.sync()  # no StreamData before the first StreamCredit
        self.assertFalse(w.done())
        peer.send(K.STREAM_CREDIT, 1, payload=struct.pack(">I", 1000))
        d = await peer.expect(K.STREAM_DATA)
        self.assertEqual(len(d.payload), 1000)
        await peer.sync()  # the credit is spent: the write waits
        self.assertFalse(w.done())
        peer.send(K.STREAM_CREDIT, 1, payload=struct.pack(">I", 5000))
        self.assertEqual(len((await peer.expect(K.STREAM_DATA)).payload), 2000)
        await w
        # The server's data: at most the window, granted back as it is read.
        peer.send(K.STREAM_DATA, 1, payload=bytes(1024))
        self.assertEqual(len(await st.read(100)), 100)  # under a quarter of the window read: no credit yet
        await peer.sync()
        self.assertEqual(len(await st.read(200)), 200)  # 300 read: a quarter passed
        self.assertEqual(struct.unpack(">I", (await peer.expect(K.STREAM_CREDIT)).payload)[0], 300)
        self.assertEqual(len(await st.read(724)), 724)  # all read: granted back
        self.assertEqual(struct.unpack(">I", (await peer.expect(K.STREAM_CREDIT)).payload)[0], 724)
        peer.send(K.STREAM_DATA, 1, payload=b"end")
        peer.send(K.STREAM_END, 1)
        peer.send(K.STREAM_RESET, 1, payload=p.error_body(0, ""))
        await st.close_send()
        self.assertEqual((await peer.expect(K.STREAM_END)).call_id, 1)
        self.assertEqual(await st.read(), b"end")  # a code-0 reset keeps what was sent readable
        await st.wait()
        self.assertEqual(await st.read(), b"")
        self.assertEqual(c._streams, {})
        st2 = c.open_stream("File/Up")
        self.assertEqual(st2.id, 3)  # odd ids, counting up

    async def test_data_past_the_window_is_a_protocol_error(self):
        c, peer = await self.client()
        c.open_stream("Logs/Tail", window=100)
        await peer.expect(K.STREAM_OPEN)
        peer.send(K.STREAM_DATA, 1, payload=bytes(101))
        g = await peer.expect(K.GOAWAY)
        self.assertIn("window", p.parse_goaway(g.payload)[2])

    async def test_reset_cancel_and_deadline(self):
        c, peer = await self.client()
        st = c.open_stream("Logs/Tail")
        await peer.expect(K.STREAM_OPEN)
        peer.send(K.STREAM_DATA, 1, payload=b"lost")
        peer.send(K.STREAM_RESET, 1, payload=p.error_body(Code.OUT_OF_RANGE, "too far"))
        with self.assertRaises(RpcError) as cm:
            await st.read()
        self.assertEqual((cm.exception.code, cm.exception.message), (Code.OUT_OF_RANGE, "too far"))
        st = c.open_stream("Logs/Tail")
        await peer.expect(K.STREAM_OPEN)
        st.cancel()
        f = await peer.expect(K.STREAM_RESET)
        self.assertEqual((f.call_id, p.parse_error(f.payload)[0]), (3, Code.CANCELED))
        with self.assertRaises(RpcError) as cm:
            await st.write(b"x")
        self.assertEqual(cm.exception.code, Code.CANCELED)
        st = c.open_stream("Logs/Tail", timeout=0.05)
        self.assertEqual((await peer.expect(K.STREAM_OPEN)).deadline_ms, 50)
        f = await peer.expect(K.STREAM_RESET)
        self.assertEqual((f.call_id, p.parse_error(f.payload)[0]), (5, Code.DEADLINE_EXCEEDED))
        with self.assertRaises(RpcError) as cm:
            await st.read()
        self.assertEqual(cm.exception.code, Code.DEADLINE_EXCEEDED)
        peer.send(K.STREAM_RESET, 2, payload=p.error_body(0, ""))  # code 0 from an opener
        g = await peer.expect(K.GOAWAY)
        self.assertIn("code 0", p.parse_goaway(g.payload)[2])


if __name__ == "__main__":
    unittest.main()
