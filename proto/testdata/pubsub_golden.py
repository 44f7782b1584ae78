# Publish/subscribe golden vectors computed from docs/protocol.md ("Publish and
# subscribe") with Python struct, independently of package proto.
# Run: python3 proto/testdata/pubsub_golden.py; the blocks before =====DOC go
# in golden.txt, those after in docs/protocol.md's "Examples as bytes".
import struct
def frame(kind, id, payload=b"", route=b"", codec=0, flags=0, deadline=0, md=b""):
    h = struct.pack(">2sBBBBHIIHHI", b"RD", 1, kind, flags, codec, len(route), id, deadline, len(md), 0, len(payload))
    return h + route + md + payload
def hexlines(b):
    return [" ".join("%02x" % x for x in b[i:i+16]) for i in range(0, len(b), 16)]
SUBSCRIBE, UNSUBSCRIBE, PUBLISH, MESSAGE = 0x09, 0x0A, 0x0B, 0x0C
ERROR = 0x03
JSON = 1
vs = [
 ("subscribe", "Subscribe", dict(id=1, route="orders.*.created"),
   frame(SUBSCRIBE, 1, route=b"orders.*.created"),
   'Subscribe id=1 route="orders.*.created"'),
 ("publish", "Publish", dict(codec="json", route="orders.eu.created", payload='{"id":42}'),
   frame(PUBLISH, 0, b'{"id":42}', route=b"orders.eu.created", codec=JSON),
   'Publish route="orders.eu.created" codec=JSON payload={"id":42}'),
 ("message", "Message", dict(id=1, codec="json", route="orders.eu.created", payload='{"id":42}'),
   frame(MESSAGE, 1, b'{"id":42}', route=b"orders.eu.created", codec=JSON),
   'Message id=1 route="orders.eu.created" codec=JSON payload={"id":42}'),
 ("unsubscribe", "Unsubscribe", dict(id=1),
   frame(UNSUBSCRIBE, 1),
   'Unsubscribe id=1 (from the client)'),
 ("unsubscribe-refused", "Unsubscribe", dict(id=2, code=8, message="too many subscriptions"),
   frame(UNSUBSCRIBE, 2, struct.pack(">H", 8) + b"too many subscriptions"),
   'Unsubscribe id=2 code=ResourceExhausted message="too many subscriptions" (from the server)'),
 ("publish-refused", "Error", dict(id=0, flags="Unprocessed", code=7, message="alice may not publish to secrets.payroll"),
   frame(ERROR, 0, struct.pack(">H", 7) + b"alice may not publish to secrets.payroll", flags=0x01),
   'Error id=0 flags=Unprocessed code=PermissionDenied message="alice may not publish to secrets.payroll" (the server refused a Publish)'),
]
# Compressed Messages (docs/protocol.md, "Compression"): a Subscribe naming what its
# subscriber takes, and a Message whose payload is gzip as Python writes it with mtime=0.
# Run: python3 proto/testdata/pubsub_golden.py compression
import gzip, sys
def meta(key, val):
    return struct.pack(">B", len(key)) + key + struct.pack(">H", len(val)) + val
body = b'{"id":42,"items":["a","a","a","a","a","a","a","a"]}'
packed = gzip.compress(body, mtime=0)
zvs = [
 ("subscribe-compression", "Subscribe", dict(id=1, route="orders.>"), ["rpcd-compression=zstd,gzip"],
   frame(SUBSCRIBE, 1, route=b"orders.>", md=meta(b"rpcd-compression", b"zstd,gzip")),
   'Subscribe id=1 route="orders.>" metadata={rpcd-compression: zstd,gzip}`: a subscriber that takes compressed Messages (see "Compression")'),
 ("message-gzip", "Message", dict(id=1, codec="json", flags="gzip", route="orders.eu.created",
   payloadhex=" ".join("%02x" % x for x in packed), expands=body.decode()), [],
   frame(MESSAGE, 1, packed, route=b"orders.eu.created", codec=JSON, flags=0x02),
   'Message id=1 flags=gzip route="orders.eu.created" codec=JSON`, its payload `%s` compressed with gzip (%d bytes, as Python\'s `gzip.compress(data, mtime=0)` writes them)' % (body.decode(), len(packed))),
]
def emit(vectors):
    """Prints the vectors for golden.txt, then =====DOC and their blocks for the page."""
    for name, kind, f, md, b, _ in vectors:
        print("name: " + name); print("kind: " + kind)
        for k, v in f.items(): print("%s: %s" % (k, v))
        for m in md: print("meta: " + m)
        for l in hexlines(b): print("hex: " + l)
        print()
    print("=====DOC")
    for name, kind, f, md, b, desc in vectors:
        print("`" + desc + ":")
        print()
        print("```")
        for i in range(0, len(b), 16):
            c = b[i:i+16]; print("  ".join(" ".join("%02x" % x for x in c[j:j+4]) for j in range(0, len(c), 4)))
        print("```")
        print()
if len(sys.argv) > 1 and sys.argv[1] == "compression":
    emit(zvs)
else:
    emit([(name, kind, f, [], b, desc + "`") for name, kind, f, b, desc in vs])
