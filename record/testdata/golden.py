#!/usr/bin/env python3
"""Writes golden.txt: the example recording of docs/recording.md, computed
from that page with Python's struct, zlib-free CRC-32C and json, not by
package record. TestGolden reads the file back with the Reader and compares
it with what the Recorder's encoders write.

    python3 record/testdata/golden.py > record/testdata/golden.txt
"""
import json
import struct


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def frame(kind, flags, codec, call_id, deadline, route, metadata, payload):
    head = struct.pack(">2sBBBBHIIHHI", b"RD", 1, kind, flags, codec, len(route), call_id,
                       deadline, len(metadata), 0, len(payload))
    return head + route + metadata + payload


def record(rtype, flags, redaction, at_ns, conn, rest):
    body = struct.pack(">BBBBQQ", rtype, flags, redaction, 0, at_ns, conn) + rest
    return struct.pack(">II", len(body), crc32c(body)) + body


header = json.dumps({
    "version": 1, "start": "2026-12-06T15:00:00Z", "source": "proxy", "server": "127.0.0.1:7070",
    "max_frame": 4194304,
    "options": {"duration_ns": 0, "max_bytes": 1073741824, "sample": 1, "routes": [],
                "redact": [{"route": "User/*", "action": "drop"}], "answers": True},
}, separators=(",", ":")).encode()

request = frame(0x01, 0, 0x01, 1, 1000, b"Math/Sum", b"", b'{"a":1,"b":2}')
response = frame(0x02, 0, 0x01, 1, 0, b"", b"", b"3")
login = frame(0x01, 0, 0x01, 2, 0, b"User/Login", b"", b"")  # its 17-byte payload dropped

out = b"RDRC" + struct.pack(">HHII", 1, 0, len(header), crc32c(header)) + header
out += record(1, 0, 0, 1000, 1, b"127.0.0.1:50000")
out += record(2, 0, 0, 1500000, 1, struct.pack(">I", 13) + request)
out += record(2, 1, 0, 1600000, 1, struct.pack(">I", 1) + response)
out += record(2, 0, 1, 1700000, 1, struct.pack(">I", 17) + login)
out += record(3, 0, 0, 2000000, 1, b"")
out += record(4, 0, 0, 2000000, 0, struct.pack(">QQQQB", 3, 2, 1, 0, 1))

print("# The example recording of docs/recording.md, written by golden.py.")
for i in range(0, len(out), 16):
    print(" ".join("%02x" % b for b in out[i:i + 16]))
