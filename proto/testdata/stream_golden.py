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
for name, kind, f, b in vs:
    print("name: " + name); print("kind: " + kind)
    for k, v in f.items(): print("%s: %s" % (k, v))
    for l in hexlines(b): print("hex: " + l)
    print()
print("=====DOC")
for name, kind, f, b in vs:
    print(name)
    print("```")
    for i in range(0,len(b),16):
        c=b[i:i+16]; print("  ".join(" ".join("%02x"%x for x in c[j:j+4]) for j in range(0,len(c),4)))
    print("```")
