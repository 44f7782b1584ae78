"""Interop tests: the Python client (written from docs/protocol.md) against a live rpcd.

    python3 interop/python/test_interop.py 127.0.0.1:7070

The server must have the built-in routes Math/Sum, Bench/EchoPacket,
Bench/EchoString, Sys/Ping and Sys/Routes, and the stream routes
Bench/StreamSink and Bench/StreamSource, require no authentication, and take
gzip ("Compression": its Welcome names zstd,gzip, and so does its first StreamCredit
on a stream whose StreamOpen names a compression), and serve publish/subscribe
with rpcd's defaults (1,024 subscriptions per connection; Messages of 1 KiB or more
compressed for a Subscribe that names gzip). For "Calls from the server" it must have
the test routes of interop_test.go: Interop/CallMeBack, which calls a route on the
calling client (its payload and reply base64 in JSON) and answers the client's reply or
the error its call got, and Interop/Push, which sends the client one-way messages.
Every socket operation times out after 5 seconds.

With $RPCD_INTEROP_TOPICS=HOST:PORT, LiveTopicPermissions runs against a second server there,
one with topic permissions (interop_test.go starts one; the class says which); without, it is
skipped.
"""

import base64
import gzip
import json
import os
import socket
import struct
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rpcd_client as rc  # noqa: E402

TIMEOUT = 5.0
ADDR = ("127.0.0.1", 7070)


def connect(**kw) -> rc.Client:
    return rc.Client(ADDR[0], ADDR[1], timeout=TIMEOUT, **kw)


class Offline(unittest.TestCase):
    """The encoder reproduces the byte examples printed in the document."""

    def test_request_example(self):
        got = rc.encode_frame(rc.REQUEST, 1, "Math/Sum", b'{"a":1,"b":2}',
                              rc.CODEC_JSON, deadline_ms=1000)
        self.assertEqual(got.hex(), "524401010001000800000001000003e8"
                         "000000000000000d4d6174682f53756d"
                         "7b2261223a312c2262223a327d")

    def test_response_example(self):
        got = rc.encode_frame(rc.RESPONSE, 1, payload=b"3", codec=rc.CODEC_JSON)
        self.assertEqual(got.hex(), "52440102000100000000000100000000"
                         "000000000000000133")

    def test_error_example(self):
        data = bytes.fromhex("52440103010000000000000200000000"
                             "000000000000000a00056e6f20726f75" "7465")
        f = FakeSocketReader(data).read_frame()
        self.assertEqual((f.kind, f.flags, f.call_id), (rc.ERROR, rc.FLAG_UNPROCESSED, 2))
        self.assertEqual(rc.parse_error(f.payload), (rc.NOT_FOUND, "no route"))

    def test_metadata_roundtrip_and_partial_reads(self):
        md = [("trace-id", b"abc"), ("tenant", b""), ("trace-id", b"second")]
        data = rc.encode_frame(rc.REQUEST, 9, "A/B", b"xyz", metadata=md) * 2
        r = FakeSocketReader(data, chunk=1)  # one byte per recv
        for _ in range(2):
            f = r.read_frame()
            self.assertEqual((f.route, f.metadata, f.payload), ("A/B", md, b"xyz"))
        self.assertIsNone(r.read_frame())


    def test_stream_examples(self):
        """The stream frames printed under "Examples as bytes"."""
        self.assertEqual(rc.encode_frame(rc.STREAM_OPEN, 1, "File/Upload", bytes.fromhex("00040000"),
                                         deadline_ms=30000).hex(),
                         "524401180000000b0000000100007530" "00000000000000044669"
                         "6c652f55706c6f616400040000")
        self.assertEqual(rc.encode_frame(rc.STREAM_DATA, 1, payload=b"hello").hex(),
                         "52440119000000000000000100000000" "00000000000000056865" "6c6c6f")
        self.assertEqual(rc.encode_frame(rc.STREAM_CREDIT, 1, payload=bytes.fromhex("00010000")).hex(),
                         "5244011a000000000000000100000000" "000000000000000400010000")
        self.assertEqual(rc.encode_frame(rc.STREAM_END, 1).hex(),
                         "5244011b000000000000000100000000" "0000000000000000")
        f = FakeSocketReader(bytes.fromhex("5244011c010000000000000200000000"
                                           "00000000000000110005" "6e6f2073747265616d20726f757465")).read_frame()
        self.assertEqual((f.kind, f.flags, f.call_id), (rc.STREAM_RESET, rc.FLAG_UNPROCESSED, 2))
        self.assertEqual(rc.parse_error(f.payload), (rc.NOT_FOUND, "no stream route"))

    def test_compression_examples(self):
        """The Hello, Welcome and gzipped Request printed under "Examples as bytes"."""
        hello = rc.encode_frame(rc.HELLO, 0, metadata=[(rc.MD_COMPRESSION, b"zstd,gzip")])
        self.assertEqual(hello.hex(), "52440110000000000000000000000000"
                         "001c00000000000010727063642d636f"
                         "6d7072657373696f6e00097a7374642c" "677a6970")
        f = FakeSocketReader(bytes.fromhex("52440111000000000000000000000000"
                                           "001c00000000000510727063642d636f"
                                           "6d7072657373696f6e00097a7374642c"
                                           "677a6970616c696365")).read_frame()
        self.assertEqual((f.kind, f.flags, f.call_id, f.payload), (rc.WELCOME, 0, 0, b"alice"))
        self.assertEqual(rc.parse_compressions(rc.first_value(f.metadata, rc.MD_COMPRESSION)),
                         ["zstd", "gzip"])
        packed = gzip.compress(b'{"a":1,"b":2}', mtime=0)
        req = rc.encode_frame(rc.REQUEST, 5, "Math/Sum", packed, rc.CODEC_JSON, flags=rc.FLAG_GZIP)
        self.assertEqual(req.hex(), "52440101020100080000000500000000"
                         "00000000000000214d6174682f53756d"
                         "1f8b0800000000000203ab564a54b232"
                         "d4514a52b232aa050083ce41cf0d0000" "00")
        f = rc.expand(FakeSocketReader(req).read_frame())
        self.assertEqual((f.flags, f.codec, f.payload), (0, rc.CODEC_JSON, b'{"a":1,"b":2}'))

    def test_compression_flag_rules(self):
        """Compression 3, or a compression on a kind that cannot carry one, is a
        protocol error ("Flags", "Protocol errors"); StreamData may carry one
        ("Rules per kind")."""
        for kind, flags in ((rc.RESPONSE, 0x06), (rc.ERROR, 0x02), (rc.PING, 0x04),
                            (rc.WELCOME, 0x02), (rc.RESPONSE, 0x08), (rc.STREAM_DATA, 0x06),
                            (rc.STREAM_OPEN, 0x02), (rc.STREAM_CREDIT, 0x02),
                            (rc.STREAM_END, 0x04), (rc.STREAM_RESET, 0x02), (rc.STREAM_DATA, 0x08)):
            data = rc.encode_frame(kind, 0 if kind in (rc.PING, rc.WELCOME) else 1, flags=flags)
            with self.assertRaises(rc.ProtocolError, msg="kind %d flags %#x" % (kind, flags)):
                FakeSocketReader(data).read_frame()
        for kind, flags in ((rc.REQUEST, 0x02), (rc.RESPONSE, 0x04), (rc.ONEWAY, 0x02),
                            (rc.STREAM_DATA, 0x02), (rc.STREAM_DATA, 0x04)):
            data = rc.encode_frame(kind, 1, "A/B" if kind in (rc.REQUEST, rc.ONEWAY) else "",
                                   b"x", flags=flags)
            self.assertEqual(FakeSocketReader(data).read_frame().flags, flags)

    LOG = b"log line 1; log line 2; log line 3; log line 4"

    def test_stream_compression_examples(self):
        """The StreamOpen naming zstd,gzip, the first StreamCredit answering it, and the
        gzipped StreamData printed under "Examples as bytes"."""
        md = [(rc.MD_COMPRESSION, b"zstd,gzip")]
        opened = "".join("""
            52 44 01 18  00 00 00 0b  00 00 00 01  00 00 00 00
            00 1c 00 00  00 00 00 04  46 69 6c 65  2f 55 70 6c
            6f 61 64 10  72 70 63 64  2d 63 6f 6d  70 72 65 73
            73 69 6f 6e  00 09 7a 73  74 64 2c 67  7a 69 70 00
            04 00 00""".split())
        self.assertEqual(rc.encode_frame(rc.STREAM_OPEN, 1, "File/Upload", struct.pack(">I", 262144),
                                         metadata=md).hex(), opened)
        f = FakeSocketReader(bytes.fromhex(opened)).read_frame()
        self.assertEqual((f.kind, f.flags, f.call_id, f.deadline_ms, f.route, f.metadata, f.payload),
                         (rc.STREAM_OPEN, 0, 1, 0, "File/Upload", md, struct.pack(">I", 262144)))

        credit = "".join("""
            52 44 01 1a  00 00 00 00  00 00 00 01  00 00 00 00
            00 1c 00 00  00 00 00 04  10 72 70 63  64 2d 63 6f
            6d 70 72 65  73 73 69 6f  6e 00 09 7a  73 74 64 2c
            67 7a 69 70  00 04 00 00""".split())
        self.assertEqual(rc.encode_frame(rc.STREAM_CREDIT, 1, payload=struct.pack(">I", 262144),
                                         metadata=md).hex(), credit)
        f = FakeSocketReader(bytes.fromhex(credit)).read_frame()
        self.assertEqual((f.kind, f.flags, f.call_id, f.route, f.payload),
                         (rc.STREAM_CREDIT, 0, 1, "", struct.pack(">I", 262144)))
        self.assertEqual(rc.parse_compressions(rc.first_value(f.metadata, rc.MD_COMPRESSION)),
                         ["zstd", "gzip"])

        data = "".join("""
            52 44 01 19  02 00 00 00  00 00 00 01  00 00 00 00
            00 00 00 00  00 00 00 29  1f 8b 08 00  00 00 00 00
            02 03 cb c9  4f 57 c8 c9  cc 4b 55 30  b4 56 c8 81
            b1 8d 90 d8  c6 48 6c 13  00 eb eb 6b  bb 2e 00 00
            00""".split())
        packed = gzip.compress(self.LOG, mtime=0)
        self.assertEqual(len(packed), 41)
        self.assertEqual(rc.encode_frame(rc.STREAM_DATA, 1, payload=packed, flags=rc.FLAG_GZIP).hex(), data)
        f = FakeSocketReader(bytes.fromhex(data)).read_frame()  # a compression StreamData may carry
        self.assertEqual((f.kind, f.flags, f.codec, f.call_id, len(f.payload)),
                         (rc.STREAM_DATA, rc.FLAG_GZIP, rc.CODEC_RAW, 1, 41))
        # A stream that named gzip, with the StreamCredit above: the data counts its
        # expanded length against the window, not 41: 46 bytes, as the page says and the
        # gzip trailer's ISIZE, 2e 00 00 00, says too.
        self.assertEqual((len(self.LOG), struct.unpack("<I", packed[-4:])[0]), (46, 46))
        st, sent = fake_stream(window=262144, compression=("gzip",))
        st.on_frame(FakeSocketReader(bytes.fromhex(credit)).read_frame())
        self.assertEqual((st.credit, st.peer_compressions, st.compression), (262144, ["zstd", "gzip"], rc.FLAG_GZIP))
        st.on_frame(f)
        self.assertEqual((bytes(st.data), st.granted, st.gzip_frames_in, sent), (self.LOG, 262144 - 46, 1, []))

    def test_stream_expansion_bounds(self):
        """A compressed StreamData that expands past the credit granted is a protocol
        error; one that does not expand resets its stream with InvalidArgument
        ("Compression", the edge-case tables)."""
        packed = gzip.compress(self.LOG)
        st, sent = fake_stream(window=len(self.LOG) - 1, compression=("gzip",))
        with self.assertRaises(rc.ProtocolError):
            st.on_frame(rc.Frame(rc.STREAM_DATA, rc.FLAG_GZIP, 0, 1, 0, "", [], packed))
        st, sent = fake_stream(window=len(self.LOG))  # named or not, a receiver expands what it can
        st.on_frame(rc.Frame(rc.STREAM_DATA, rc.FLAG_GZIP, 0, 1, 0, "", [], packed))
        self.assertEqual((bytes(st.data), st.unacked, len(sent)), (self.LOG, 0, 1))  # 46 read,
        credit = FakeSocketReader(sent[0]).read_frame()                                   # 46 granted back
        self.assertEqual((credit.kind, credit.payload), (rc.STREAM_CREDIT, struct.pack(">I", 46)))
        for bad, flags in ((b"not gzip at all", rc.FLAG_GZIP), (b"", rc.FLAG_GZIP),
                           (packed[:-4], rc.FLAG_GZIP), (packed + b"junk", rc.FLAG_GZIP),
                           (packed, rc.FLAG_ZSTD)):  # this client does no Zstandard
            st, sent = fake_stream(window=65536, compression=("gzip",))
            st.on_frame(rc.Frame(rc.STREAM_DATA, flags, 0, 1, 0, "", [], bad))
            self.assertEqual(len(sent), 1, bad)
            f = FakeSocketReader(sent[0]).read_frame()
            self.assertEqual((f.kind, f.call_id, rc.parse_error(f.payload)[0]), (rc.STREAM_RESET, 1, rc.INVALID_ARGUMENT))
            self.assertNotIn(1, st.client.streams)
            with self.assertRaises(rc.RpcError) as cm:
                st.read()
            self.assertEqual(cm.exception.code, rc.INVALID_ARGUMENT)


def fake_stream(window: int, compression=()):
    """A Stream with id 1 over no socket: what it sends is kept in the list returned."""
    sent = []

    class Client:
        streams = {}

        def send_raw(self, data):
            sent.append(data)

    c = Client()
    c.streams[1] = st = rc.Stream(c, 1, window, compression)
    return st, sent


def FakeSocketReader(data: bytes, chunk: int = 1 << 20) -> rc.FrameReader:
    """A FrameReader over canned bytes, delivered chunk bytes at a time."""

    class Sock:
        pos = 0

        def recv(self, n):
            out = data[self.pos:self.pos + min(n, chunk)]
            self.pos += len(out)
            return out

    return rc.FrameReader(Sock())


def hexdump(text: str) -> str:
    """A byte example as printed on the page, as one hex string."""
    return "".join(text.split())


class OfflinePubSub(unittest.TestCase):
    """"Publish and subscribe" without a server: the byte examples, the header rules
    of its four kinds, topics and patterns, and what a subscriber does with Messages."""

    SUBSCRIBE = hexdump("""
        52 44 01 09  00 00 00 10  00 00 00 01  00 00 00 00
        00 00 00 00  00 00 00 00  6f 72 64 65  72 73 2e 2a
        2e 63 72 65  61 74 65 64""")
    PUBLISH = hexdump("""
        52 44 01 0b  00 01 00 11  00 00 00 00  00 00 00 00
        00 00 00 00  00 00 00 09  6f 72 64 65  72 73 2e 65
        75 2e 63 72  65 61 74 65  64 7b 22 69  64 22 3a 34
        32 7d""")
    MESSAGE = hexdump("""
        52 44 01 0c  00 01 00 11  00 00 00 01  00 00 00 00
        00 00 00 00  00 00 00 09  6f 72 64 65  72 73 2e 65
        75 2e 63 72  65 61 74 65  64 7b 22 69  64 22 3a 34
        32 7d""")
    SUBSCRIBE_GZIP = hexdump("""
        52 44 01 09  00 00 00 08  00 00 00 01  00 00 00 00
        00 1c 00 00  00 00 00 00  6f 72 64 65  72 73 2e 3e
        10 72 70 63  64 2d 63 6f  6d 70 72 65  73 73 69 6f
        6e 00 09 7a  73 74 64 2c  67 7a 69 70""")
    MESSAGE_GZIP = hexdump("""
        52 44 01 0c  02 01 00 11  00 00 00 01  00 00 00 00
        00 00 00 00  00 00 00 2d  6f 72 64 65  72 73 2e 65
        75 2e 63 72  65 61 74 65  64 1f 8b 08  00 00 00 00
        00 02 03 ab  56 ca 4c 51  b2 32 31 d2  51 ca 2c 49
        cd 2d 56 b2  8a 56 4a 54  d2 c1 83 63  6b 01 f3 b1
        9f 23 33 00  00 00""")
    UNSUBSCRIBE = hexdump("""
        52 44 01 0a  00 00 00 00  00 00 00 01  00 00 00 00
        00 00 00 00  00 00 00 00""")
    UNSUBSCRIBE_REFUSED = hexdump("""
        52 44 01 0a  00 00 00 00  00 00 00 02  00 00 00 00
        00 00 00 00  00 00 00 18  00 08 74 6f  6f 20 6d 61
        6e 79 20 73  75 62 73 63  72 69 70 74  69 6f 6e 73""")
    PUBLISH_REFUSED = hexdump("""
        52 44 01 03  01 00 00 00  00 00 00 00  00 00 00 00
        00 00 00 00  00 00 00 2a  00 07 61 6c  69 63 65 20
        6d 61 79 20  6e 6f 74 20  70 75 62 6c  69 73 68 20
        74 6f 20 73  65 63 72 65  74 73 2e 70  61 79 72 6f
        6c 6c""")
    ORDER = b'{"id":42,"items":["a","a","a","a","a","a","a","a"]}'

    def decode(self, hexstr: str) -> rc.Frame:
        return FakeSocketReader(bytes.fromhex(hexstr)).read_frame()

    def test_pubsub_examples(self):
        """Subscribe, Publish, Message and the two Unsubscribes under "Examples as bytes"
        encode as printed, and decode to the fields they name."""
        frames = (
            (self.SUBSCRIBE, (rc.SUBSCRIBE, 1, "orders.*.created", b"", rc.CODEC_RAW)),
            (self.PUBLISH, (rc.PUBLISH, 0, "orders.eu.created", b'{"id":42}', rc.CODEC_JSON)),
            (self.MESSAGE, (rc.MESSAGE, 1, "orders.eu.created", b'{"id":42}', rc.CODEC_JSON)),
            (self.UNSUBSCRIBE, (rc.UNSUBSCRIBE, 1, "", b"", rc.CODEC_RAW)),
            (self.UNSUBSCRIBE_REFUSED, (rc.UNSUBSCRIBE, 2, "",
                                        b"\x00\x08too many subscriptions", rc.CODEC_RAW)),
        )
        for hexstr, (kind, cid, route, payload, codec) in frames:
            self.assertEqual(rc.encode_frame(kind, cid, route, payload, codec).hex(), hexstr)
            f = self.decode(hexstr)
            self.assertEqual((f.kind, f.flags, f.codec, f.call_id, f.deadline_ms, f.route,
                              f.metadata, f.payload),
                             (kind, 0, codec, cid, 0, route, [], payload))
        self.assertEqual(rc.parse_error(self.decode(self.UNSUBSCRIBE_REFUSED).payload),
                         (rc.RESOURCE_EXHAUSTED, "too many subscriptions"))

    def test_publish_refused_example(self):
        """The Error of call id 0 under "Examples as bytes" ("Permissions"): a Publish the
        server refused, Unprocessed, PermissionDenied, the message naming the topic."""
        body = struct.pack(">H", rc.PERMISSION_DENIED) + b"alice may not publish to secrets.payroll"
        self.assertEqual(rc.encode_frame(rc.ERROR, 0, payload=body, flags=rc.FLAG_UNPROCESSED).hex(),
                         self.PUBLISH_REFUSED)
        f = self.decode(self.PUBLISH_REFUSED)
        self.assertEqual((f.kind, f.flags, f.call_id, f.route), (rc.ERROR, rc.FLAG_UNPROCESSED, 0, ""))
        self.assertEqual(rc.parse_error(f.payload), (rc.PERMISSION_DENIED, "alice may not publish to secrets.payroll"))

    def test_client_keeps_publish_refusals(self):
        """A client over a scripted server: an Error of call id 0 is kept as the refusal
        of a Publish, in order, and answers none of its calls."""
        c, srv = fake_server()
        try:
            c.publish("secrets.payroll", b"x")
            cid = c.send_request("Sys/Ping")
            recv_frames(srv, 2)
            srv.sendall(bytes.fromhex(self.PUBLISH_REFUSED) +
                        rc.encode_frame(rc.ERROR, 0, payload=struct.pack(">H", rc.UNAUTHENTICATED) + b"who?") +
                        rc.encode_frame(rc.RESPONSE, cid, payload=b"pong"))
            self.assertEqual(c.wait(cid).payload, b"pong")
            self.assertEqual(c.publish_refusals,
                             [(rc.PERMISSION_DENIED, "alice may not publish to secrets.payroll", True),
                              (rc.UNAUTHENTICATED, "who?", False)])
            self.assertIsNone(c.goaway)
        finally:
            c.close()
            srv.close()

    def test_pubsub_compression_examples(self):
        """The Subscribe naming zstd,gzip and the gzipped Message under "Examples as
        bytes"; the subscriber expands the Message to what was published."""
        md = [(rc.MD_COMPRESSION, b"zstd,gzip")]
        self.assertEqual(rc.encode_frame(rc.SUBSCRIBE, 1, "orders.>", metadata=md).hex(),
                         self.SUBSCRIBE_GZIP)
        f = self.decode(self.SUBSCRIBE_GZIP)
        self.assertEqual((f.kind, f.call_id, f.route, f.metadata, f.payload),
                         (rc.SUBSCRIBE, 1, "orders.>", md, b""))
        packed = gzip.compress(self.ORDER, mtime=0)
        self.assertEqual(len(packed), 45)
        self.assertEqual(rc.encode_frame(rc.MESSAGE, 1, "orders.eu.created", packed, rc.CODEC_JSON,
                                         flags=rc.FLAG_GZIP).hex(), self.MESSAGE_GZIP)
        f = self.decode(self.MESSAGE_GZIP)  # a compression a Message may carry
        self.assertEqual((f.kind, f.flags, f.codec, f.call_id, f.route, f.payload),
                         (rc.MESSAGE, rc.FLAG_GZIP, rc.CODEC_JSON, 1, "orders.eu.created", packed))
        sub = rc.Subscription(None, 1, "orders.>", ("gzip",))
        sub.on_message(f)
        m = sub.messages.popleft()
        self.assertEqual((m.flags, m.codec, m.route, m.payload), (0, rc.CODEC_JSON, "orders.eu.created", self.ORDER))
        self.assertEqual((sub.received, sub.gzip_in, sub.dropped, sub.wire_in), (1, 1, 0, 45))

    def test_pubsub_header_rules(self):
        """"Rules per kind" for the four kinds, and "Flags": Message may carry a
        compression, Subscribe, Unsubscribe and Publish may not; anything else is a
        protocol error, found by the reader."""
        E = rc.encode_frame
        bad = {
            "Subscribe id 0": E(rc.SUBSCRIBE, 0, "a"),
            "Subscribe codec JSON": E(rc.SUBSCRIBE, 1, "a", codec=rc.CODEC_JSON),
            "Subscribe no route": E(rc.SUBSCRIBE, 1),
            "Subscribe deadline": E(rc.SUBSCRIBE, 1, "a", deadline_ms=1),
            "Subscribe payload": E(rc.SUBSCRIBE, 1, "a", b"x"),
            "Subscribe gzip": E(rc.SUBSCRIBE, 1, "a", flags=rc.FLAG_GZIP),
            "Subscribe Unprocessed": E(rc.SUBSCRIBE, 1, "a", flags=rc.FLAG_UNPROCESSED),
            "Unsubscribe id 0": E(rc.UNSUBSCRIBE, 0),
            "Unsubscribe route": E(rc.UNSUBSCRIBE, 1, "a"),
            "Unsubscribe codec JSON": E(rc.UNSUBSCRIBE, 1, codec=rc.CODEC_JSON),
            "Unsubscribe deadline": E(rc.UNSUBSCRIBE, 1, deadline_ms=1),
            "Unsubscribe 1-byte body": E(rc.UNSUBSCRIBE, 1, payload=b"\x08"),
            "Unsubscribe gzip": E(rc.UNSUBSCRIBE, 1, flags=rc.FLAG_GZIP),
            "Publish id 1": E(rc.PUBLISH, 1, "a", b"x"),
            "Publish no route": E(rc.PUBLISH, 0, payload=b"x"),
            "Publish deadline": E(rc.PUBLISH, 0, "a", deadline_ms=1),
            "Publish gzip": E(rc.PUBLISH, 0, "a", gzip.compress(b"x"), flags=rc.FLAG_GZIP),
            "Message id 0": E(rc.MESSAGE, 0, "a", b"x"),
            "Message no route": E(rc.MESSAGE, 1, payload=b"x"),
            "Message deadline": E(rc.MESSAGE, 1, "a", deadline_ms=1),
            "Message compression 3": E(rc.MESSAGE, 1, "a", b"x", flags=0x06),
            "Message Unprocessed": E(rc.MESSAGE, 1, "a", b"x", flags=rc.FLAG_UNPROCESSED),
            "Message reserved bit": E(rc.MESSAGE, 1, "a", b"x", flags=0x08),
            "Subscribe bad pattern": E(rc.SUBSCRIBE, 1, "a..b"),
            "Publish wildcard topic": E(rc.PUBLISH, 0, "a.*", b"x"),
            "Message wildcard topic": E(rc.MESSAGE, 1, "a.>", b"x"),
            "Message topic byte 0x7f": E(rc.MESSAGE, 1, "a\x7f", b"x"),
        }
        for name, data in bad.items():
            with self.assertRaises(rc.ProtocolError, msg=name):
                FakeSocketReader(data).read_frame()
        good = (E(rc.SUBSCRIBE, 7, "a.*.>"), E(rc.UNSUBSCRIBE, 7),
                E(rc.UNSUBSCRIBE, 7, payload=b"\x00\x08"),  # an error body, empty message
                E(rc.PUBLISH, 0, "a.b", b"", 0x80),  # any codec, any payload
                E(rc.MESSAGE, 7, "a.b", b"x", 0x80), E(rc.MESSAGE, 7, "a.b", b"x", flags=rc.FLAG_GZIP),
                E(rc.MESSAGE, 7, "a.b", b"x", flags=rc.FLAG_ZSTD), E(rc.PUBLISH, 0, "a" * 256))
        for data in good:
            self.assertIsNotNone(FakeSocketReader(data).read_frame())

    def test_topics_and_patterns(self):
        """The table under "Topics and patterns", and the rules a topic or pattern
        breaks (an empty token, a..b, a trailing '.', '>' before the last token, '*' or
        '>' inside a token or in a topic)."""
        table = (
            ("orders.eu.created", ["orders.eu.created"], ["orders.eu", "orders.eu.created.x"]),
            ("orders.*.created", ["orders.eu.created", "orders.us.created"],
             ["orders.created", "orders.eu.x.created"]),
            ("orders.>", ["orders.eu", "orders.eu.created"], ["orders"]),
            (">", ["orders", "orders.eu.created", "a.b.c.d"], []),
            ("*", ["orders"], ["orders.eu"]),
            ("*.>", ["a.b", "a.b.c"], ["a"]),
            ("a.*.>", ["a.b.c", "a.b.c.d"], ["a.b", "b.b.c"]),
        )
        for pattern, yes, no in table:
            self.assertIsNone(rc.topic_error(pattern, pattern=True), pattern)
            for t in yes + no:
                self.assertIsNone(rc.topic_error(t), t)
            for t in yes:
                self.assertTrue(rc.topic_matches(pattern, t), (pattern, t))
            for t in no:
                self.assertFalse(rc.topic_matches(pattern, t), (pattern, t))
        for route in ("", ".", "a..b", ".a", "a.", "a.>.b", ">.a", "a*", "a.b*", "*a",
                      ">a", "a>", "a.**", "a b", "a\x7f", "é"):
            self.assertIsNotNone(rc.topic_error(route, pattern=True), route)
        for route in ("", "a..b", "a.", "*", ">", "a.*", "a.>", "a*b", "a>b", "a b"):
            self.assertIsNotNone(rc.topic_error(route), route)
        with self.assertRaises(ValueError):  # the client refuses to send them
            rc.Client.publish(FakeClient(), "a.*", b"x")
        with self.assertRaises(ValueError):
            rc.Client.subscribe(FakeClient(), "a.>.b")

    def test_message_that_does_not_expand_is_dropped(self):
        """"Edge cases a receiver meets": a compressed Message that does not expand, or
        expands past the frame limit, is dropped and counted; the connection goes on."""
        room = rc.MAX_FRAME - rc.HEADER.size - len("a.b")
        packed_fits = gzip.compress(bytes(room))
        too_big = gzip.compress(bytes(room + 1))  # small on the wire, too big expanded
        sub = rc.Subscription(None, 1, "a.>", ("gzip",))
        for payload, flags in ((b"not gzip at all", rc.FLAG_GZIP), (b"", rc.FLAG_GZIP),
                               (packed_fits[:-4], rc.FLAG_GZIP), (too_big, rc.FLAG_GZIP),
                               (gzip.compress(b"x"), rc.FLAG_ZSTD)):  # no Zstandard here
            sub.on_message(rc.Frame(rc.MESSAGE, flags, 0, 1, 0, "a.b", [], payload))
        self.assertEqual((sub.received, sub.dropped, len(sub.messages)), (5, 5, 0))
        sub.on_message(rc.Frame(rc.MESSAGE, rc.FLAG_GZIP, 0, 1, 0, "a.b", [], packed_fits))
        self.assertEqual((sub.dropped, len(sub.messages[0].payload)), (5, room))  # exactly the room

    def test_client_files_messages_and_unsubscribes(self):
        """A client over a scripted server: Messages filed by subscription id, those for
        an id it no longer knows dropped, the server's Unsubscribe with an error body
        ending one; Subscribe ids count from 1 in a space of their own."""
        c, srv = fake_server()
        try:
            a = c.subscribe("orders.*.created")
            b = c.subscribe("orders.>", compression=("gzip",), metadata=[("k", b"v")])
            self.assertEqual((a.sid, b.sid, c.next_id), (1, 2, 1))  # call ids untouched
            got = recv_frames(srv, 2)
            self.assertEqual([(f.kind, f.call_id, f.route, f.metadata) for f in got],
                             [(rc.SUBSCRIBE, 1, "orders.*.created", []),
                              (rc.SUBSCRIBE, 2, "orders.>", [(rc.MD_COMPRESSION, b"gzip"), ("k", b"v")])])
            srv.sendall(bytes.fromhex(OfflinePubSub.MESSAGE) +
                        rc.encode_frame(rc.MESSAGE, 2, "orders.eu.created", gzip.compress(OfflinePubSub.ORDER),
                                        rc.CODEC_JSON, flags=rc.FLAG_GZIP) +
                        rc.encode_frame(rc.MESSAGE, 9, "x.y", b"stray") +
                        rc.encode_frame(rc.UNSUBSCRIBE, 1, payload=struct.pack(">H", rc.RESOURCE_EXHAUSTED) + b"no") +
                        rc.encode_frame(rc.MESSAGE, 1, "orders.us.created", b"late"))
            m = a.next()
            self.assertEqual((m.call_id, m.route, m.payload), (1, "orders.eu.created", b'{"id":42}'))
            m = b.next()
            self.assertEqual((m.call_id, m.flags, m.codec, m.payload), (2, 0, rc.CODEC_JSON, OfflinePubSub.ORDER))
            while c.stray_messages < 2:
                c.read_one()
            self.assertEqual((a.ended, a.live, b.live, list(c.subs)), ((rc.RESOURCE_EXHAUSTED, "no"), False, True, [2]))
            with self.assertRaises(rc.RpcError) as cm:
                a.next()
            self.assertEqual(cm.exception.code, rc.RESOURCE_EXHAUSTED)
            c.unsubscribe(b)
            c.publish("orders.eu.created", b'{"id":42}', rc.CODEC_JSON)
            self.assertEqual(recv_frames(srv, 2)[0].call_id, 2)
            self.assertEqual(c.subscribe("a").sid, 3)  # ids count on, past ended ones
            srv.sendall(rc.encode_frame(rc.PUBLISH, 0, "a", b"x"))  # the client's kind
            with self.assertRaises(rc.ProtocolError):
                c.read_one()
        finally:
            c.close()
            srv.close()

    def test_publish_example_from_client(self):
        c, srv = fake_server()
        try:
            c.publish("orders.eu.created", b'{"id":42}', rc.CODEC_JSON)
            c.subscribe("orders.*.created")
            c.unsubscribe(1)
            got = b"".join(recv_exact(srv, n) for n in (len(self.PUBLISH) // 2, len(self.SUBSCRIBE) // 2,
                                                       len(self.UNSUBSCRIBE) // 2))
            self.assertEqual(got.hex(), self.PUBLISH + self.SUBSCRIBE + self.UNSUBSCRIBE)
        finally:
            c.close()
            srv.close()


class FakeClient:
    """Enough of a Client for its methods to run their checks before sending."""
    goaway = None


def fake_server():
    """A Client connected to a socket this test plays the server on."""
    ls = socket.socket()
    try:
        ls.bind(("127.0.0.1", 0))
        ls.listen(1)
        c = rc.Client("127.0.0.1", ls.getsockname()[1], timeout=TIMEOUT)
        srv, _ = ls.accept()
    finally:
        ls.close()
    srv.settimeout(TIMEOUT)
    return c, srv


def recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return bytes(out)


def recv_frames(sock: socket.socket, n: int):
    """n frames the client sent, read off the server's end."""
    r = rc.FrameReader(sock)
    return [r.read_frame() for _ in range(n)]


class Live(unittest.TestCase):
    def setUp(self):
        self.c = connect()

    def tearDown(self):
        self.c.close()

    def test_json_sum(self):
        self.assertEqual(self.c.call_json("Math/Sum", {"a": 1, "b": 2}), 3)

    def test_response_header(self):
        # "A Response carries the codec of its Request."
        cid = self.c.send_request("Math/Sum", b'{"a":1,"b":2}', rc.CODEC_JSON)
        f = self.c.wait(cid)
        self.assertEqual((f.kind, f.call_id, f.codec, f.flags, f.route, f.deadline_ms),
                         (rc.RESPONSE, cid, rc.CODEC_JSON, 0, "", 0))
        self.assertEqual(json.loads(f.payload), 3)

    def test_json_with_deadline(self):
        self.assertEqual(self.c.call_json("Math/Sum", {"a": 40, "b": 2}, deadline_ms=1000), 42)

    def test_raw_echo_small_and_large(self):
        for size in (16, 100_000):
            body = os.urandom(size)
            self.assertEqual(self.c.call("Bench/EchoPacket", body, rc.CODEC_RAW), body, size)

    def test_echo_string(self):
        self.assertEqual(self.c.call_json("Bench/EchoString", "héllo, rpcd"), "héllo, rpcd")

    def test_sys_ping_and_routes(self):
        self.assertEqual(self.c.call_json("Sys/Ping"), "pong")
        names = {r["name"] for r in self.c.call_json("Sys/Routes")}
        for want in ("Math/Sum", "Bench/EchoPacket", "Bench/EchoString", "Sys/Ping"):
            self.assertIn(want, names)

    def test_pipelined_50(self):
        ids, blob = {}, bytearray()
        for i in range(50):
            cid, frame = self.c.request_frame(
                "Math/Sum", json.dumps({"a": i, "b": 1000}).encode(), rc.CODEC_JSON)
            ids[cid] = i + 1000
            blob += frame
        self.c.send_raw(bytes(blob))  # all 50 in one write, before any read
        self.assertEqual(len(ids), 50)
        for cid, want in ids.items():  # read all 50, each matched by its id
            f = self.c.wait(cid)
            self.assertEqual((f.call_id, json.loads(f.payload)), (cid, want))
        self.assertEqual(self.c.pending, set())

    def test_metadata_accepted(self):
        md = [("trace-id", b"4bf92f3577b34da6"), ("tenant", b"acme"), ("empty", b"")]
        self.assertEqual(self.c.call_json("Math/Sum", {"a": 2, "b": 3}, metadata=md), 5)
        self.assertEqual(self.c.call("Bench/EchoPacket", b"\x00\xff", metadata=md), b"\x00\xff")

    def test_unknown_route(self):
        with self.assertRaises(rc.RpcError) as cm:
            self.c.call_json("No/Such", {"x": 1})
        self.assertEqual(cm.exception.code, rc.NOT_FOUND)
        self.assertTrue(cm.exception.unprocessed, "Unprocessed flag (0x01) not set")
        # An unknown route is an error of one call: the connection stays open.
        self.assertEqual(self.c.call_json("Math/Sum", {"a": 1, "b": 1}), 2)

    def test_ping_pong(self):
        for payload in (b"", b"keepalive-1234", bytes(range(64))):
            self.c.send_raw(rc.encode_frame(rc.PING, 0, payload=payload))
            f = self.c.reader.read_frame()
            self.assertEqual((f.kind, f.call_id, f.codec, f.flags), (rc.PONG, 0, rc.CODEC_RAW, 0))
            self.assertEqual(f.payload, payload)
        self.assertEqual(self.c.ping(b"via-helper"), b"via-helper")

    def test_oneway_and_cancel(self):
        # "A one-way call: no Response and no Error are ever sent, even when the
        # route is unknown." Cancel of a finished call is harmless.
        self.c.oneway("No/Such", b"x")
        self.c.oneway("Math/Sum", b'{"a":1,"b":2}', rc.CODEC_JSON, metadata=[("k", b"v")])
        done = self.c.send_request("Sys/Ping", codec=rc.CODEC_JSON)
        self.c.wait(done)
        self.c.cancel(done)
        self.assertEqual(self.c.call_json("Math/Sum", {"a": 2, "b": 2}), 4)
        self.assertEqual(self.c.ping(b"end"), b"end")
        self.assertEqual(self.c.replies, {})

    def test_bad_arguments(self):
        # "A route that takes JSON answers a Request in another codec with Error
        # InvalidArgument"; undecodable arguments are InvalidArgument too.
        for payload, codec in ((b'{"a":1,"b":2}', rc.CODEC_RAW), (b"{bad", rc.CODEC_JSON)):
            with self.assertRaises(rc.RpcError) as cm:
                self.c.call("Math/Sum", payload, codec)
            self.assertEqual(cm.exception.code, rc.INVALID_ARGUMENT)
        self.assertEqual(self.c.call_json("Math/Sum", {"a": 1, "b": 1}), 2)

    # Arguments that do not decode are refused before the handler acts, so the
    # Error carries the Unprocessed flag (docs/protocol.md, Flags).
    def test_bad_arguments_unprocessed(self):
        for payload, codec in ((b'{"a":1,"b":2}', rc.CODEC_RAW), (b"{bad", rc.CODEC_JSON)):
            with self.assertRaises(rc.RpcError) as cm:
                self.c.call("Math/Sum", payload, codec)
            self.assertTrue(cm.exception.unprocessed, "bad arguments not flagged Unprocessed")

    def test_bad_magic_goaway(self):
        self.c.send_raw(b"XX" + rc.encode_frame(rc.PING, 0)[2:])
        f = self.c.reader.read_frame()
        self.assertEqual((f.kind, f.call_id, f.codec), (rc.GOAWAY, 0, rc.CODEC_RAW))
        last, code, msg = rc.parse_goaway(f.payload)
        self.assertEqual((last, code), (0, rc.INTERNAL), msg)  # no calls taken in yet
        # ... then the server closes the connection without reading further.
        self.assertIsNone(self.c.reader.read_frame(), "expected end of stream after GoAway")

    def test_goaway_names_last_call(self):
        cid = self.c.send_request("Math/Sum", b'{"a":1,"b":2}', rc.CODEC_JSON)
        self.c.send_raw(b"RD\x09" + bytes(21))  # unknown version: protocol error
        f = self.c.wait(cid)  # the call before the bad frame is still answered
        self.assertEqual(json.loads(f.payload), 3)
        while self.c.goaway is None:
            self.c.read_one()
        self.assertEqual((self.c.goaway.last_call_id, self.c.goaway.code), (cid, rc.INTERNAL))
        self.assertIsNone(self.c.reader.read_frame())
        with self.assertRaises(rc.GoAwayError):  # no new calls after GoAway
            self.c.send_request("Sys/Ping")


class LiveStreams(unittest.TestCase):
    """Streams against the built-in Bench/StreamSink and Bench/StreamSource."""

    def setUp(self):
        self.c = connect()

    def tearDown(self):
        self.c.close()

    def test_upload(self):
        st = self.c.open_stream("Bench/StreamSink", window=4096)
        size = 1 << 20 | 12345  # many times the server's window: writes wait for credit
        st.write(bytes(range(256)) * (size // 256) + bytes(size % 256))
        st.close_send()
        self.assertEqual(struct.unpack(">Q", st.read())[0], size)  # then StreamEnd, StreamReset 0
        self.assertNotIn(st.sid, self.c.streams)
        self.assertEqual(self.c.call_json("Math/Sum", {"a": 1, "b": 2}), 3)  # calls go on

    def test_download_two_at_once(self):
        a = self.c.open_stream("Bench/StreamSource", window=16384)
        b = self.c.open_stream("Bench/StreamSource", window=65536)
        self.assertEqual((a.sid, b.sid), (1, 3))  # odd ids: the client's
        for st, size in ((a, 300000), (b, 1 << 20)):
            st.write(struct.pack(">Q", size))
            st.close_send()
        got_b, got_a = b.read(), a.read()  # both flowed, each within its window
        self.assertEqual((len(got_a), len(got_b)), (300000, 1 << 20))
        self.assertEqual(got_a, got_b[:300000])  # the same pattern from the start

    def test_unknown_stream_route(self):
        st = self.c.open_stream("No/Such")
        with self.assertRaises(rc.RpcError) as cm:
            st.read()
        self.assertEqual(cm.exception.code, rc.NOT_FOUND)
        self.assertTrue(cm.exception.unprocessed)

    def test_cancel(self):
        st = self.c.open_stream("Bench/StreamSource", window=4096)
        st.write(struct.pack(">Q", 1 << 30))
        while len(st.data) < 4096:  # the window fills; the server waits for credit
            self.c.read_one()
        st.cancel()
        self.assertEqual(self.c.call_json("Math/Sum", {"a": 2, "b": 2}), 4)

    def test_overrun_is_a_protocol_error(self):
        st = self.c.open_stream("Bench/StreamSink")
        while st.credit == 0:
            self.c.read_one()
        self.c.send_raw(rc.encode_frame(rc.STREAM_DATA, st.sid, payload=bytes(st.credit + 1)))
        while self.c.goaway is None:
            self.c.read_one()
        self.assertEqual(self.c.goaway.code, rc.INTERNAL)
        self.assertIn("window", self.c.goaway.message)


def compressible(size: int) -> bytes:
    """size bytes of text that gzip shrinks many times over."""
    line = b"rpcd compresses payloads of 1 KiB or more, when that makes them smaller.\n"
    return (line * (size // len(line) + 1))[:size]


class LiveCompression(unittest.TestCase):
    """"Compression": a Hello naming gzip, its Welcome, gzipped calls and replies."""

    BIG = 32 * 1024

    def setUp(self):
        self.c = connect(compression=("gzip",))

    def tearDown(self):
        self.c.close()

    def test_welcome_names_gzip(self):
        w = self.c.welcome
        self.assertEqual((w.kind, w.call_id, w.flags, w.codec, w.route), (rc.WELCOME, 0, 0, rc.CODEC_RAW, ""))
        self.assertEqual(rc.first_value(w.metadata, rc.MD_COMPRESSION), b"zstd,gzip")
        self.assertEqual(self.c.peer_compressions, ["zstd", "gzip"])
        self.assertEqual(self.c.compression, rc.FLAG_GZIP)  # the one both take
        self.assertEqual(self.c.identity, "")  # a server that requires none
        self.assertEqual(self.c.call_json("Math/Sum", {"a": 1, "b": 2}), 3)

    def test_large_echo_compressed_both_ways(self):
        body = compressible(self.BIG)
        self.assertEqual(self.c.call("Bench/EchoPacket", body), body)
        cid, data = self.c.request_frame("Bench/EchoPacket", body)
        self.assertEqual(data[4], rc.FLAG_GZIP)  # the call went gzipped
        self.assertLess(len(data), self.BIG // 4)
        self.c.send_raw(data)
        raw = self.c.read_one()  # the Response as read off the socket
        self.assertEqual((raw.kind, raw.call_id, raw.codec), (rc.RESPONSE, cid, rc.CODEC_RAW))
        self.assertEqual(raw.flags & rc.COMPRESSION_MASK, rc.FLAG_GZIP, "reply not gzipped")
        self.assertLess(len(raw.payload), self.BIG // 4)
        self.assertEqual(gzip.decompress(raw.payload), body)
        f = self.c.wait(cid)  # the client expands it
        self.assertEqual((f.flags, f.payload), (0, body))

    def test_small_echo_uncompressed(self):
        body = compressible(100)
        cid, data = self.c.request_frame("Bench/EchoPacket", body)
        self.assertEqual(data[4], 0)  # under 1 KiB: sent as it is
        self.c.send_raw(data)
        raw = self.c.read_one()
        self.assertEqual((raw.kind, raw.call_id, raw.flags & rc.COMPRESSION_MASK), (rc.RESPONSE, cid, 0))
        self.assertEqual(raw.payload, body)
        self.assertEqual(self.c.wait(cid).payload, body)

    def test_bad_gzip_is_invalid_argument(self):
        # "a call whose payload does not expand (not valid data for its compression,
        # or empty) gets Error InvalidArgument with the Unprocessed flag; the
        # connection stays open."
        for payload in (b"this is not gzip data, only text", b""):
            cid = self.c.new_id()
            self.c.pending.add(cid)
            self.c.send_raw(rc.encode_frame(rc.REQUEST, cid, "Bench/EchoPacket", payload,
                                            flags=rc.FLAG_GZIP))
            raw = self.c.read_one()
            self.assertEqual((raw.kind, raw.call_id, raw.flags), (rc.ERROR, cid, rc.FLAG_UNPROCESSED),
                             "payload %r" % payload)
            self.assertEqual(rc.parse_error(raw.payload)[0], rc.INVALID_ARGUMENT)
            with self.assertRaises(rc.RpcError) as cm:
                self.c.wait(cid)
            self.assertEqual((cm.exception.code, cm.exception.unprocessed), (rc.INVALID_ARGUMENT, True))
        self.assertEqual(self.c.call_json("Math/Sum", {"a": 2, "b": 3}), 5)
        body = compressible(self.BIG)
        self.assertEqual(self.c.call("Bench/EchoPacket", body), body)
        self.assertIsNone(self.c.goaway)

    def test_no_hello_no_compression(self):
        plain = connect()  # no Hello: the server takes it to take no compression
        try:
            body = compressible(self.BIG)
            cid, data = plain.request_frame("Bench/EchoPacket", body)
            self.assertEqual((data[4], len(data)), (0, 24 + len("Bench/EchoPacket") + self.BIG))
            plain.send_raw(data)
            raw = plain.read_one()
            self.assertEqual((raw.kind, raw.call_id, raw.flags), (rc.RESPONSE, cid, 0))
            self.assertEqual(raw.payload, body)
            self.assertEqual(plain.wait(cid).payload, body)
            self.assertIsNone(plain.welcome)
        finally:
            plain.close()


def source_pattern(n: int) -> bytes:
    """What Bench/StreamSource sends, read off an uncompressed stream."""
    c = connect()
    try:
        st = c.open_stream("Bench/StreamSource", window=1 << 20)
        st.write(struct.pack(">Q", n))
        st.close_send()
        return st.read()
    finally:
        c.close()


class LiveStreamCompression(unittest.TestCase):
    """"Compression", Streams: a stream settles compression on its own frames, whatever
    the handshake said (these connections send no Hello)."""

    BIG = 1 << 20

    def setUp(self):
        self.c = connect()

    def tearDown(self):
        self.c.close()

    def accepted(self, st: rc.Stream) -> rc.Frame:
        while st.first_credit is None and st.reset is None:
            self.c.read_one()
        self.assertIsNotNone(st.first_credit, st.reset)
        return st.first_credit

    def test_first_credit_names_compressions(self):
        st = self.c.open_stream("Bench/StreamSink", compression=("gzip",))
        f = self.accepted(st)
        self.assertEqual((f.kind, f.call_id, f.flags, f.codec), (rc.STREAM_CREDIT, st.sid, 0, rc.CODEC_RAW))
        self.assertEqual(rc.first_value(f.metadata, rc.MD_COMPRESSION), b"zstd,gzip")
        self.assertEqual((st.peer_compressions, st.compression), (["zstd", "gzip"], rc.FLAG_GZIP))
        st.close_send()
        self.assertEqual(struct.unpack(">Q", st.read())[0], 0)

    def test_upload_compressed(self):
        body = compressible(self.BIG)
        for window in (65536, 4096):  # 32 KiB frames, or frames cut to the credit
            st = self.c.open_stream("Bench/StreamSink", window=window, compression=("gzip",))
            st.write(body)  # credit counted by the bytes before compression
            st.close_send()
            # The sink counts the bytes once expanded.
            self.assertEqual(struct.unpack(">Q", st.read())[0], self.BIG)
            self.assertEqual(st.compression, rc.FLAG_GZIP)
            self.assertGreater(st.frames_out, 1)
            self.assertEqual(st.gzip_frames_out, st.frames_out, "every frame of 1 KiB or more shrinks")
            self.assertLess(st.wire_out, self.BIG // 10)
            self.assertEqual((st.frames_in, st.gzip_frames_in), (1, 0))  # 8 bytes: as they are
        self.assertEqual(self.c.call_json("Math/Sum", {"a": 1, "b": 2}), 3)
        self.assertIsNone(self.c.goaway)

    def test_download_compressed(self):
        want = source_pattern(self.BIG)
        for window in (65536, 4096):  # the server's frames: 32 KiB, or cut to our window
            st = self.c.open_stream("Bench/StreamSource", window=window, compression=("gzip",))
            st.write(struct.pack(">Q", self.BIG))
            st.close_send()
            self.assertEqual(st.read(), want, "window %d" % window)
            self.assertEqual(st.gzip_frames_out, 0)  # 8 bytes go as they are
            self.assertGreater(st.gzip_frames_in, 1, "no StreamData arrived gzipped")
            self.assertLess(st.wire_in, self.BIG // 4)
        self.assertIsNone(self.c.goaway)

    def test_without_option_as_before(self):
        want = source_pattern(self.BIG)
        st = self.c.open_stream("Bench/StreamSource", window=65536)
        st.write(struct.pack(">Q", self.BIG))
        st.close_send()
        self.assertEqual(st.read(), want)
        self.assertIsNone(rc.first_value(st.first_credit.metadata, rc.MD_COMPRESSION))
        self.assertEqual((st.peer_compressions, st.compression, st.gzip_frames_in), ([], 0, 0))
        self.assertEqual(st.wire_in, self.BIG)
        up = self.c.open_stream("Bench/StreamSink")
        up.write(compressible(self.BIG))
        up.close_send()
        self.assertEqual(struct.unpack(">Q", up.read())[0], self.BIG)
        self.assertIsNone(rc.first_value(up.first_credit.metadata, rc.MD_COMPRESSION))
        self.assertEqual((up.gzip_frames_out, up.wire_out), (0, self.BIG))

    def test_with_hello_but_without_option(self):
        # The handshake's lists speak of calls alone: no stream compression unasked.
        c = connect(compression=("gzip",))
        try:
            st = c.open_stream("Bench/StreamSource", window=65536)
            st.write(struct.pack(">Q", 100000))
            st.close_send()
            self.assertEqual(len(st.read()), 100000)
            self.assertIsNone(rc.first_value(st.first_credit.metadata, rc.MD_COMPRESSION))
            self.assertEqual(st.gzip_frames_in, 0)
        finally:
            c.close()

    def test_bad_gzip_resets_stream(self):
        # "A compressed StreamData that does not expand (not valid data for its
        # compression, or empty) finishes that stream: the receiver sends StreamReset
        # InvalidArgument (3) ...; the connection and its other streams go on."
        other = self.c.open_stream("Bench/StreamSink", compression=("gzip",))
        other.write(b"before ")
        for bad in (b"this is not gzip data, only text", b""):
            st = self.c.open_stream("Bench/StreamSink", compression=("gzip",))
            self.accepted(st)
            self.c.send_raw(rc.encode_frame(rc.STREAM_DATA, st.sid, payload=bad, flags=rc.FLAG_GZIP))
            with self.assertRaises(rc.RpcError) as cm:
                st.read()
            self.assertEqual(cm.exception.code, rc.INVALID_ARGUMENT, "payload %r" % bad)
            self.assertNotIn(st.sid, self.c.streams)
        self.assertEqual(self.c.call_json("Math/Sum", {"a": 2, "b": 3}), 5)
        other.write(compressible(100000))
        other.close_send()
        self.assertEqual(struct.unpack(">Q", other.read())[0], 7 + 100000)
        self.assertIsNone(self.c.goaway)

    def test_gzip_on_stream_that_named_none(self):
        # "A receiver expands a StreamData compressed in any compression it does,
        # named or not" (a sender must not count on that; this checks rpcd does).
        st = self.c.open_stream("Bench/StreamSink")
        self.accepted(st)
        body = compressible(20000)
        self.c.send_raw(rc.encode_frame(rc.STREAM_DATA, st.sid, payload=gzip.compress(body),
                                        flags=rc.FLAG_GZIP))
        st.credit -= len(body)
        st.close_send()
        self.assertEqual(struct.unpack(">Q", st.read())[0], len(body))

    def test_expansion_past_credit_is_protocol_error(self):
        # "A compressed StreamData that expands to more than the credit the receiver
        # has granted is a protocol error, as uncompressed data past the window is."
        st = self.c.open_stream("Bench/StreamSink", compression=("gzip",))
        self.accepted(st)
        packed = gzip.compress(bytes(st.credit + 1))
        self.assertLess(len(packed), st.credit)  # small on the wire, too big expanded
        self.c.send_raw(rc.encode_frame(rc.STREAM_DATA, st.sid, payload=packed, flags=rc.FLAG_GZIP))
        while self.c.goaway is None:
            self.c.read_one()
        self.assertEqual(self.c.goaway.code, rc.INTERNAL, self.c.goaway.message)


def unique_token() -> str:
    """A topic token of this run alone, so that tests do not see each other's messages."""
    return "t" + os.urandom(6).hex()


def read_until(c: rc.Client, sub: rc.Subscription, topic: str) -> None:
    """Read frames until sub got a Message for topic (a marker published last)."""
    while not any(m.route == topic for m in sub.messages):
        c.read_one()


def topics(sub: rc.Subscription):
    return [m.route for m in sub.messages]


class LivePubSub(unittest.TestCase):
    """"Publish and subscribe" against rpcd: a subscriber (self.s) and a publisher on
    another connection (self.p). Messages from one publisher's connection reach each
    subscriber in the order published, so a marker published last, once received,
    says every earlier matching Message has arrived."""

    def setUp(self):
        self.t = unique_token()
        self.s, self.p = connect(), connect()

    def tearDown(self):
        self.s.close()
        self.p.close()

    def test_wildcard_delivery_in_order(self):
        t = self.t
        sub = self.s.subscribe(t + ".*.created", confirm=True)
        self.assertEqual((sub.sid, sub.live, sub.ended), (1, True, None))
        want = []
        for i in range(40):
            region = ("eu", "us", "asia")[i % 3]
            self.p.publish_json("%s.%s.created" % (t, region), {"i": i})
            want.append(("%s.%s.created" % (t, region), {"i": i}))
            for miss in ("%s.%s.updated", "%s.created", "%s.%s.x.created", "%s.%s.created.x"):
                self.p.publish(miss.replace("%s", t, 1).replace("%s", region), b"no")
        self.p.publish(t + ".raw.created", b"\x00\xff", rc.CODEC_RAW)
        self.p.publish(t + ".user.created", b"opaque", 0x80)  # any codec, passed on as is
        self.p.publish(t + ".end.created")                   # an empty payload
        read_until(self.s, sub, t + ".end.created")
        got = list(sub.messages)
        self.assertEqual([(m.route, json.loads(m.payload)) for m in got[:40]], want)
        for m in got:
            self.assertEqual((m.kind, m.call_id, m.flags, m.deadline_ms), (rc.MESSAGE, sub.sid, 0, 0))
        self.assertEqual([m.codec for m in got[:40]], [rc.CODEC_JSON] * 40)
        self.assertEqual([(m.route, m.codec, m.payload) for m in got[40:]],
                         [(t + ".raw.created", rc.CODEC_RAW, b"\x00\xff"),
                          (t + ".user.created", 0x80, b"opaque"), (t + ".end.created", rc.CODEC_RAW, b"")])
        # "A client's own subscriptions get its publications like anyone's."
        sub.messages.clear()
        for i in range(5):
            self.s.publish_json(t + ".self.created", i)
        self.s.publish(t + ".self.updated", b"no")
        self.s.publish(t + ".end.created")
        read_until(self.s, sub, t + ".end.created")
        self.assertEqual([json.loads(m.payload) for m in list(sub.messages)[:-1]], list(range(5)))
        self.assertEqual((sub.dropped, self.s.stray_messages, self.s.goaway), (0, 0, None))
        self.assertEqual(self.s.call_json("Math/Sum", {"a": 1, "b": 2}), 3)  # calls go on

    def test_star_and_gt(self):
        """`*` matches exactly one token, a final `>` one or more; a connection with
        several matching subscriptions gets one Message per subscription."""
        t = self.t
        patterns = (t, t + ".*", t + ".>", t + ".*.x", t + ".*.>", "*." + t, ">")
        subs = [self.s.subscribe(pat) for pat in patterns]
        self.assertEqual([s.sid for s in subs], list(range(1, len(patterns) + 1)))
        self.s.sync()
        published = [t, t + ".a", t + ".a.b", t + ".a.b.c", t + ".b.x", t + ".b.x.y",
                     "a." + t, "a." + t + ".b", t + "x.a", "x" + t]
        for topic in published:
            self.p.publish(topic, topic.encode())
        self.p.publish(t + ".end")
        want = {
            t: [t],
            t + ".*": [t + ".a"],
            t + ".>": [t + ".a", t + ".a.b", t + ".a.b.c", t + ".b.x", t + ".b.x.y"],
            t + ".*.x": [t + ".b.x"],
            t + ".*.>": [t + ".a.b", t + ".a.b.c", t + ".b.x", t + ".b.x.y"],
            "*." + t: ["a." + t],
            ">": published,
        }
        # Each subscription's Messages come in the order published; the page does not
        # order those of different subscriptions, so wait for each one's count, and for
        # the marker on ">", published last (any Message that should not come, comes
        # before it).
        while len(subs[-1].messages) <= len(published) or any(
                len(sub.messages) < len(want[pat]) for pat, sub in zip(patterns, subs)):
            self.s.read_one()
        self.assertEqual(subs[-1].messages[-1].route, t + ".end")
        for pat, sub in zip(patterns, subs):
            got = [x for x in topics(sub) if x != t + ".end"]
            self.assertEqual(got, want[pat], pat)
            self.assertEqual(got, [x for x in published if rc.topic_matches(pat, x)], pat)
            for m in sub.messages:
                self.assertEqual((m.call_id, m.payload), (sub.sid, m.route.encode() if m.route != t + ".end" else b""))

    def test_unsubscribe_stops_delivery(self):
        t = self.t
        a = self.s.subscribe(t + ".a")
        b = self.s.subscribe(t + ".>", confirm=True)
        self.p.publish(t + ".a", b"1")
        read_until(self.s, a, t + ".a")  # one Message per subscription, in no set order
        read_until(self.s, b, t + ".a")
        self.assertEqual((topics(a), topics(b)), ([t + ".a"], [t + ".a"]))
        self.s.unsubscribe(a)
        self.assertFalse(a.live)
        self.s.unsubscribe(999)  # "An unknown id is ignored."
        self.s.sync()            # the Unsubscribes are taken in
        self.p.publish(t + ".a", b"2")
        self.p.publish(t + ".end")
        read_until(self.s, b, t + ".end")
        self.assertEqual([m.payload for m in a.messages], [b"1"])
        self.assertEqual([m.payload for m in b.messages], [b"1", b"2", b""])
        self.assertEqual((self.s.stray_messages, self.s.goaway), (0, None))
        # The id of an ended subscription is free again on the server.
        self.s.send_raw(rc.encode_frame(rc.SUBSCRIBE, a.sid, t + ".c"))
        self.s.subs[a.sid] = again = rc.Subscription(self.s, a.sid, t + ".c")
        again.confirm()
        self.p.publish(t + ".c", b"3")
        self.assertEqual(again.next().payload, b"3")

    def test_gzip_per_subscription(self):
        """"**Messages** are compressed per subscription": a Subscribe naming gzip gets
        Messages of 1 KiB or more that shrink gzipped, and expands them to what was
        published; one without the key gets them as published, whatever its
        connection's Hello said; the codec stays the one published."""
        t = self.t
        gz = self.s.subscribe(t + ".>", compression=("gzip",))
        plain_conn, hello_conn = connect(), connect(compression=("gzip",))
        try:
            self.assertEqual(hello_conn.compression, rc.FLAG_GZIP)  # calls would be gzipped
            plain = plain_conn.subscribe(t + ".>", confirm=True)
            hello = hello_conn.subscribe(t + ".>", confirm=True)
            gz.confirm()
            big = json.dumps([{"id": i % 7, "status": "created", "items": ["a", "b"]}
                              for i in range(200)]).encode()[:8192 - 2] + b"]}"
            self.assertGreaterEqual(len(big), 8 * 1024)
            cases = [("big", big, rc.CODEC_JSON, True), ("small", big[:1000], rc.CODEC_RAW, False),
                     ("min", compressible(1024), 0x80, True), ("under", compressible(1023), 0x80, False),
                     ("random", os.urandom(8192), rc.CODEC_RAW, False)]  # gzip makes it no smaller
            for name, payload, codec, _ in cases:
                self.p.publish("%s.%s" % (t, name), payload, codec)
            for c, sub, takes in ((self.s, gz, True), (plain_conn, plain, False), (hello_conn, hello, False)):
                for name, payload, codec, shrinks in cases:
                    raw = c.read_one()  # the Message as on the wire
                    self.assertEqual((raw.kind, raw.call_id, raw.route, raw.codec),
                                     (rc.MESSAGE, sub.sid, "%s.%s" % (t, name), codec))
                    flag = raw.flags & rc.COMPRESSION_MASK
                    if takes and shrinks:
                        self.assertEqual(flag, rc.FLAG_GZIP, name)
                        self.assertLess(len(raw.payload), len(payload) // 2, name)
                        self.assertEqual(gzip.decompress(raw.payload), payload, name)
                    else:
                        self.assertEqual((flag, raw.payload), (0, payload), name)
                    m = sub.messages.popleft()  # what the subscriber hands on
                    self.assertEqual((m.flags, m.codec, m.payload), (0, codec, payload), name)
                self.assertEqual((sub.received, sub.dropped), (len(cases), 0))
            self.assertEqual(gz.gzip_in, 2)
        finally:
            plain_conn.close()
            hello_conn.close()

    def test_message_that_does_not_expand_is_dropped(self):
        """A subscriber that names a compression it cannot expand (zstd: Python's
        standard library has none) gets Messages it drops and counts ("Edge cases a
        receiver meets"); its connection goes on."""
        t = self.t
        sid = self.s.new_subscription_id()
        self.s.subs[sid] = sub = rc.Subscription(self.s, sid, t + ".>")
        self.s.send_raw(rc.encode_frame(rc.SUBSCRIBE, sid, t + ".>",
                                        metadata=[(rc.MD_COMPRESSION, b"zstd")]))
        sub.confirm()
        self.p.publish(t + ".big", compressible(8192))
        self.p.publish(t + ".small", b"small")
        self.assertEqual(sub.next().payload, b"small")
        self.assertEqual((sub.received, sub.dropped, sub.gzip_in), (2, 1, 0))
        self.assertEqual(self.s.call_json("Math/Sum", {"a": 1, "b": 2}), 3)

    def test_subscription_limit(self):
        """rpcd takes 1,024 subscriptions per connection and refuses the next with an
        Unsubscribe for its id, ResourceExhausted "too many subscriptions", before it
        answers a Request sent after it."""
        t = self.t
        subs = [self.s.subscribe("%s.%d" % (t, i)) for i in range(rc.MAX_SUBSCRIPTIONS + 1)]
        with self.assertRaises(rc.RpcError) as cm:
            subs[-1].confirm()
        self.assertEqual(cm.exception.code, rc.RESOURCE_EXHAUSTED)
        self.assertIn("too many subscriptions", cm.exception.message)
        self.assertEqual(subs[-1].ended[0], rc.RESOURCE_EXHAUSTED)
        self.assertFalse(subs[-1].live)
        self.assertEqual(sum(s.live for s in subs), rc.MAX_SUBSCRIPTIONS)
        self.s.unsubscribe(subs[0])  # room for one more
        again = self.s.subscribe(t + ".again", confirm=True)
        self.assertEqual(again.sid, rc.MAX_SUBSCRIPTIONS + 2)
        self.p.publish(t + ".again", b"x")
        self.p.publish("%s.%d" % (t, rc.MAX_SUBSCRIPTIONS - 1), b"y")
        self.assertEqual((again.next().payload, subs[-2].next().payload), (b"x", b"y"))
        self.assertIsNone(self.s.goaway)

    def goaway_for(self, data: bytes, why: str) -> None:
        """data sent on a new connection is a protocol error: GoAway Internal, then close."""
        c = connect()
        try:
            c.send_raw(data)
            f = c.reader.read_frame()
            self.assertIsNotNone(f, why)
            self.assertEqual(f.kind, rc.GOAWAY, why)
            last, code, msg = rc.parse_goaway(f.payload)
            self.assertEqual((last, code), (0, rc.INTERNAL), "%s: %s" % (why, msg))
            try:  # ... then the server closes without reading further
                self.assertIsNone(c.reader.read_frame(), why)
            except ConnectionResetError:  # it closed with our bytes unread
                pass
        finally:
            c.close()

    def test_malformed_pattern_is_protocol_error(self):
        for pattern in ("a..b", ".a", "a.", "a.>.b", ">.a", "a*", "a.b*", "*a", ">a", "a>", "a.**"):
            self.goaway_for(rc.encode_frame(rc.SUBSCRIBE, 1, pattern), "pattern %r" % pattern)

    def test_malformed_topic_is_protocol_error(self):
        for topic in ("a..b", ".a", "a.", "*", ">", "a.*", "a.>", "a*b", "a.b>"):
            self.goaway_for(rc.encode_frame(rc.PUBLISH, 0, topic, b"x"), "topic %r" % topic)

    def test_pubsub_header_rules_are_protocol_errors(self):
        """"Rules per kind", "Flags", and the frames the server may not receive."""
        E = rc.encode_frame
        for why, data in (
                ("Subscribe without a route", E(rc.SUBSCRIBE, 1)),
                ("Subscribe id 0", E(rc.SUBSCRIBE, 0, "a")),
                ("Subscribe with a payload", E(rc.SUBSCRIBE, 1, "a", b"x")),
                ("Subscribe codec JSON", E(rc.SUBSCRIBE, 1, "a", codec=rc.CODEC_JSON)),
                ("Subscribe gzip", E(rc.SUBSCRIBE, 1, "a", flags=rc.FLAG_GZIP)),
                ("Subscribe id in use", E(rc.SUBSCRIBE, 1, "a") + E(rc.SUBSCRIBE, 1, "b")),
                ("Unsubscribe 1-byte body", E(rc.UNSUBSCRIBE, 1, payload=b"x")),
                ("Unsubscribe id 0", E(rc.UNSUBSCRIBE, 0)),
                ("Publish without a route", E(rc.PUBLISH, 0, payload=b"x")),
                ("Publish id 1", E(rc.PUBLISH, 1, "a", b"x")),
                ("Publish deadline", E(rc.PUBLISH, 0, "a", b"x", deadline_ms=5)),
                ("Publish gzip", E(rc.PUBLISH, 0, "a", gzip.compress(compressible(2000)), flags=rc.FLAG_GZIP)),
                ("Message from a client", E(rc.MESSAGE, 1, "a", b"x"))):
            self.goaway_for(data, why)


class LiveTopicPermissions(unittest.TestCase):
    """"Permissions" against a second rpcd with topic permissions (interop_test.go), at
    the address in $RPCD_INTEROP_TOPICS: tokens tokA (alice, a reader: she may subscribe
    to orders.eu.> but not secrets.>, nor >, nor publish) and tokW (wendy, a writer: she
    may publish orders.>)."""

    def setUp(self):
        addr = os.environ.get("RPCD_INTEROP_TOPICS")
        if not addr:
            self.skipTest("no server with topic permissions ($RPCD_INTEROP_TOPICS)")
        host, _, port = addr.rpartition(":")
        self.addr = (host.strip("[]"), int(port))
        self.alice, self.wendy = self.connect(b"tokA"), self.connect(b"tokW")
        self.assertEqual((self.alice.identity, self.wendy.identity), ("alice", "wendy"))

    def tearDown(self):
        self.alice.close()
        self.wendy.close()

    def connect(self, token: bytes) -> rc.Client:
        c = rc.Client(self.addr[0], self.addr[1], timeout=TIMEOUT)
        c.hello((), credentials=token, method="token")
        return c

    def test_refused_subscribe_is_an_unsubscribe(self):
        for pattern in ("secrets.>", ">", "*.payroll"):
            sub = self.alice.subscribe(pattern)
            with self.assertRaises(rc.RpcError) as cm:
                sub.confirm()
            self.assertEqual((cm.exception.code, cm.exception.message),
                             (rc.PERMISSION_DENIED, "alice may not subscribe to " + pattern))
            self.assertFalse(sub.live)
        self.assertIsNone(self.alice.goaway)  # the connection goes on

    def test_refused_publish_is_an_error_of_id_0(self):
        t = unique_token()
        sub = self.alice.subscribe("orders.eu." + t, confirm=True)
        self.alice.publish("orders.eu." + t, b"forged")  # a reader may not publish
        self.alice.publish("secrets.payroll", b"salary 0")
        self.alice.sync()  # every refusal of the Publishes before it has arrived
        self.assertEqual(self.alice.publish_refusals, [
            (rc.PERMISSION_DENIED, "alice may not publish to orders.eu." + t, True),
            (rc.PERMISSION_DENIED, "alice may not publish to secrets.payroll", True)])
        self.wendy.publish("orders.eu." + t, b"from wendy")  # a writer may
        self.wendy.sync()
        self.assertEqual(self.wendy.publish_refusals, [])
        m = sub.next()
        self.assertEqual((m.route, m.payload), ("orders.eu." + t, b"from wendy"))  # not alice's
        self.assertEqual(self.alice.call_json("Math/Sum", {"a": 1, "b": 2}), 3)  # calls go on


def record_sent(c: rc.Client):
    """Keep, decoded, every frame c sends from now on (a list, returned)."""
    sent, send = [], c.send_raw

    def send_raw(data: bytes) -> None:
        r = FakeSocketReader(data)
        f = r.read_frame()
        while f is not None:
            sent.append(f)
            f = r.read_frame()
        send(data)

    c.send_raw = send_raw
    return sent


def read_to_ping(c: rc.Client) -> None:
    """Read (and serve) frames up to a Ping from the scripted server, answered by a Pong."""
    while c.read_one().kind != rc.PING:
        pass


def error_of(f: rc.Frame):
    """(kind, call id, code, Unprocessed) of an Error frame."""
    return f.kind, f.call_id, rc.parse_error(f.payload)[0], bool(f.flags & rc.FLAG_UNPROCESSED)


class OfflineCallsFromServer(unittest.TestCase):
    """"Calls from the server" against a scripted server: the client answers each
    Request with the server's id, refuses as a server does, never answers a OneWay,
    and honours Cancel; headers of the call kinds follow "Rules per kind"."""

    def setUp(self):
        self.c, self.srv = fake_server()
        self.seen = []

    def tearDown(self):
        self.c.close()
        self.srv.close()

    def keep(self, answer):
        """A handler that keeps each call it gets, then answers with answer(call)."""
        def fn(call):
            self.seen.append(call)
            return answer(call)
        return fn

    def test_answers_with_the_servers_id(self):
        E = rc.encode_frame
        self.c.handle("Client/Double", self.keep(lambda call: b"a:" + call.payload))
        self.c.handle("Client/Big", lambda call: bytes(rc.MAX_FRAME - rc.HEADER.size + int(call.payload)))
        mine = self.c.send_request("Ask/Client", b"42")  # the client's id 1, in flight
        self.assertEqual(mine, 1)
        recv_frames(self.srv, 1)
        got = []  # the answers are megabytes: read them as they come
        reader = threading.Thread(target=lambda: got.extend(recv_frames(self.srv, 10)))
        reader.start()
        room = rc.MAX_FRAME - rc.HEADER.size - len("Client/Double")
        md = [("k", b"v"), ("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")]
        self.srv.sendall(
            E(rc.REQUEST, 1, "Client/Double", b"42", rc.CODEC_JSON, deadline_ms=250, metadata=md) +
            E(rc.REQUEST, 2, "No/Such", b"x") +
            E(rc.REQUEST, 3, "No/Such", b"not gzip", flags=rc.FLAG_GZIP) +   # NotFound first
            E(rc.REQUEST, 4, "Client/Double", b"not gzip", flags=rc.FLAG_GZIP) +
            E(rc.REQUEST, 5, "Client/Double", gzip.compress(b"7" * 2000), 0x80, flags=rc.FLAG_GZIP) +
            E(rc.REQUEST, 6, "Client/Double", gzip.compress(bytes(room + 1)), flags=rc.FLAG_GZIP) +
            E(rc.REQUEST, 7, "Client/Double", b"", flags=rc.FLAG_GZIP) +      # empty: does not expand
            E(rc.REQUEST, 8, "Client/Double", gzip.compress(bytes(room)), flags=rc.FLAG_GZIP) +
            E(rc.REQUEST, 9, "Client/Big", b"1") +  # a reply over the frame limit
            E(rc.REQUEST, 10, "Client/Big", b"0") +  # a reply of exactly the limit
            E(rc.RESPONSE, 1, payload=b"done"))
        self.assertEqual(self.c.wait(mine).payload, b"done")  # our id 1 is not theirs
        reader.join(TIMEOUT)
        self.assertEqual(len(got), 10)  # one answer per Request, in the order read
        self.assertEqual((got[0].kind, got[0].call_id, got[0].codec, got[0].flags, got[0].payload),
                         (rc.RESPONSE, 1, rc.CODEC_JSON, 0, b"a:42"))  # the codec of its Request
        self.assertEqual((got[4].kind, got[4].call_id, got[4].codec, got[4].flags, got[4].payload),
                         (rc.RESPONSE, 5, 0x80, 0, b"a:" + b"7" * 2000))  # expanded; answered as it is
        self.assertEqual((got[7].kind, got[7].call_id, len(got[7].payload)), (rc.RESPONSE, 8, room + 2))
        self.assertEqual((got[9].kind, got[9].call_id, len(got[9].payload)),
                         (rc.RESPONSE, 10, rc.MAX_FRAME - rc.HEADER.size))
        self.assertEqual([error_of(f) for f in got[1:4] + got[5:7] + got[8:9]],
                         [(rc.ERROR, 2, rc.NOT_FOUND, True),
                          (rc.ERROR, 3, rc.NOT_FOUND, True),  # before its payload is looked at
                          (rc.ERROR, 4, rc.INVALID_ARGUMENT, True),
                          (rc.ERROR, 6, rc.RESOURCE_EXHAUSTED, True),  # expands past its room
                          (rc.ERROR, 7, rc.INVALID_ARGUMENT, True),
                          # "a reply larger than the frame limit": the handler ran, so no
                          # Unprocessed
                          (rc.ERROR, 9, rc.RESOURCE_EXHAUSTED, False)])
        first, big, last = self.seen
        self.assertEqual((first.kind, first.call_id, first.route, first.codec, first.deadline_ms,
                          first.metadata, first.payload, first.wire_flags),
                         (rc.REQUEST, 1, "Client/Double", rc.CODEC_JSON, 250, md, b"42", 0))
        self.assertEqual((big.payload, big.wire_flags, big.frame.flags), (b"7" * 2000, rc.FLAG_GZIP, 0))
        self.assertEqual(len(last.payload), room)  # exactly the room its frame has
        self.assertEqual((self.c.serving, self.c.pending, self.c.replies), ({}, set(), {}))

    def test_handler_errors_later_and_cancel(self):
        E = rc.encode_frame

        def deny(call):
            raise rc.RpcError(rc.PERMISSION_DENIED, "not you")

        def busy(call):
            raise rc.RpcError(rc.ABORTED, "try again", unprocessed=True)

        def crash(call):
            raise KeyError("oops")

        self.c.handle("Client/Deny", deny)
        self.c.handle("Client/Busy", busy)
        self.c.handle("Client/Crash", crash)
        self.c.handle("Client/Str", lambda call: "not bytes")
        self.c.handle("Client/Hold", self.keep(lambda call: rc.LATER))
        self.c.handle("Client/News", self.keep(lambda call: b"dropped"))
        self.srv.sendall(
            E(rc.REQUEST, 1, "Client/Deny") + E(rc.REQUEST, 2, "Client/Busy") +
            E(rc.REQUEST, 3, "Client/Crash") + E(rc.REQUEST, 4, "Client/Str") +
            E(rc.REQUEST, 5, "Client/Hold", b"held") +
            E(rc.REQUEST, 5, "Client/Hold", b"again") +   # its id still in flight
            E(rc.REQUEST, 6, "Client/Hold", b"to cancel", deadline_ms=50) +
            E(rc.CANCEL, 6) +                             # the client skips its reply
            E(rc.CANCEL, 99) +                            # never saw it: ignored
            E(rc.ONEWAY, 7, "Client/News", b"push") +     # never answered, whatever it returns
            E(rc.ONEWAY, 8, "No/Such", b"x") +            # logged, not answered
            E(rc.ONEWAY, 9, "Client/Crash") +             # logged, not answered
            E(rc.ONEWAY, 10, "Client/Hold", b"not gzip", flags=rc.FLAG_GZIP) +  # logged
            E(rc.PING, 0, payload=b"end"))
        read_to_ping(self.c)
        held, cancelled, push = self.seen
        self.assertEqual((held.call_id, held.payload, cancelled.call_id, cancelled.cancelled),
                         (5, b"held", 6, True))
        self.assertEqual(sorted(self.c.serving), [5])
        held.reply(b"later")
        cancelled.reply(b"skipped")
        cancelled.fail(rc.INTERNAL, "skipped too")
        self.assertIsNone(cancelled.answer)
        with self.assertRaises(ValueError):
            push.reply(b"x")  # a OneWay is never answered
        with self.assertRaises(ValueError):
            held.reply(b"twice")
        self.c.send_raw(E(rc.PING, 0, payload=b"mark"))  # bounds what the server reads
        self.srv.sendall(E(rc.PING, 0, payload=b"mark"))
        read_to_ping(self.c)
        r = rc.FrameReader(self.srv)
        got = [r.read_frame() for _ in range(8)]
        self.assertEqual([error_of(f) for f in got[:5]],
                         [(rc.ERROR, 1, rc.PERMISSION_DENIED, False), (rc.ERROR, 2, rc.ABORTED, True),
                          (rc.ERROR, 3, rc.UNKNOWN, False), (rc.ERROR, 4, rc.UNKNOWN, False),
                          (rc.ERROR, 5, rc.INVALID_ARGUMENT, True)])  # id 5 in flight: refused
        self.assertEqual(rc.parse_error(got[0].payload)[1], "not you")
        # Nothing for ids 6 to 10 (cancelled, OneWays): the Pong, then what came later.
        self.assertEqual([(f.kind, f.call_id, f.payload) for f in got[5:]],
                         [(rc.PONG, 0, b"end"), (rc.RESPONSE, 5, b"later"), (rc.PING, 0, b"mark")])
        self.assertEqual((push.kind, push.call_id, push.payload), (rc.ONEWAY, 7, b"push"))
        self.assertEqual([(i, r) for i, r, _ in self.c.oneway_log],
                         [(8, "No/Such"), (9, "Client/Crash"), (10, "Client/Hold")])
        self.assertEqual((self.c.serving, self.c.stray_cancels), ({}, 1))
        self.c.send_raw(E(rc.CANCEL, 5))  # a Cancel from the client names its own call
        self.assertIsNone(self.c.goaway)

    def test_call_header_rules(self):
        """"Rules per kind" for the call kinds, and a route byte outside 0x21-0x7E."""
        E = rc.encode_frame
        bad = {
            "Request id 0": E(rc.REQUEST, 0, "A/B"),
            "Request no route": E(rc.REQUEST, 1),
            "Request Unprocessed": E(rc.REQUEST, 1, "A/B", flags=rc.FLAG_UNPROCESSED),
            "Request route byte 0x7f": E(rc.REQUEST, 1, "A/\x7f"),
            "OneWay id 0": E(rc.ONEWAY, 0, "A/B"),
            "OneWay no route": E(rc.ONEWAY, 1),
            "OneWay route space": E(rc.ONEWAY, 1, "A B"),
            "Response id 0": E(rc.RESPONSE, 0),
            "Response route": E(rc.RESPONSE, 1, "A/B"),
            "Response deadline": E(rc.RESPONSE, 1, deadline_ms=5),
            "Response Unprocessed": E(rc.RESPONSE, 1, flags=rc.FLAG_UNPROCESSED),
            "Error codec JSON": E(rc.ERROR, 1, payload=b"\x00\x05", codec=rc.CODEC_JSON),
            "Error route": E(rc.ERROR, 1, "A/B", b"\x00\x05"),
            "Error deadline": E(rc.ERROR, 1, payload=b"\x00\x05", deadline_ms=5),
            "Error 1 byte": E(rc.ERROR, 1, payload=b"\x05"),
            "Cancel payload": E(rc.CANCEL, 1, payload=b"x"),
            "Cancel route": E(rc.CANCEL, 1, "A/B"),
            "Cancel codec JSON": E(rc.CANCEL, 1, codec=rc.CODEC_JSON),
            "Cancel deadline": E(rc.CANCEL, 1, deadline_ms=5),
            "Cancel id 0": E(rc.CANCEL, 0),
            "Cancel Unprocessed": E(rc.CANCEL, 1, flags=rc.FLAG_UNPROCESSED),
        }
        for name, data in bad.items():
            with self.assertRaises(rc.ProtocolError, msg=name):
                FakeSocketReader(data).read_frame()
        good = (E(rc.REQUEST, 0xFFFFFFFF, "A/B", b"x", 0x80, deadline_ms=0xFFFFFFFF),
                E(rc.ONEWAY, 1, "~" * rc.MAX_ROUTE, b"", rc.CODEC_JSON, deadline_ms=5),
                E(rc.RESPONSE, 1, payload=b"x", codec=0x42), E(rc.ERROR, 1, payload=b"\x00\x05"),
                E(rc.ERROR, 1, payload=b"\x00\x05", flags=rc.FLAG_UNPROCESSED), E(rc.CANCEL, 9),
                E(rc.ERROR, 0, payload=b"\x00\x07", flags=rc.FLAG_UNPROCESSED))  # a Publish refused
        for data in good:
            self.assertIsNotNone(FakeSocketReader(data).read_frame())
        with self.assertRaises(ValueError):
            self.c.handle("Bad route", lambda call: b"")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def call_me_back_frame(c: rc.Client, route: str, payload: bytes = b"", **kw) -> int:
    """Send Interop/CallMeBack (interop_test.go): the server calls route on c with
    payload (kw: json, deadline_ms, cancel_after_ms); returns the call's id."""
    return c.send_request("Interop/CallMeBack", json.dumps(dict(route=route, payload=b64(payload), **kw))
                          .encode(), rc.CODEC_JSON)


def called_back(c: rc.Client, cid: int):
    """The answer to Interop/CallMeBack: (the client's reply, (code, message,
    Unprocessed) of the error the server's call got, code 0 if none)."""
    out = json.loads(c.wait(cid).payload)
    return base64.b64decode(out["reply"] or ""), (out["code"], out["message"], out["unprocessed"])


def call_me_back(c: rc.Client, route: str, payload: bytes = b"", **kw):
    return called_back(c, call_me_back_frame(c, route, payload, **kw))


NO_ERROR = (0, "", False)


class LiveCallsFromServer(unittest.TestCase):
    """"Calls from the server" against rpcd: its test routes Interop/CallMeBack (a
    Request from the server to this client, whose answer comes back in the route's
    reply) and Interop/Push (OneWays from the server)."""

    def setUp(self):
        self.c = connect()
        self.held = []

    def tearDown(self):
        self.c.close()

    def hold(self, call):
        """A handler that answers later."""
        self.held.append(call)
        return rc.LATER

    def test_client_serves_raw_route(self):
        calls = []
        self.c.handle("Client/Double", lambda call: calls.append(call) or b"a:" + call.payload)
        self.assertEqual(call_me_back(self.c, "Client/Double", b"42"), (b"a:42", NO_ERROR))
        call = calls[0]
        self.assertEqual((call.kind, call.route, call.codec, call.wire_flags, call.deadline_ms, call.payload),
                         (rc.REQUEST, "Client/Double", rc.CODEC_RAW, 0, 0, b"42"))
        self.assertGreaterEqual(call.call_id, 1)
        self.assertEqual((call.answer.kind, call.answer.call_id, call.answer.codec),
                         (rc.RESPONSE, call.call_id, rc.CODEC_RAW))  # the codec of its Request
        body = os.urandom(300_000)
        self.assertEqual(call_me_back(self.c, "Client/Double", body), (b"a:" + body, NO_ERROR))
        self.assertEqual(call_me_back(self.c, "Client/Double"), (b"a:", NO_ERROR))  # empty payload
        self.assertEqual(len({c.call_id for c in calls}), 3)
        self.assertEqual((self.c.serving, self.c.goaway), ({}, None))

    def test_client_serves_json_route(self):
        calls = []

        def inc(call):
            calls.append(call)
            return json.dumps({"n": json.loads(call.payload)["n"] + 1}).encode()

        self.c.handle("Client/Inc", inc)
        reply, err = call_me_back(self.c, "Client/Inc", b'{"n":41}', json=True)
        self.assertEqual((json.loads(reply), err), ({"n": 42}, NO_ERROR))
        self.assertEqual((calls[0].codec, calls[0].answer.codec), (rc.CODEC_JSON, rc.CODEC_JSON))
        self.assertEqual(json.loads(calls[0].payload), {"n": 41})

    def test_unknown_route_is_not_found(self):
        sent = record_sent(self.c)
        reply, (code, msg, unprocessed) = call_me_back(self.c, "No/SuchOnClient", b"x")
        self.assertEqual((code, unprocessed), (rc.NOT_FOUND, True), msg)
        self.assertIn("No/SuchOnClient", msg)  # the client's message reached the server
        errors = [f for f in sent if f.kind == rc.ERROR]
        self.assertEqual(len(errors), 1)
        self.assertEqual(error_of(errors[0])[2:], (rc.NOT_FOUND, True))
        self.assertEqual(self.c.call_json("Math/Sum", {"a": 1, "b": 2}), 3)  # the connection goes on

    def test_handler_error_reaches_server(self):
        def raiser(exc):
            def fn(call):
                raise exc
            return fn

        cases = (("Client/Deny", rc.RpcError(rc.PERMISSION_DENIED, "not you"), (rc.PERMISSION_DENIED, "not you", False)),
                 ("Client/Busy", rc.RpcError(rc.ABORTED, "try again", unprocessed=True), (rc.ABORTED, "try again", True)),
                 ("Client/Gone", rc.RpcError(rc.NOT_FOUND, "no such user"), (rc.NOT_FOUND, "no such user", False)),
                 ("Client/Crash", ValueError("boom"), (rc.UNKNOWN, "ValueError: boom", False)))
        for route, exc, want in cases:
            self.c.handle(route, raiser(exc))
            self.assertEqual(call_me_back(self.c, route, b"x"), (b"", want), route)
        # An Error answered later, from outside the handler.
        self.c.handle("Client/Hold", self.hold)
        cid = call_me_back_frame(self.c, "Client/Hold", b"x")
        self.c.run_until(lambda: self.held)
        self.held[0].fail(rc.FAILED_PRECONDITION, "later")
        self.assertEqual(called_back(self.c, cid), (b"", (rc.FAILED_PRECONDITION, "later", False)))

    def test_pushes_arrive_never_answered(self):
        got = []
        self.c.handle("Client/News", got.append)  # returns None: dropped, for a OneWay
        self.c.handle("Client/Fail", lambda call: 1 / 0)
        sent = record_sent(self.c)
        raws = [b"first", b"", os.urandom(70_000)]
        n = self.c.call_json("Interop/Push", {"route": "Client/News", "payloads": [b64(p) for p in raws]})
        self.assertEqual(n, 3)
        self.c.run_until(lambda: len(got) >= 3)
        jsons = [b'{"flash":1}', b'"two"']
        self.assertEqual(self.c.call_json("Interop/Push", {"route": "Client/News", "json": True,
                                                           "payloads": [b64(p) for p in jsons]}), 2)
        self.c.run_until(lambda: len(got) >= 5)
        # A push to no route here, and one whose handler fails: logged, never answered.
        self.assertEqual(self.c.call_json("Interop/Push", {"route": "No/SuchNews", "payloads": [b64(b"x")]}), 1)
        self.assertEqual(self.c.call_json("Interop/Push", {"route": "Client/Fail", "payloads": [b64(b"y")]}), 1)
        self.c.run_until(lambda: len(self.c.oneway_log) >= 2)
        self.c.sync()
        for call in got:
            self.assertEqual((call.kind, call.route, call.wire_flags, call.answer), (rc.ONEWAY, "Client/News", 0, None))
            self.assertGreaterEqual(call.call_id, 1)
        self.assertCountEqual([(c.codec, c.payload) for c in got[:3]], [(rc.CODEC_RAW, p) for p in raws])
        self.assertCountEqual([(c.codec, json.loads(c.payload)) for c in got[3:]],
                              [(rc.CODEC_JSON, json.loads(p)) for p in jsons])
        self.assertEqual(sorted(r for _, r, _ in self.c.oneway_log), ["Client/Fail", "No/SuchNews"])
        # The client sent only its own Requests: no Response, no Error.
        self.assertEqual({f.kind for f in sent}, {rc.REQUEST})
        self.assertEqual((self.c.serving, self.c.goaway), ({}, None))

    def test_deadline_reaches_client(self):
        self.c.handle("Client/Deadline", lambda call: b"%d" % call.deadline_ms)
        reply, err = call_me_back(self.c, "Client/Deadline", deadline_ms=3000)
        self.assertEqual(err, NO_ERROR)
        self.assertTrue(2000 < int(reply) <= 3000, reply)  # what was left when it was sent
        self.assertEqual(call_me_back(self.c, "Client/Deadline"), (b"0", NO_ERROR))  # none given

    def test_deadline_passes_while_client_holds(self):
        self.c.handle("Client/Hold", self.hold)
        reply, (code, msg, _) = call_me_back(self.c, "Client/Hold", b"slow", deadline_ms=300)
        self.assertEqual(code, rc.DEADLINE_EXCEEDED, msg)
        call = self.held[0]
        self.assertTrue(0 < call.deadline_ms <= 300, call.deadline_ms)
        self.c.sync()  # a Cancel the server sent for it, if any, has arrived
        for _ in range(100):  # counted from when this client read the frame
            if call.expired:
                break
            time.sleep(0.01)
        self.assertTrue(call.expired)
        # "the handler's answer ... is still sent, and the caller, which stopped waiting
        # at the deadline, drops it". Whether a caller also sends Cancel when its deadline
        # passes the page does not say (rpcd's server does): if one came, the reply is
        # skipped; either way the connection goes on.
        call.reply(b"too late")
        self.assertEqual(self.c.call_json("Math/Sum", {"a": 1, "b": 2}), 3)
        self.assertEqual((self.c.serving, self.c.goaway), ({}, None))

    def test_cancel_from_server(self):
        self.c.handle("Client/Hold", self.hold)
        reply, (code, msg, _) = call_me_back(self.c, "Client/Hold", b"x", cancel_after_ms=200)
        self.assertEqual(code, rc.CANCELED, msg)
        call = self.held[0]
        self.c.run_until(lambda: call.cancelled)  # a Cancel with the server's id arrived
        self.assertEqual(self.c.serving, {})
        sent = record_sent(self.c)
        call.reply(b"skipped")  # the callee may skip the reply: this client does
        self.assertEqual((sent, call.answer, self.c.stray_cancels), ([], None, 0))
        self.assertEqual(self.c.call_json("Math/Sum", {"a": 1, "b": 2}), 3)

    def test_ids_do_not_clash(self):
        """The server's call and the client's own, in flight at once with the same id."""
        self.c.handle("Client/Hold", self.hold)
        sent = record_sent(self.c)
        back = call_me_back_frame(self.c, "Client/Hold", b"first")
        self.c.run_until(lambda: self.held)
        call = self.held[0]
        sid = call.call_id
        if sid not in self.c.pending:  # make the client's next call take the server's id
            self.c.next_id = sid
        mine = self.c.send_request("Math/Sum", b'{"a":20,"b":22}', rc.CODEC_JSON)
        self.assertIn(sid, self.c.pending)  # the number is in use both ways
        self.assertIn(sid, self.c.serving)
        self.assertEqual(json.loads(self.c.wait(mine).payload), 42)
        self.assertEqual((call.answer, call.cancelled), (None, False))  # still the server's to wait for
        self.assertIn(back, self.c.pending)
        call.reply(b"answer")
        self.assertEqual(called_back(self.c, back), (b"answer", NO_ERROR))
        self.assertEqual([(f.call_id, f.payload) for f in sent if f.kind == rc.RESPONSE], [(sid, b"answer")])

        # A handler that calls the server before it answers.
        def nested(c):
            return b"%d" % self.c.call_json("Math/Sum", {"a": int(c.payload), "b": 1})

        self.c.handle("Client/Nested", nested)
        self.assertEqual(call_me_back(self.c, "Client/Nested", b"41"), (b"42", NO_ERROR))

        # Two calls of the server's in flight, answered in the reverse order.
        del self.held[:]
        a = call_me_back_frame(self.c, "Client/Hold", b"A")
        b = call_me_back_frame(self.c, "Client/Hold", b"B")
        self.c.run_until(lambda: len(self.held) == 2)
        self.assertNotEqual(self.held[0].call_id, self.held[1].call_id)
        for call in reversed(self.held):
            call.reply(b"to-" + call.payload)
        self.assertEqual((called_back(self.c, a), called_back(self.c, b)),
                         ((b"to-A", NO_ERROR), (b"to-B", NO_ERROR)))
        self.assertEqual((self.c.serving, self.c.pending, self.c.goaway), ({}, set(), None))

    def test_compression_of_calls_from_server(self):
        """"rpcd's server does not compress the calls it makes to a client (reverse calls
        and pushes), and its client does not compress its answers to them; both expand
        those they receive": on a connection whose Welcome named gzip, the server's
        calls come as they are, and an answer gzipped by this client is expanded."""
        c = connect(compression=("gzip",))
        try:
            self.assertEqual(c.compression, rc.FLAG_GZIP)
            calls = []
            c.handle("Client/Echo", lambda call: calls.append(call) or call.payload)
            body = compressible(64 * 1024)
            sent = record_sent(c)
            self.assertEqual(call_me_back(c, "Client/Echo", body), (body, NO_ERROR))
            self.assertEqual((calls[0].wire_flags, calls[0].payload), (0, body))
            self.assertEqual(sent[-1].flags & rc.COMPRESSION_MASK, 0)  # as rpcd's client answers
            c.compress_answers = True
            self.assertEqual(call_me_back(c, "Client/Echo", body), (body, NO_ERROR))
            answer = [f for f in sent if f.kind == rc.RESPONSE][-1]
            self.assertEqual(answer.flags, rc.FLAG_GZIP)  # gzipped, and the server expanded it
            self.assertLess(len(answer.payload), len(body) // 4)
            self.assertEqual(c.call_json("Interop/Push", {"route": "Client/Echo", "payloads": [b64(body)]}), 1)
            c.run_until(lambda: len(calls) == 3)
            self.assertEqual((calls[2].kind, calls[2].wire_flags, calls[2].payload), (rc.ONEWAY, 0, body))
            self.assertIsNone(c.goaway)
        finally:
            c.close()


def main() -> None:
    global ADDR
    if len(sys.argv) < 2:
        sys.exit("usage: test_interop.py HOST:PORT")
    host, _, port = sys.argv[1].rpartition(":")
    ADDR = (host.strip("[]") or "127.0.0.1", int(port))
    socket.setdefaulttimeout(TIMEOUT)
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[2:])


if __name__ == "__main__":
    main()
