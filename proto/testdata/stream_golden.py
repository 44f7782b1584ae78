# Stream golden vectors computed from docs/protocol.md ("Streams") with Python struct,
# independently of package proto.
import struct
def frame(kind, id, payload=b"", route=b"", codec=0, flags=0, deadline=0, md=b""):
    h = struct.pack(">2sBBBBHIIHHI", b"RD", 1, kind, flags, codec, len(route), id, deadline, len(md), 0, len(payload))
    return h + route + md + payload
def hexlines(b):
    out=[]
    for i in range(0,len(b),16):
        out.append(" ".join("%02x"%x for x in b[i:i+16]))
    return out
vs = [
 ("stream-open", "StreamOpen", dict(id=1, route="File/Upload", deadline=30000, window=262144),
   frame(0x18, 1, struct.pack(">I", 262144), route=b"File/Upload", deadline=30000)),
 ("stream-data", "StreamData", dict(id=1, payload="hello"), frame(0x19, 1, b"hello")),
 ("stream-credit", "StreamCredit", dict(id=1, window=65536), frame(0x1a, 1, struct.pack(">I", 65536))),
 ("stream-end", "StreamEnd", dict(id=1), frame(0x1b, 1)),
 ("stream-reset", "StreamReset", dict(id=2, flags="Unprocessed", code=5, message="no stream route"),
   frame(0x1c, 2, struct.pack(">H", 5) + b"no stream route", flags=1)),
]
# Compressed streams (docs/protocol.md, "Compression"): the opener names what it takes in the
# StreamOpen's metadata, the acceptor in its first StreamCredit's, and StreamData carries the
# compression in flag bits 0x06 (gzip: 0x02), its payload as Python's gzip writes it with mtime=0.
import gzip
def meta(key, val):
    return struct.pack(">B", len(key)) + key + struct.pack(">H", len(val)) + val
takes = meta(b"rpcd-compression", b"zstd,gzip")
text = b"log line 1; log line 2; log line 3; log line 4"
packed = gzip.compress(text, mtime=0)
zvs = [
 ("stream-open-compression", "StreamOpen", dict(id=1, route="File/Upload", window=262144),
   ["rpcd-compression=zstd,gzip"], frame(0x18, 1, struct.pack(">I", 262144), route=b"File/Upload", md=takes)),
 ("stream-credit-compression", "StreamCredit", dict(id=1, window=262144),
   ["rpcd-compression=zstd,gzip"], frame(0x1a, 1, struct.pack(">I", 262144), md=takes)),
 ("stream-data-gzip", "StreamData", dict(id=1, flags="gzip", payloadhex=" ".join("%02x" % x for x in packed),
   expands=text.decode()), [], frame(0x19, 1, packed, flags=0x02)),
]
import sys
def emit(vectors):
    """Prints the vectors for golden.txt, then =====DOC and each one's name and block for the page."""
    for name, kind, f, md, b in vectors:
        print("name: " + name); print("kind: " + kind)
        for k, v in f.items(): print("%s: %s" % (k, v))
        for m in md: print("meta: " + m)
        for l in hexlines(b): print("hex: " + l)
        print()
    print("=====DOC")
    for name, kind, f, md, b in vectors:
        print(name)
        print("```")
        for i in range(0,len(b),16):
            c=b[i:i+16]; print("  ".join(" ".join("%02x"%x for x in c[j:j+4]) for j in range(0,len(c),4)))
        print("```")
if len(sys.argv) > 1 and sys.argv[1] == "compression":
    emit(zvs)
else:
    emit([(name, kind, f, [], b) for name, kind, f, b in vs])
