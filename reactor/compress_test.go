package reactor_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// compressible returns n bytes of text that compresses well, varied by seed.
func compressible(n int, seed uint64) []byte {
	var b bytes.Buffer
	r := rand.New(rand.NewPCG(seed, 1))
	for b.Len() < n {
		fmt.Fprintf(&b, `{"id":%d,"name":"node-%d","state":"serving"},`, r.IntN(1000), r.IntN(50))
	}
	return b.Bytes()[:n]
}

// words returns n bytes of words drawn from a thousand: about two fifths
// of their size compressed, so that a megabyte of them stays larger than
// the client's read buffer once compressed.
func words(n int, seed uint64) []byte {
	var b bytes.Buffer
	r := rand.New(rand.NewPCG(seed, 2))
	for b.Len() < n {
		fmt.Fprintf(&b, "w%03d ", r.IntN(1000))
	}
	return b.Bytes()[:n]
}

// sentSince waits until the server has counted at least least bytes
// written since its BytesOut was out (it counts after writing: a reply may
// reach the client first), and returns the bytes written since. A reply
// that should go as it is waits for all its bytes, so a server that
// compressed it fails the wait; one that should be compressed waits for its
// first byte.
func sentSince(t *testing.T, s *reactor.Server, out, least uint64) uint64 {
	waitFor(t, "the reply's bytes counted", func() bool { return s.Stats().BytesOut-out >= least })
	return s.Stats().BytesOut - out
}

// welcomed waits until the server has counted its Welcome, so that it is
// not counted as part of a reply, and returns BytesOut.
func welcomed(t *testing.T, s *reactor.Server) uint64 {
	waitFor(t, "the Welcome's bytes counted", func() bool { return s.Stats().BytesOut > 0 })
	return s.Stats().BytesOut
}

// compressRegistry serves the built-in routes, a Blocking echo, a route
// that answers a large document to an empty request, and one that says how
// many bytes its handler got.
func compressRegistry() *handler.Registry {
	reg := builtinRegistry()
	reg.HandleFunc("Block/Echo", func(_ context.Context, req, reply []byte) ([]byte, error) {
		return append(reply, req...), nil
	}, handler.Blocking())
	reg.HandleFunc("Doc/Get", func(_ context.Context, _, reply []byte) ([]byte, error) {
		return append(reply, compressible(64<<10, 7)...), nil
	})
	reg.HandleFunc("Len/Of", func(_ context.Context, req, reply []byte) ([]byte, error) {
		return fmt.Appendf(reply, "%d", len(req)), nil
	})
	return reg
}

// TestCompression: with a client that asks for it, calls and replies past
// the thresholds travel compressed both ways (the server's byte counts show
// it), on inline and Blocking routes, small and large frames, and come back
// byte for byte; the handlers see the payload expanded.
func TestCompression(t *testing.T) {
	for _, c := range compression.Supported() {
		t.Run(c.String(), func(t *testing.T) {
			s := start(t, compressRegistry(), reactor.Options{})
			cl := dial(t, s, client.Options{Compression: c})
			welcomed(t, s)
			for _, tc := range []struct {
				name      string
				route     string
				payload   []byte
				compacted bool // both ways well under the payload's size
			}{
				{"empty", builtin.EchoPacket, nil, false},
				{"under the threshold", builtin.EchoPacket, compressible(500, 1), false},
				{"text 16 KiB", builtin.EchoPacket, compressible(16<<10, 2), true},
				{"text 16 KiB blocking", "Block/Echo", compressible(16<<10, 3), true},
				{"noise 8 KiB", builtin.EchoPacket, noise(8 << 10), false}, // does not shrink: sent as it is
				{"words 1 MiB", builtin.EchoPacket, words(1<<20, 4), true},
				{"words 3 MiB blocking", "Block/Echo", words(3<<20, 5), true},
			} {
				t.Run(tc.name, func(t *testing.T) {
					in, out := s.Stats().BytesIn, s.Stats().BytesOut
					got, err := cl.CallRaw(ctxT(t), tc.route, tc.payload, nil)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, tc.payload) {
						t.Fatalf("echo of %d bytes came back as %d different ones", len(tc.payload), len(got))
					}
					n := uint64(len(tc.payload))
					least := max(n, 1)
					if tc.compacted {
						least = 1
					}
					dIn, dOut := s.Stats().BytesIn-in, sentSince(t, s, out, least)
					if tc.compacted && (dIn > n*3/4 || dOut > n*3/4) {
						t.Errorf("%d bytes echoed: %d in, %d out; want both under three quarters", n, dIn, dOut)
					}
					if !tc.compacted && (dIn < n || dOut < n) {
						t.Errorf("%d bytes echoed: %d in, %d out; want them as they are", n, dIn, dOut)
					}
				})
			}
			t.Run("handler sees the payload expanded", func(t *testing.T) {
				got, err := cl.CallRaw(ctxT(t), "Len/Of", compressible(100<<10, 6), nil)
				if err != nil || string(got) != "102400" {
					t.Fatalf("Len/Of: %q, %v", got, err)
				}
			})
			t.Run("large reply to a small call", func(t *testing.T) {
				out := s.Stats().BytesOut
				got, err := cl.CallRaw(ctxT(t), "Doc/Get", nil, nil)
				if err != nil || !bytes.Equal(got, compressible(64<<10, 7)) {
					t.Fatalf("Doc/Get: %d bytes, %v", len(got), err)
				}
				if d := sentSince(t, s, out, 1); d > 16<<10 {
					t.Errorf("a 64 KiB document went out as %d bytes", d)
				}
			})
			t.Run("typed", func(t *testing.T) {
				words := strings.Fields(strings.Repeat("compress me please ", 200))
				var n int
				if err := cl.Call(ctxT(t), "Len/Of", words, &n); err != nil || n != len(`["`)+len(strings.Join(words, `","`))+len(`"]`) {
					t.Fatalf("typed call: %d, %v", n, err)
				}
			})
		})
	}
}

// TestCompressionNotAsked: a client that names no compression gets its
// replies as they are, and a server with compression off (CompressMin < 0)
// names none, so a client that asks sends its calls as they are.
func TestCompressionNotAsked(t *testing.T) {
	doc := compressible(32<<10, 8)
	for _, tc := range []struct {
		name   string
		server reactor.Options
		client client.Options
	}{
		{"client without", reactor.Options{}, client.Options{}},
		{"server off", reactor.Options{CompressMin: -1}, client.Options{Compression: proto.CompressionZstd}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, compressRegistry(), tc.server)
			cl := dial(t, s, tc.client)
			got, err := cl.CallRaw(ctxT(t), builtin.EchoPacket, doc, nil)
			if err != nil || !bytes.Equal(got, doc) {
				t.Fatalf("echo: %d bytes, %v", len(got), err)
			}
			if in, out := s.Stats().BytesIn, sentSince(t, s, 0, uint64(len(doc))); in < uint64(len(doc)) || out < uint64(len(doc)) {
				t.Errorf("%d bytes echoed: %d in, %d out; want them as they are", len(doc), in, out)
			}
		})
	}
}

// TestCompressionRefused: a compressed call that does not expand, or
// expands past the frame limit, is refused unprocessed and the connection
// goes on; compression bits the protocol does not allow end it.
func TestCompressionRefused(t *testing.T) {
	s := start(t, compressRegistry(), reactor.Options{Limits: proto.Limits{MaxFrameSize: 1 << 20}})
	r := dialRaw(t, s)
	r.send(proto.AppendHello(nil, "", nil, proto.CompressionGzip))
	f, err := r.next()
	if err != nil || f.Kind != proto.KindWelcome {
		t.Fatalf("Welcome: %v, %v", f.Kind, err)
	}
	if takes, _ := f.Metadata.Get(proto.MetaCompression); string(takes) != "zstd,gzip" {
		t.Fatalf("the Welcome names %q, want zstd,gzip", takes)
	}
	callTo := func(route string, id uint32, c proto.Compression, payload []byte) []byte {
		h := proto.Header{Kind: proto.KindRequest, ID: id, Flags: proto.Flags(0).WithCompression(c)}
		return proto.AppendFrame(nil, h, route, nil, payload)
	}
	call := func(id uint32, c proto.Compression, payload []byte) []byte { return callTo("Len/Of", id, c, payload) }
	for _, tc := range []struct {
		name    string
		route   string
		c       proto.Compression
		payload []byte
		code    proto.Code
	}{
		{"past the frame limit", "Len/Of", proto.CompressionZstd, compression.Append(nil, make([]byte, 2<<20), proto.CompressionZstd), proto.CodeResourceExhausted},
		{"gzip past the frame limit", "Len/Of", proto.CompressionGzip, compression.Append(nil, make([]byte, 2<<20), proto.CompressionGzip), proto.CodeResourceExhausted},
		{"not gzip", "Len/Of", proto.CompressionGzip, []byte("plain text"), proto.CodeInvalidArgument},
		{"empty", "Len/Of", proto.CompressionZstd, nil, proto.CodeInvalidArgument},
		{"blocking, not zstd", "Block/Echo", proto.CompressionZstd, []byte("plain text"), proto.CodeInvalidArgument},
		{"blocking, past the frame limit", "Block/Echo", proto.CompressionGzip, compression.Append(nil, make([]byte, 2<<20), proto.CompressionGzip), proto.CodeResourceExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.send(callTo(tc.route, 7, tc.c, tc.payload))
			f, err := r.next()
			if err != nil || f.Kind != proto.KindError {
				t.Fatalf("answer: %v, %v", f.Kind, err)
			}
			code, msg := f.ErrorBody()
			if code != tc.code || f.Flags&proto.FlagUnprocessed == 0 {
				t.Fatalf("Error %v %q, flags %v; want %v, Unprocessed", code, msg, f.Flags, tc.code)
			}
		})
	}
	// What a payload may expand to is what the frame could hold
	// uncompressed: the limit less the header and the route.
	room := 1<<20 - proto.HeaderSize - len("Len/Of")
	r.send(call(11, proto.CompressionZstd, compression.Append(nil, make([]byte, room), proto.CompressionZstd)))
	if f, err = r.next(); err != nil || f.Kind != proto.KindResponse || string(f.Payload) != strconv.Itoa(room) {
		t.Fatalf("a call that expands to the frame's room: %v %q, %v", f.Kind, f.Payload, err)
	}
	r.send(call(12, proto.CompressionZstd, compression.Append(nil, make([]byte, room+1), proto.CompressionZstd)))
	if f, err = r.next(); err != nil || f.Kind != proto.KindError {
		t.Fatalf("a call one byte past the room: %v, %v", f.Kind, err)
	} else if code, _ := f.ErrorBody(); code != proto.CodeResourceExhausted {
		t.Fatalf("a call one byte past the room: %v, want ResourceExhausted", code)
	}

	// The connection goes on: a good compressed call, answered compressed
	// as the Hello asked.
	r.send(call(8, proto.CompressionGzip, compression.Append(nil, compressible(4000, 9), proto.CompressionGzip)))
	if f, err = r.next(); err != nil || f.Kind != proto.KindResponse || string(f.Payload) != "4000" {
		t.Fatalf("a good call after the refusals: %v %q, %v", f.Kind, f.Payload, err)
	}
	r.send(proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 9}, "Doc/Get", nil, nil))
	if f, err = r.next(); err != nil || f.Kind != proto.KindResponse || f.Flags.Compression() != proto.CompressionGzip {
		t.Fatalf("a large reply: %v, flags %v, %v; want a gzip Response", f.Kind, f.Flags, err)
	}
	if doc, err := compression.Expand(nil, f.Payload, proto.CompressionGzip, 1<<20); err != nil || !bytes.Equal(doc, compressible(64<<10, 7)) {
		t.Fatalf("the reply expands to %d bytes, %v", len(doc), err)
	}

	for _, tc := range []struct {
		name  string
		frame []byte
		msg   string
	}{
		{"reserved compression", proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 10, Flags: proto.FlagsCompression}, "Len/Of", nil, []byte("x")), "reserved compression 3"},
		{"compressed Ping", func() []byte {
			b := proto.AppendPing(nil, nil)
			proto.SetCompression(b, proto.CompressionGzip)
			return b
		}(), "a compressed Ping frame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, s)
			r.send(tc.frame)
			f, err := r.next()
			if err != nil || f.Kind != proto.KindGoAway {
				t.Fatalf("answer: %v, %v; want GoAway", f.Kind, err)
			}
			if _, _, msg := f.GoAwayBody(); !strings.Contains(string(msg), tc.msg) {
				t.Errorf("GoAway says %q, want %q in it", msg, tc.msg)
			}
		})
	}
}

// noise returns n bytes that do not compress.
func noise(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 3))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestCompressionCluster: a Cluster's Options.Compression reaches every
// node's connections.
func TestCompressionCluster(t *testing.T) {
	if overTLS {
		t.Skip("the Cluster dials plain TCP here")
	}
	s1, s2 := start(t, compressRegistry(), reactor.Options{}), start(t, compressRegistry(), reactor.Options{})
	ctx := ctxT(t)
	k, err := client.DialService(ctx, "static://"+s1.Addr().String()+","+s2.Addr().String()+"/svc",
		client.ServiceOptions{Options: client.Options{Compression: proto.CompressionGzip}})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	doc := compressible(32<<10, 10)
	for range 4 {
		got, err := k.CallRaw(ctx, builtin.EchoPacket, doc, nil)
		if err != nil || !bytes.Equal(got, doc) {
			t.Fatalf("echo through the cluster: %d bytes, %v", len(got), err)
		}
	}
	for i, s := range []*reactor.Server{s1, s2} {
		if in := s.Stats().BytesIn; in == 0 || in > 2*uint64(len(doc))/4 {
			t.Errorf("node %d read %d bytes for two 32 KiB calls; want them compressed", i+1, in)
		}
	}
}

// TestCompressionWithCredentials: one Hello carries the credentials and
// the compressions; the server authenticates it and settles compression
// in the same Welcome.
func TestCompressionWithCredentials(t *testing.T) {
	reg := compressRegistry()
	s := start(t, reg, reactor.Options{Authenticator: auth.Tokens{"s3cret": {Subject: "alice"}}})
	c := dial(t, s, client.Options{
		Credentials: &client.Credentials{Method: "token", Secret: []byte("s3cret")},
		Compression: proto.CompressionZstd,
	})
	before := welcomed(t, s)
	doc := compressible(32<<10, 11)
	got, err := c.CallRaw(ctxT(t), builtin.EchoPacket, doc, nil)
	if err != nil || !bytes.Equal(got, doc) {
		t.Fatalf("echo: %d bytes, %v", len(got), err)
	}
	if in, out := s.Stats().BytesIn, sentSince(t, s, before, 1); in > uint64(len(doc))/4 || out > uint64(len(doc))/4 {
		t.Errorf("32 KiB echoed: %d in, %d out; want both compressed", in, out)
	}
}

// TestStreamCompression: a stream's data travels compressed both ways
// when its opener names compressions in the StreamOpen and the acceptor
// answers with its own in the first StreamCredit; each end expands what
// it reads, so both see the stream's bytes as written. A client that names
// none, or a server with compression off, sends and gets every byte as it
// is; data that does not shrink goes as it is too. Streams the server
// opens to a client that takes compression are compressed the same way.
func TestStreamCompression(t *testing.T) {
	const size = 1 << 20
	doc := compressible(size, 5)
	for _, tc := range []struct {
		name   string
		zip    proto.Compression // the client's
		min    int               // the server's CompressMin
		data   []byte
		shrink bool // the bytes on the wire are under a quarter of the stream's, each way
	}{
		{"zstd", proto.CompressionZstd, 0, doc, true},
		{"gzip", proto.CompressionGzip, 0, doc, true},
		{"client off", proto.CompressionNone, 0, doc, false},
		{"server off", proto.CompressionZstd, -1, doc, false},
		{"noise", proto.CompressionZstd, 0, noise(size), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, streamRoutes(nil), reactor.Options{CompressMin: tc.min})
			c := dial(t, s, client.Options{Compression: tc.zip})
			in, out := s.Stats().BytesIn, s.Stats().BytesOut
			if tc.zip != proto.CompressionNone {
				out = welcomed(t, s) // a client that takes none sends no Hello
			}
			st, err := c.OpenStream(ctxT(t), "Echo")
			if err != nil {
				t.Fatal(err)
			}
			echoed := make(chan []byte, 1)
			go func() { b, _ := readAll(st); echoed <- b }()
			if _, err := st.Write(tc.data); err != nil {
				t.Fatal(err)
			}
			if err := st.CloseSend(); err != nil {
				t.Fatal(err)
			}
			if got := <-echoed; !bytes.Equal(got, tc.data) {
				t.Fatalf("echoed %d bytes, equal %v; want the %d written", len(got), bytes.Equal(got, tc.data), len(tc.data))
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			dIn := s.Stats().BytesIn - in
			if tc.shrink {
				dOut := sentSince(t, s, out, 1)
				if dIn > size/4 || dOut > size/4 {
					t.Fatalf("%d bytes in, %d out for a %d-byte echo: not compressed", dIn, dOut, size)
				}
			} else {
				dOut := sentSince(t, s, out, size) // times out if compressed
				if dIn < size || dOut < size {
					t.Fatalf("%d bytes in, %d out for a %d-byte echo: compressed", dIn, dOut, size)
				}
			}
		})
	}

	t.Run("from the server", func(t *testing.T) {
		clientReg := handler.NewRegistry()
		clientReg.HandleStream("Client/Echo", func(ctx context.Context, s handler.Stream) error {
			_, err := io.Copy(s, s)
			return err
		})
		reg := handler.NewRegistry()
		reg.HandleFunc("Ask/Echo", func(ctx context.Context, req, reply []byte) ([]byte, error) {
			st, err := handler.CallFrom(ctx).Peer.(handler.StreamOpener).OpenStream(ctx, "Client/Echo")
			if err != nil {
				return reply, err
			}
			echoed := make(chan []byte, 1)
			go func() { b, _ := io.ReadAll(st); echoed <- b }()
			if _, err := st.Write(doc); err != nil {
				return reply, err
			}
			st.CloseSend()
			if got := <-echoed; !bytes.Equal(got, doc) {
				return reply, fmt.Errorf("the client echoed %d bytes, not the %d sent", len(got), len(doc))
			}
			return append(reply, "ok"...), st.Close()
		}, handler.Blocking())
		s := start(t, reg, reactor.Options{})
		c := dial(t, s, client.Options{Handler: clientReg, Compression: proto.CompressionGzip})
		in, out := s.Stats().BytesIn, welcomed(t, s)
		if got, err := c.CallRaw(ctxT(t), "Ask/Echo", nil, nil); err != nil || string(got) != "ok" {
			t.Fatalf("%q, %v", got, err)
		}
		if dIn, dOut := s.Stats().BytesIn-in, sentSince(t, s, out, 1); dIn > size/4 || dOut > size/4 {
			t.Fatalf("%d bytes in, %d out for a %d-byte echo from the server: not compressed", dIn, dOut, size)
		}
	})
}

// TestStreamCompressionRaw: the frames of a compressed stream as a client
// of its own sends them. The server answers a StreamOpen that names
// compressions with its list in the first StreamCredit, and one that names
// none without; it expands compressed StreamData even on a stream that
// named none; data that does not expand resets that stream with
// InvalidArgument and leaves the connection serving; data that expands
// past the window granted ends the connection.
func TestStreamCompressionRaw(t *testing.T) {
	s := start(t, streamRoutes(nil), reactor.Options{})
	r := dialRaw(t, s)
	doc := compressible(4000, 9)
	gz := compression.Append(nil, doc, proto.CompressionGzip)
	md := proto.AppendMetadata(nil, proto.MetaCompression, []byte("brotli,gzip"))
	r.send(proto.AppendStreamOpen(nil, 1, "File/Sum", proto.CodecRaw, 0, md, 100))
	f, err := r.next()
	if err != nil || f.Kind != proto.KindStreamCredit || f.ID != 1 {
		t.Fatalf("got %v id %d (%v), want StreamCredit 1", f.Kind, f.ID, err)
	}
	if takes, _ := f.Metadata.Get(proto.MetaCompression); string(takes) != "zstd,gzip" {
		t.Fatalf("the first StreamCredit names %q, want zstd,gzip", takes)
	}
	data := proto.AppendStreamData(nil, 1, gz)
	proto.SetCompression(data, proto.CompressionGzip)
	r.send(append(data, proto.AppendStreamEnd(nil, 1)...))
	var sum []byte
	for {
		f, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		if f.Kind == proto.KindStreamData {
			if f.Flags.Compression() != proto.CompressionNone {
				t.Fatal("a 64-byte sum came compressed") // under CompressMin
			}
			sum = append(sum, f.Payload...)
		}
		if f.Kind == proto.KindStreamReset {
			break
		}
	}
	if want := sumOf(bytes.NewReader(doc)); string(sum) != want {
		t.Fatalf("sum %s, want %s of the bytes expanded", sum, want)
	}

	// A stream that names none: answered without a list, and what it
	// sends compressed is expanded all the same.
	r.send(proto.AppendStreamOpen(nil, 3, "File/Sum", proto.CodecRaw, 0, nil, 100))
	if f, _ = r.next(); f.Kind != proto.KindStreamCredit || len(f.Metadata) != 0 {
		t.Fatalf("got %v with metadata %q, want a bare StreamCredit", f.Kind, f.Metadata)
	}
	// Bad data: stream 3 is reset, the connection goes on.
	bad := proto.AppendStreamData(nil, 3, []byte("not gzip"))
	proto.SetCompression(bad, proto.CompressionGzip)
	r.send(bad)
	if f, _ = r.next(); f.Kind != proto.KindStreamReset || f.ID != 3 {
		t.Fatalf("got %v id %d, want StreamReset 3", f.Kind, f.ID)
	} else if code, msg := f.ErrorBody(); code != proto.CodeInvalidArgument {
		t.Fatalf("reset %v %q, want InvalidArgument", code, msg)
	}
	r.send(proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 7}, "Bytes/Echo", nil, []byte("still here")))
	if f, _ = r.next(); f.Kind != proto.KindResponse || string(f.Payload) != "still here" {
		t.Fatalf("got %v %q, want the echo", f.Kind, f.Payload)
	}

	// Past the window: 4,000 bytes expanded where the server granted its
	// window (256 KiB by default) less what came: send more than that.
	r.send(proto.AppendStreamOpen(nil, 5, "File/Sum", proto.CodecRaw, 0, md, 100))
	if f, _ = r.next(); f.Kind != proto.KindStreamCredit {
		t.Fatalf("got %v, want StreamCredit", f.Kind)
	}
	window := int(f.StreamWindow())
	big := compression.Append(nil, compressible(window+1, 3), proto.CompressionZstd)
	over := proto.AppendStreamData(nil, 5, big)
	proto.SetCompression(over, proto.CompressionZstd)
	r.send(over)
	if f, _ = r.next(); f.Kind != proto.KindGoAway {
		t.Fatalf("got %v, want GoAway for data expanding past the window", f.Kind)
	} else if _, code, msg := f.GoAwayBody(); !strings.Contains(string(msg), "window") {
		t.Fatalf("GoAway %v %q, want it to name the window", code, msg)
	}
}

// TestPubSubCompression: a subscription whose Subscribe names compressions
// gets its Messages' payloads compressed, compressed once per publish and
// compression however many subscribers take it; others get them as they
// are, from the same publish. Every subscriber reads the payload as
// published, on a channel or in a function, from a client's publish (fanned
// out by the event loop) or the server's (Server.Publish). A server with
// compression off, a payload under CompressMin, or one that does not
// shrink goes as it is.
func TestPubSubCompression(t *testing.T) {
	const size = 64 << 10
	doc := compressible(size, 11)
	for _, tc := range []struct {
		name    string
		min     int // the server's CompressMin
		payload []byte
		shrink  bool // compressed for the subscribers that ask
	}{
		{"compressed", 0, doc, true},
		{"server off", -1, doc, false},
		{"small", 0, doc[:500], false},
		{"noise", 0, noise(size), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, builtinRegistry(), reactor.Options{CompressMin: tc.min})
			type subscriber struct {
				zip proto.Compression
				fn  bool                // SubscribeFunc instead of a channel
				ch  chan client.Message // Subscribe's
				got chan []byte         // SubscribeFunc's function's copies
				c   *client.Client
			}
			subs := []*subscriber{
				{zip: proto.CompressionZstd}, {zip: proto.CompressionZstd, fn: true},
				{zip: proto.CompressionGzip}, {zip: proto.CompressionNone}, {zip: proto.CompressionNone, fn: true},
			}
			for _, sub := range subs {
				sub.got = make(chan []byte, 4)
				sub.c = dial(t, s, client.Options{Compression: sub.zip})
				var err error
				if sub.fn {
					_, err = sub.c.SubscribeFunc(ctxT(t), "docs.>", func(m client.Message) { sub.got <- bytes.Clone(m.Payload) })
				} else {
					sub.ch = make(chan client.Message, 4)
					_, err = sub.c.Subscribe(ctxT(t), "docs.>", sub.ch)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			pub := dial(t, s, client.Options{})
			if err := pub.PublishRaw(ctxT(t), "docs.client", tc.payload); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Publish("docs.server", proto.CodecRaw, tc.payload); err != nil {
				t.Fatal(err)
			}
			for i, sub := range subs {
				for range 2 {
					var got []byte
					select {
					case got = <-sub.got:
					case m := <-sub.ch:
						got = m.Payload
					case <-time.After(10 * time.Second):
						t.Fatalf("subscriber %d (%v): no message", i, sub.zip)
					}
					if !bytes.Equal(got, tc.payload) {
						t.Fatalf("subscriber %d (%v) got %d bytes, not the %d published", i, sub.zip, len(got), len(tc.payload))
					}
				}
			}
			if st := s.PubSubStats(); st.Delivered != 2*uint64(len(subs)) || st.Dropped != 0 {
				t.Fatalf("stats %+v", st)
			}

			// The bytes: a publish to one subscriber of each kind alone.
			for _, zip := range []proto.Compression{proto.CompressionZstd, proto.CompressionNone} {
				c := dial(t, s, client.Options{Compression: zip})
				ch := make(chan client.Message, 1)
				if _, err := c.Subscribe(ctxT(t), "alone", ch); err != nil {
					t.Fatal(err)
				}
				out := s.Stats().BytesOut
				if _, err := s.Publish("alone", proto.CodecRaw, tc.payload); err != nil {
					t.Fatal(err)
				}
				if m := <-ch; !bytes.Equal(m.Payload, tc.payload) {
					t.Fatalf("%v: the message alone is not what was published", zip)
				}
				n := len(tc.payload)
				if zip != proto.CompressionNone && tc.shrink {
					if sent := sentSince(t, s, out, 1); sent > uint64(n)/4 {
						t.Fatalf("%v: %d bytes out for a %d-byte message: not compressed", zip, sent, n)
					}
				} else {
					sentSince(t, s, out, uint64(n)) // times out if compressed
				}
				c.Close()
			}
		})
	}
}
