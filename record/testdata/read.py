#!/usr/bin/env python3
"""Reads a recording as docs/recording.md lays it out, written from that
page alone, and prints its entries one a line for TestPythonReader:

    TYPE AT CONN OUT KIND ID ROUTE PAYLOADLEN REDACTION PAYLOAD-HEX METADATA-HEX

then "end FRAMES CALLS CONNS LOST REASON". It exits 1 with a message on a
file that breaks the page.

    python3 record/testdata/read.py FILE
"""
import json
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def fail(off, msg):
    sys.exit("offset %d: %s" % (off, msg))


def main(path):
    data = open(path, "rb").read()
    if data[:4] != b"RDRC":
        fail(0, "bad magic")
    version, reserved, jlen, jcrc = struct.unpack(">HHII", data[4:16])
    if version != 1 or reserved != 0 or jlen > 65536:
        fail(4, "version %d reserved %d length %d" % (version, reserved, jlen))
    body = data[16:16 + jlen]
    if crc32c(body) != jcrc:
        fail(12, "header CRC")
    header = json.loads(body)
    max_frame = header["max_frame"]
    off = 16 + jlen
    types = {1: "open", 2: "frame", 3: "close"}
    while True:
        if off == len(data):
            fail(off, "cut short")
        length, crc = struct.unpack(">II", data[off:off + 8])
        if length < 20 or length > 24 + max_frame:
            fail(off, "record length %d" % length)
        body = data[off + 8:off + 8 + length]
        if len(body) != length or crc32c(body) != crc:
            fail(off, "truncated or corrupted")
        rtype, flags, redaction, _, at, conn = struct.unpack(">BBBBQQ", body[:20])
        rest = body[20:]
        off += 8 + length
        if rtype == 4:
            frames, calls, conns, lost, reason = struct.unpack(">QQQQB", rest)
            print("end %d %d %d %d %d" % (frames, calls, conns, lost, reason))
            if off != len(data):
                fail(off, "bytes after the end record")
            return
        kind = ident = payload_len = 0
        route = payload = metadata = b""
        if rtype == 1:
            route = rest  # the remote address
        elif rtype == 2:
            payload_len = struct.unpack(">I", rest[:4])[0]
            frame = rest[4:]
            magic, ver, kind, fflags, codec, rlen, ident, deadline, mlen, res, plen = \
                struct.unpack(">2sBBBBHIIHHI", frame[:24])
            if magic != b"RD" or ver != 1 or 24 + rlen + mlen + plen != len(frame):
                fail(off, "bad frame")
            route = frame[24:24 + rlen]
            metadata = frame[24 + rlen:24 + rlen + mlen]
            payload = frame[24 + rlen + mlen:]
        print("%s %d %d %d %d %d %s %d %d %s %s" % (
            types[rtype], at, conn, flags & 1, kind, ident, route.decode() or "-",
            payload_len, redaction, payload.hex() or "-", metadata.hex() or "-"))


main(sys.argv[1])
