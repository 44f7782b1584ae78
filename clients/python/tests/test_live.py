"""The client against a real `rpcd serve` ($RPCD_BIN): its built-in routes (docs/protocol.md,
"The routes of `rpcd serve`"), the handshake with tokens, gzip, publish/subscribe with topic
permissions, streams, TLS and a drain.

Servers, each on 127.0.0.1 port 0, stopped with SIGTERM at the end:
  plain:  rpcd serve
  auth:   rpcd serve -auth-tokens (tokA alice reader, tokW wendy writer)
                     -auth-topics 'pub:orders.>=writer;sub:orders.>=reader'
"""

import asyncio
import gzip
import os
import shutil
import ssl
import struct
import subprocess
import tempfile
import unittest

from support import NO_BIN, RPCD_BIN, AsyncTest, Recorder, Server, eventually, rpcd, tokens_file

from rpcd import protocol as p
from rpcd.errors import Code, RpcError

K = p.Kind
plain = auth = None


def setUpModule():
    global plain, auth
    if not RPCD_BIN:
        return
    plain = Server()
    auth = Server("-auth-tokens", tokens_file(["tokA alice reader", "tokW wendy writer"]),
                  "-auth-topics", "pub:orders.>=writer;sub:orders.>=reader")


def tearDownModule():
    for s in (plain, auth):
        if s is not None:
            status = s.stop()
            if status != 0:
                raise AssertionError("rpcd serve exited %d after SIGTERM:\n%s" % (status, "".join(s.log)))


def compressible(n):
    line = b"rpcd compresses payloads of 1 KiB or more, when that makes them smaller.\n"
    return (line * (n // len(line) + 1))[:n]


@unittest.skipUnless(RPCD_BIN, NO_BIN)
class LiveTest(AsyncTest):
    server_attr = "plain"
    options = {}

    async def asyncSetUp(self):
        self.c = await rpcd.connect(globals()[self.server_attr].addr, **self.options)

    async def asyncTearDown(self):
        await self.c.close()


class Calls(LiveTest):
    async def test_json_and_raw(self):
        self.assertEqual(await self.c.call_json("Math/Sum", {"a": 1, "b": 2}), 3)
        self.assertEqual(await self.c.call_json("Math/Sum", {"a": 40, "b": 2}, timeout=5), 42)
        self.assertEqual(await self.c.call_json("Bench/EchoString", "héllo, rpcd"), "héllo, rpcd")
        self.assertEqual(await self.c.call_json("Sys/Ping"), "pong")
        self.assertEqual(await self.c.call("Bench/NoArg"), b"42")
        names = {r["name"]: r for r in await self.c.call_json("Sys/Routes")}
        self.assertTrue(names["Bench/StreamSink"].get("stream"))
        self.assertTrue(names["Sys/Stats"].get("blocking"))
        stats = await self.c.call_json("Sys/Stats")
        self.assertGreaterEqual(stats["conns"], 1)
        for size in (0, 16, 100_000, 4 * 1024 * 1024 - 24 - 16):  # up to the frame limit
            body = os.urandom(size)
            self.assertEqual(await self.c.call("Bench/EchoPacket", body), body)
        # A raw route answers in the Request's codec.
        rec = Recorder(self.c)
        self.assertEqual(await self.c.call("Bench/EchoPacket", b'"x"', codec=p.Codec.JSON), b'"x"')
        self.assertEqual(rec.read[-1].codec, p.Codec.JSON)

    async def test_many_calls_at_once_on_one_connection(self):
        rec = Recorder(self.c)
        calls = [self.c.call_json("Math/Sum", {"a": i, "b": 1000}) for i in range(300)]
        calls += [self.c.call_json("Sys/Stats") for _ in range(20)]  # Blocking: answered in any order
        got = await asyncio.gather(*calls)
        self.assertEqual(got[:300], [i + 1000 for i in range(300)])
        self.assertEqual(len({f.call_id for f in rec.sent}), 320)
        self.assertEqual(self.c._pending, {})

    async def test_errors(self):
        cases = ((("No/Such", b"x", p.Codec.RAW), Code.NOT_FOUND, True),
                 (("Math/Sum", b'{"a":1,"b":2}', p.Codec.RAW), Code.INVALID_ARGUMENT, True),  # not JSON
                 (("Math/Sum", b"{bad", p.Codec.JSON), Code.INVALID_ARGUMENT, True),
                 (("Math/Sum", b'{"a":9223372036854775807,"b":1}', p.Codec.JSON), Code.OUT_OF_RANGE, False))
        for (route, body, codec), code, unprocessed in cases:
            with self.subTest(route=route, body=body), self.assertRaises(RpcError) as cm:
                await self.c.call(route, body, codec=codec)
            self.assertEqual((cm.exception.code, cm.exception.unprocessed), (code, unprocessed), cm.exception)
        self.assertEqual(await self.c.call_json("Math/Sum", {"a": 1, "b": 1}), 2)  # the connection goes on

    async def test_a_payload_past_the_frame_limit_is_refused_here(self):
        rec = Recorder(self.c)
        with self.assertRaises(RpcError) as cm:
            await self.c.call("Bench/EchoPacket", bytes(4 * 1024 * 1024))
        self.assertEqual((cm.exception.code, cm.exception.unprocessed), (Code.RESOURCE_EXHAUSTED, True))
        self.assertEqual(rec.sent, [], "nothing was sent")
        self.assertEqual(await self.c.call_json("Math/Sum", {"a": 1, "b": 1}), 2)

    async def test_deadline_and_cancel(self):
        rec = Recorder(self.c)
        self.assertEqual(await self.c.call_json("Math/Sum", {"a": 1, "b": 2}, timeout=2.5), 3)
        self.assertEqual(rec.sent[-1].deadline_ms, 2500)
        with self.assertRaises(RpcError) as cm:
            await self.c.call_json("Math/Sum", {"a": 1, "b": 2}, timeout=0)
        self.assertEqual((cm.exception.code, cm.exception.unprocessed), (Code.DEADLINE_EXCEEDED, True))
        # A call cancelled before its reply: a Cancel goes out, the late reply is dropped.
        body = os.urandom(2 * 1024 * 1024)
        t = asyncio.ensure_future(self.c.call("Bench/EchoPacket", body))
        while not (rec.sent and len(rec.sent[-1].payload) == len(body)):
            await asyncio.sleep(0)  # cancel as soon as it is written, long before its reply can come
        t.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await t
        self.assertEqual((rec.sent[-1].kind, rec.sent[-1].call_id), (K.CANCEL, rec.sent[-2].call_id))
        self.assertEqual(await self.c.ping(b"after"), b"after")  # the reply, if it came, was dropped
        self.assertEqual(self.c._pending, {})
        self.assertEqual(await self.c.call_json("Math/Sum", {"a": 2, "b": 2}), 4)

    async def test_oneway_and_ping(self):
        await self.c.notify("No/Such", b"x")  # never answered, even for an unknown route
        await self.c.notify_json("Math/Sum", {"a": 1, "b": 2}, metadata=[("k", b"v")], timeout=1)
        self.assertEqual(await self.c.ping(bytes(range(64))), bytes(range(64)))
        self.assertEqual(await self.c.call_json("Math/Sum", {"a": 2, "b": 2}), 4)
        self.assertIsNone(self.c.goaway)

    async def test_metadata(self):
        md = [("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"), ("tenant", "acme")]
        self.assertEqual(await self.c.call_json("Math/Sum", {"a": 2, "b": 3}, metadata=md), 5)

    async def test_hello_without_credentials(self):
        c = await rpcd.connect(plain.addr, hello=True)
        try:
            self.assertEqual((c.identity, c.server_compressions, c.compression), ("", [], None))
            self.assertEqual(await c.call_json("Sys/Ping"), "pong")
        finally:
            await c.close()


class Compression(LiveTest):
    options = {"compression": "gzip"}

    async def test_gzip_both_ways(self):
        self.assertEqual((self.c.server_compressions, self.c.compression), (["zstd", "gzip"], "gzip"))
        rec = Recorder(self.c)
        body = compressible(64 * 1024)
        self.assertEqual(await self.c.call("Bench/EchoPacket", body), body)
        req, resp = rec.sent[-1], rec.read[-1]
        self.assertEqual((req.flags, resp.flags), (p.FLAG_GZIP, p.FLAG_GZIP))  # gzip, the first of ours it does
        self.assertLess(len(req.payload), len(body) // 4)
        self.assertEqual(gzip.decompress(req.payload), body)
        self.assertEqual(await self.c.call("Bench/EchoPacket", b"small"), b"small")
        self.assertEqual((rec.sent[-1].flags, rec.read[-1].flags), (0, 0))  # under 1 KiB: as it is

    async def test_stream_and_messages(self):
        rec = Recorder(self.c)
        st = self.c.open_stream("Bench/StreamSink")
        data = compressible(300_000)
        await st.write(data)
        await st.close_send()
        self.assertEqual(struct.unpack(">Q", await st.read())[0], len(data))
        await st.close()
        opened = [f for f in rec.sent if f.kind == K.STREAM_OPEN][0]
        self.assertEqual(opened.metadata[0], ("rpcd-compression", b"gzip"))
        self.assertEqual(st.server_compressions, ["zstd", "gzip"])
        sent = [f for f in rec.sent if f.kind == K.STREAM_DATA]
        self.assertTrue(all(f.flags == p.FLAG_GZIP for f in sent))
        self.assertLess(sum(len(f.payload) for f in sent), len(data) // 4)
        sub = await self.c.subscribe("logs.>")
        await self.c.publish("logs.app", compressible(8192))
        m = await sub.get(5)
        self.assertEqual((m.topic, m.payload), ("logs.app", compressible(8192)))
        self.assertEqual([f.flags for f in rec.read if f.kind == K.MESSAGE], [p.FLAG_GZIP])
        await sub.unsubscribe()


class PubSub(LiveTest):
    async def test_wildcards_in_order(self):
        other = await rpcd.connect(plain.addr)
        try:
            star = await self.c.subscribe("orders.*.created")
            rest = await self.c.subscribe("orders.>")
            self.assertEqual((star.id, rest.id), (1, 2))
            topics = ["orders.eu.created", "orders.us.created", "orders.eu.paid", "orders.eu.x.created", "orders"]
            for i, t in enumerate(topics):
                await other.publish_json(t, {"n": i})
            await other.publish("orders.raw.created", b"\x00\xff")
            self.assertEqual([(m.topic, m.json()) for m in [await star.get(5) for _ in range(2)]],
                             [("orders.eu.created", {"n": 0}), ("orders.us.created", {"n": 1})])
            got = [await rest.get(5) for _ in range(5)]
            self.assertEqual([m.topic for m in got], topics[:4] + ["orders.raw.created"])  # not "orders"
            m = await star.get(5)
            self.assertEqual((m.topic, m.payload, m.codec), ("orders.raw.created", b"\x00\xff", p.Codec.RAW))
            await self.c.flush()
            self.assertEqual((star.pending(), rest.pending(), star.dropped), (0, 0, 0))
        finally:
            await other.close()

    async def test_unsubscribe_and_own_publishes(self):
        sub = await self.c.subscribe("news.>")
        await self.c.publish("news.a", b"1")
        self.assertEqual((await sub.get(5)).payload, b"1")  # a client's own subscriptions get its publications
        await sub.unsubscribe()
        await self.c.publish("news.a", b"2")
        await self.c.flush()
        with self.assertRaises(StopAsyncIteration):
            await sub.get(1)
        async with await self.c.subscribe("news.b") as sub2:
            await self.c.publish("news.b", b"3")
            async for m in sub2:
                self.assertEqual(m.payload, b"3")
                break
        self.assertFalse(sub2.live)

    async def test_full_queue_drops(self):
        sub = await self.c.subscribe("burst", queue=4)
        for i in range(20):
            await self.c.publish("burst", b"%d" % i)
        await eventually(lambda: sub.pending() + sub.dropped == 20, what="20 messages taken or dropped")
        self.assertEqual((sub.pending(), sub.dropped), (4, 16))
        self.assertEqual([(await sub.get()).payload for _ in range(4)], [b"0", b"1", b"2", b"3"])


class Auth(LiveTest):
    server_attr = "auth"
    options = {"token": "tokA"}

    async def test_token_and_identity(self):
        self.assertEqual(self.c.identity, "alice")
        self.assertEqual(await self.c.call_json("Math/Sum", {"a": 1, "b": 2}), 3)
        c = await rpcd.connect(auth.addr, token="tokW", auth_method="token")
        self.assertEqual(c.identity, "wendy")
        await c.close()

    async def test_refused(self):
        with self.assertRaises(RpcError) as cm:
            await rpcd.connect(auth.addr, token="nope")
        self.assertEqual((cm.exception.code, cm.exception.unprocessed), (Code.UNAUTHENTICATED, True))
        c = await rpcd.connect(auth.addr)  # no Hello: the first call is refused
        try:
            with self.assertRaises(RpcError) as cm:
                await c.call_json("Math/Sum", {"a": 1, "b": 2})
            self.assertEqual((cm.exception.code, cm.exception.unprocessed), (Code.UNAUTHENTICATED, True))
        finally:
            await c.close()

    async def test_topic_permissions(self):
        refused = []
        wendy = await rpcd.connect(auth.addr, token="tokW", on_publish_refused=refused.append)
        try:
            sub = await self.c.subscribe("orders.>")  # alice, a reader
            with self.assertRaises(RpcError) as cm:
                await self.c.subscribe("secrets.>")
            self.assertEqual((cm.exception.code, cm.exception.unprocessed), (Code.PERMISSION_DENIED, True))
            self.assertIn("secrets.>", cm.exception.message)
            with self.assertRaises(RpcError):
                await wendy.subscribe("orders.>")  # a writer may not subscribe
            await wendy.publish("secrets.payroll", b"no")
            await wendy.publish("orders.eu.created", b"yes")
            await wendy.flush()
            self.assertEqual(wendy.refused_publishes, 1)
            e = refused[0]
            self.assertEqual((e.code, e.unprocessed), (Code.PERMISSION_DENIED, True))
            self.assertIn("secrets.payroll", e.message)
            self.assertEqual((await sub.get(5)).payload, b"yes")
            await self.c.publish("orders.eu.created", b"alice may not")
            await self.c.flush()
            self.assertEqual(self.c.refused_publishes, 1)
            self.assertEqual(await wendy.call_json("Sys/Ping"), "pong")  # connections go on
        finally:
            await wendy.close()


class Streams(LiveTest):
    async def test_upload_within_the_window(self):
        st = self.c.open_stream("Bench/StreamSink", window=4096)
        size = 1 << 20 | 12345  # many times the server's window: writes wait for credit
        rec = Recorder(self.c)
        await st.write(os.urandom(size))
        await st.close_send()
        self.assertEqual(struct.unpack(">Q", await st.read())[0], size)
        await st.wait()
        self.assertTrue(st.finished)
        data = [f for f in rec.sent if f.kind == K.STREAM_DATA]
        self.assertLessEqual(max(len(f.payload) for f in data), 32 * 1024)
        self.assertEqual(self.c._streams, {})

    async def test_downloads_at_once(self):
        a = self.c.open_stream("Bench/StreamSource", window=16384)
        b = self.c.open_stream("Bench/StreamSource", window=65536)
        self.assertEqual((a.id, b.id), (1, 3))
        for st, size in ((a, 300_000), (b, 1 << 20)):
            await st.write(struct.pack(">Q", size))
        got_b, got_a = await asyncio.gather(b.read(), a.read())
        self.assertEqual((len(got_a), len(got_b)), (300_000, 1 << 20))
        self.assertEqual(got_a, got_b[:300_000])  # the same pattern
        await a.close()
        async with self.c.open_stream("Bench/StreamSource", window=1024) as st:
            await st.write(struct.pack(">Q", 5000))
            chunks = [c async for c in st]
            self.assertLessEqual(max(map(len, chunks)), 1024)
            self.assertEqual(sum(map(len, chunks)), 5000)

    async def test_refusals_and_failures(self):
        st = self.c.open_stream("No/Such")
        with self.assertRaises(RpcError) as cm:
            await st.read()
        self.assertEqual((cm.exception.code, cm.exception.unprocessed), (Code.NOT_FOUND, True))
        st = self.c.open_stream("Math/Sum")  # a call route
        with self.assertRaises(RpcError) as cm:
            await st.write(b"x")
        self.assertEqual(cm.exception.code, Code.NOT_FOUND)
        st = self.c.open_stream("Bench/StreamSource")
        await st.write(b"1234")
        await st.close_send()  # fewer than 8 bytes, then the end
        with self.assertRaises(RpcError) as cm:
            await st.read()
        self.assertEqual((cm.exception.code, cm.exception.unprocessed), (Code.INVALID_ARGUMENT, True))

    async def test_cancel_and_deadline(self):
        rec = Recorder(self.c)
        st = self.c.open_stream("Bench/StreamSource", window=4096)
        await st.write(struct.pack(">Q", 1 << 30))
        self.assertEqual(len(await st.readexactly(4096)), 4096)
        st.cancel()
        self.assertEqual(p.parse_error(rec.sent[-1].payload)[0], Code.CANCELED)
        with self.assertRaises(RpcError) as cm:
            await st.read()
        self.assertEqual(cm.exception.code, Code.CANCELED)
        st = self.c.open_stream("Bench/StreamSink", timeout=0.2)
        await st.write(b"never ended")
        with self.assertRaises(RpcError) as cm:
            await st.wait()
        self.assertEqual(cm.exception.code, Code.DEADLINE_EXCEEDED)
        self.assertEqual(await self.c.call_json("Math/Sum", {"a": 2, "b": 2}), 4)  # calls go on


@unittest.skipUnless(RPCD_BIN, NO_BIN)
class Drain(AsyncTest):
    async def test_sigterm_sends_goaway(self):
        s = Server()
        try:
            c = await rpcd.connect(s.addr)
            self.assertEqual(await c.call_json("Sys/Ping"), "pong")
            s.proc.send_signal(15)
            await eventually(lambda: c.goaway is not None, what="the GoAway")
            self.assertEqual((c.goaway.code, c.goaway.last_call_id), (Code.UNAVAILABLE, 1))
            with self.assertRaises(RpcError) as cm:
                await c.call_json("Sys/Ping")
            self.assertEqual((cm.exception.code, cm.exception.unprocessed), (Code.UNAVAILABLE, True))
            await c.close()
        finally:
            self.assertEqual(s.stop(), 0)


@unittest.skipUnless(RPCD_BIN and shutil.which("openssl"), NO_BIN if not RPCD_BIN else "openssl not found")
class TLS(AsyncTest):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rpcd-py-tls-")
        cls.cert, key = os.path.join(cls.dir, "cert.pem"), os.path.join(cls.dir, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-days", "1", "-subj", "/CN=localhost", "-addext",
                        "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", key, "-out", cls.cert],
                       check=True, capture_output=True)
        cls.server = Server("-tls-cert", cls.cert, "-tls-key", key)

    @classmethod
    def tearDownClass(cls):
        try:
            assert cls.server.stop() == 0
        finally:
            shutil.rmtree(cls.dir)

    async def test_calls_over_tls(self):
        ctx = ssl.create_default_context(cafile=self.cert)
        c = await rpcd.connect(self.server.addr, ssl=ctx, compression="gzip")
        try:
            self.assertEqual(await c.call_json("Math/Sum", {"a": 1, "b": 2}), 3)
            body = compressible(200_000)
            self.assertEqual(await c.call("Bench/EchoPacket", body), body)
        finally:
            await c.close()
        with self.assertRaises(ssl.SSLError):  # a certificate it does not trust
            await rpcd.connect(self.server.addr, ssl=ssl.create_default_context())


if __name__ == "__main__":
    unittest.main()
