"""The wire format, offline: the golden frames of proto/testdata/golden.txt (the examples of
docs/protocol.md), "Rules per kind", metadata, topics, gzip within limits."""

import gzip
import os
import struct
import unittest

from support import REPO, rpcd

from rpcd import protocol as p
from rpcd.errors import Code, ProtocolError

GOLDEN = os.path.join(REPO, "proto", "testdata", "golden.txt")
KINDS = {p.kind_name(k): k for k in p.Kind}
FLAGS = {"Unprocessed": p.FLAG_UNPROCESSED, "gzip": p.FLAG_GZIP}


def golden_blocks():
    """The blocks of golden.txt: dicts of their fields; meta and hex lines gathered."""
    blocks, cur = [], None
    with open(GOLDEN, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#"):
                continue
            if not line.strip():
                cur = None
                continue
            key, _, value = line.partition(": ")
            if key.endswith(":"):  # "payload:" with nothing after it
                key, value = key[:-1], ""
            if cur is None:
                cur = {"meta": [], "hex": ""}
                blocks.append(cur)
            if key == "meta":
                k, _, v = value.partition("=")
                cur["meta"].append((k, v.encode()))
            elif key == "hex":
                cur["hex"] += value.replace(" ", "")
            else:
                cur[key] = value
    return blocks


def golden_payload(b):
    """The payload a golden block's fields give."""
    kind = KINDS[b["kind"]]
    if kind == p.Kind.GOAWAY:
        return p.goaway_body(int(b["last"]), int(b["code"]), b["message"])
    if "code" in b:  # Error, StreamReset, the server's Unsubscribe
        return p.error_body(int(b["code"]), b["message"])
    if "window" in b:
        return struct.pack(">I", int(b["window"]))
    if "payloadhex" in b:
        return bytes.fromhex(b["payloadhex"].replace(" ", ""))
    return b.get("payload", "").encode()


@unittest.skipUnless(os.path.exists(GOLDEN), "proto/testdata/golden.txt not found: not run from a checkout")
class Golden(unittest.TestCase):
    """Every golden frame: encoded from its fields to the same bytes, and decoded back."""

    def test_every_golden_frame(self):
        blocks = golden_blocks()
        self.assertGreaterEqual(len(blocks), 31)
        for b in blocks:
            with self.subTest(b["name"]):
                kind = KINDS[b["kind"]]
                flags = FLAGS.get(b.get("flags", ""), 0)
                codec = {"json": p.Codec.JSON, "raw": p.Codec.RAW}[b.get("codec", "raw")]
                want = bytes.fromhex(b["hex"])
                got = p.encode_frame(kind, int(b.get("id", 0)), b.get("route", ""), golden_payload(b),
                                     codec, flags, int(b.get("deadline", 0)), b["meta"])
                self.assertEqual(got.hex(), want.hex())
                f = p.decode_frame(want)
                self.assertEqual((f.kind, f.flags, f.codec, f.call_id, f.route, f.metadata),
                                 (kind, flags, codec, int(b.get("id", 0)), b.get("route", ""), b["meta"]))
                if "expands" in b:
                    self.assertEqual(p.expand(f.flags, f.payload, 1 << 20), b["expands"].encode())

    def test_the_parser_takes_frames_however_split(self):
        """A frame's header is checked on its 24 bytes; the rest follows."""
        want = bytes.fromhex(golden_blocks()[3]["hex"])  # request-metadata
        h = p.check_header(want[:24])
        self.assertEqual(24 + h.body_len, len(want))
        f = p.decode_body(h, want[24:])
        self.assertEqual(p.first_value(f.metadata, "tenant"), b"acme")


class Rules(unittest.TestCase):
    """A header that breaks "Rules per kind", "Flags" or "Limits" is a protocol error."""

    def head(self, kind, cid=0, flags=0, codec=0, rlen=0, deadline=0, mlen=0, plen=0, reserved=0,
             magic=b"RD", version=1):
        return p.HEADER.pack(magic, version, kind, flags, codec, rlen, cid, deadline, mlen, reserved, plen)

    def test_bad_headers(self):
        K = p.Kind
        cases = {
            "bad magic": self.head(K.PING, magic=b"XX"),
            "unknown version": self.head(K.PING, version=2),
            "reserved kind": self.head(0x0D),
            "reserved kind 0x20": self.head(0x20),
            "reserved field": self.head(K.PING, reserved=1),
            "reserved flag bit": self.head(K.RESPONSE, cid=1, flags=0x08),
            "compression 3": self.head(K.RESPONSE, cid=1, flags=0x06),
            "compression on an Error": self.head(K.ERROR, cid=1, flags=0x02, plen=2),
            "compression on a Ping": self.head(K.PING, flags=0x04),
            "Unprocessed on a Response": self.head(K.RESPONSE, cid=1, flags=0x01),
            "Response with call id 0": self.head(K.RESPONSE),
            "Ping with a call id": self.head(K.PING, cid=1),
            "Error not Raw": self.head(K.ERROR, cid=1, codec=1, plen=2),
            "Error body of 1 byte": self.head(K.ERROR, cid=1, plen=1),
            "Response with a route": self.head(K.RESPONSE, cid=1, rlen=3),
            "Request without a route": self.head(K.REQUEST, cid=1),
            "Response with a deadline": self.head(K.RESPONSE, cid=1, deadline=5),
            "Cancel with a payload": self.head(K.CANCEL, cid=1, plen=1),
            "Ping of 65 bytes": self.head(K.PING, plen=65),
            "GoAway body of 5 bytes": self.head(K.GOAWAY, plen=5),
            "Welcome of 4097 bytes": self.head(K.WELCOME, plen=4097),
            "Message with id 0": self.head(K.MESSAGE, rlen=1),
            "Publish with an id": self.head(K.PUBLISH, cid=1, rlen=1),
            "Subscribe with a payload": self.head(K.SUBSCRIBE, cid=1, rlen=1, plen=1),
            "Unsubscribe body of 1 byte": self.head(K.UNSUBSCRIBE, cid=1, plen=1),
            "StreamCredit of 3 bytes": self.head(K.STREAM_CREDIT, cid=1, plen=3),
            "StreamData not Raw": self.head(K.STREAM_DATA, cid=1, codec=1),
            "StreamOpen compressed": self.head(K.STREAM_OPEN, cid=1, rlen=1, plen=4, flags=0x02),
            "route over 256": self.head(K.REQUEST, cid=1, rlen=257),
            "metadata over 8 KiB": self.head(K.REQUEST, cid=1, rlen=1, mlen=8193),
            "frame over 4 MiB": self.head(K.RESPONSE, cid=1, plen=4 * 1024 * 1024 - 23),
        }
        for name, head in cases.items():
            with self.subTest(name), self.assertRaises(ProtocolError):
                p.check_header(head)

    def test_good_headers(self):
        K = p.Kind
        for head in (self.head(K.ERROR, cid=0, flags=1, plen=2),         # a Publish refused
                     self.head(K.UNSUBSCRIBE, cid=1), self.head(K.UNSUBSCRIBE, cid=1, plen=2),
                     self.head(K.MESSAGE, cid=1, rlen=1, flags=0x02),
                     self.head(K.STREAM_DATA, cid=1, flags=0x04),
                     self.head(K.RESPONSE, cid=1, plen=4 * 1024 * 1024 - 24),
                     self.head(K.REQUEST, cid=1, rlen=256, mlen=8192, codec=0x80, deadline=1)):
            p.check_header(head)

    def test_body_rules(self):
        K = p.Kind
        bad = {
            "route byte outside 0x21-0x7E": p.HEADER.pack(b"RD", 1, K.REQUEST, 0, 0, 4, 1, 0, 0, 0, 0) + b"A B/",
            "malformed pattern": p.HEADER.pack(b"RD", 1, K.SUBSCRIBE, 0, 0, 4, 1, 0, 0, 0, 0) + b"a..b",
            "wildcard in a topic": p.HEADER.pack(b"RD", 1, K.MESSAGE, 0, 0, 3, 1, 0, 0, 0, 0) + b"a.*",
            "metadata key length 0": p.HEADER.pack(b"RD", 1, K.RESPONSE, 0, 0, 0, 1, 0, 3, 0, 0) + b"\x00\x00\x00",
            "metadata past its section": p.HEADER.pack(b"RD", 1, K.RESPONSE, 0, 0, 0, 1, 0, 4, 0, 0) + b"\x01k\x00\x05",
            "credit 0": p.HEADER.pack(b"RD", 1, K.STREAM_CREDIT, 0, 0, 0, 1, 0, 0, 0, 4) + bytes(4),
            "credit past 2^31-1": p.HEADER.pack(b"RD", 1, K.STREAM_CREDIT, 0, 0, 0, 1, 0, 0, 0, 4) + b"\x80\0\0\0",
        }
        for name, frame in bad.items():
            with self.subTest(name), self.assertRaises(ProtocolError):
                p.decode_frame(frame)

    def test_encoder_keeps_to_the_limits(self):
        with self.assertRaises(ValueError):
            p.encode_frame(p.Kind.REQUEST, 1, "R/" + "x" * 255)
        with self.assertRaises(ValueError):
            p.encode_frame(p.Kind.RESPONSE, 1, payload=bytes(4 * 1024 * 1024 - 23))
        with self.assertRaises(ValueError):
            p.encode_metadata([("bad key", b"")])
        self.assertEqual(len(p.encode_frame(p.Kind.RESPONSE, 1, payload=bytes(4 * 1024 * 1024 - 24))), 4 << 20)


class Pieces(unittest.TestCase):
    def test_metadata_roundtrip(self):
        md = [("trace-id", b"abc"), ("tenant", b""), ("trace-id", b"second")]
        self.assertEqual(p.decode_metadata(p.encode_metadata(md)), md)
        self.assertEqual(p.first_value(md, "trace-id"), b"abc")
        self.assertEqual(p.metadata_pairs({"k": "é"}), [("k", "é".encode())])

    def test_topics_and_patterns(self):
        """The table of "Topics and patterns"."""
        table = (("orders.eu.created", ["orders.eu.created"], ["orders.eu", "orders.eu.created.x"]),
                 ("orders.*.created", ["orders.eu.created", "orders.us.created"],
                  ["orders.created", "orders.eu.x.created"]),
                 ("orders.>", ["orders.eu", "orders.eu.created"], ["orders"]),
                 (">", ["a", "a.b.c"], []))
        for pattern, yes, no in table:
            self.assertIsNone(p.topic_error(pattern, pattern=True))
            for t in yes:
                self.assertTrue(p.topic_matches(pattern, t), (pattern, t))
            for t in no:
                self.assertFalse(p.topic_matches(pattern, t), (pattern, t))
        for bad in ("", "a..b", "a.", ".a", "a.>.b", "a*", "a.b>", "a b"):
            self.assertIsNotNone(p.topic_error(bad, pattern=True), bad)
        for bad in ("a.*", "a.>", ">"):
            self.assertIsNotNone(p.topic_error(bad), bad)

    def test_gzip_within_limits(self):
        data = b"rpcd compresses payloads of 1 KiB or more. " * 100
        packed = p.gzip_payload(data)
        self.assertLess(len(packed), len(data))
        self.assertEqual(gzip.decompress(packed), data)
        self.assertIsNone(p.gzip_payload(data[:1023]))       # under CompressMin
        self.assertIsNone(p.gzip_payload(os.urandom(4096)))  # does not shrink
        two = gzip.compress(b"ab") + gzip.compress(b"cd")      # members one after the other
        self.assertEqual(p.expand(p.FLAG_GZIP, two, 4), b"abcd")
        with self.assertRaises(p.ExpandOverflow):
            p.expand(p.FLAG_GZIP, packed, len(data) - 1)
        self.assertEqual(p.expand(p.FLAG_GZIP, packed, len(data)), data)
        for bad in (b"", b"not gzip", packed[:-9]):
            with self.assertRaises(p.ExpandError):
                p.expand(p.FLAG_GZIP, bad, 1 << 20)
        with self.assertRaises(p.ExpandError):  # Zstandard: not in the standard library
            p.expand(p.FLAG_ZSTD, b"\x28\xb5\x2f\xfd", 1 << 20)

    def test_serial_order(self):
        self.assertTrue(p.after(2, 1))
        self.assertTrue(p.after(1, 0xFFFFFFFF))  # wrapped
        self.assertFalse(p.after(1, 1))
        self.assertFalse(p.after(1, 2))

    def test_codes(self):
        self.assertEqual([c.value for c in Code], list(range(17)))
        self.assertEqual(rpcd.code_name(3), "InvalidArgument")
        self.assertEqual(rpcd.code_name(16), "Unauthenticated")
        e = rpcd.RpcError(17, "future", True)
        self.assertEqual((e.code, e.unprocessed, str(e)), (17, True, "rpcd: code 17 (17): future [unprocessed]"))
        self.assertIs(rpcd.RpcError(5).code, Code.NOT_FOUND)


if __name__ == "__main__":
    unittest.main()
