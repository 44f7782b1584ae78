package reactor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// Routes FuzzLiveServer adds to the built-in ones: a Blocking echo, for
// the pool, and a handler that panics.
const (
	liveBlockingEcho = "Fuzz/BlockingEcho"
	livePanic        = "Fuzz/Panic"
)

// liveReadFor is how long FuzzLiveServer reads the server's answer to one
// input before it closes the connection.
const liveReadFor = 50 * time.Millisecond

// FuzzLiveServer writes fuzzed bytes to a real server over TCP, in one to
// three writes, reads what comes back for a short while, and closes. Then:
//   - the server is still serving: a healthy client on a connection of its
//     own gets its echo from Bench/EchoPacket;
//   - the server logged no panic of its own and no error;
//   - what the server wrote is a sequence of valid frames;
//   - the server ended the connection for a protocol error (GoAway with
//     Internal) exactly when proto.Decode finds one in the bytes sent;
//   - it answered only calls that were made, each at most as often as it
//     was made, and (when all the bytes sent are whole, valid frames, and
//     no Cancel or GoAway among them) every call to a route that answers
//     at once, with the echo for Bench/EchoPacket.
//
// One server serves all the inputs of a fuzzing process; it is shut down
// when the target ends, before the package's leak check.
func FuzzLiveServer(f *testing.F) {
	for _, s := range liveSeeds() {
		f.Add(s, uint16(0), uint16(0), uint8(0))
	}
	// Some cut in pieces, with the write side closed after, with a reset,
	// with a Ping after them.
	for _, s := range liveSeeds()[:4] {
		f.Add(s, uint16(len(s)/3), uint16(2*len(s)/3), uint8(1))
		f.Add(s, uint16(1), uint16(25), uint8(2))
		f.Add(s, uint16(0), uint16(0), uint8(4))
	}

	logs := &liveLog{}
	srv := reactor.New(liveRegistry(), reactor.Options{Logger: slog.New(logs)})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			f.Errorf("Shutdown: %v", err)
		}
	})
	addr := srv.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	healthy, err := client.Dial(ctx, addr, client.Options{})
	cancel()
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { healthy.Close() })

	var n int
	f.Fuzz(func(t *testing.T, in []byte, cut1, cut2 uint16, mode uint8) {
		n++
		if mode&4 != 0 {
			in = proto.AppendPing(in[:len(in):len(in)], liveSentinel)
		}
		got, end, err := liveExchange(addr, in, cut1, cut2, mode)
		if err != nil {
			t.Fatalf("input %s: %v", liveShow(in), err)
		}

		// The server still serves a well-behaved client.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		want := fmt.Appendf(nil, "healthy %d", n)
		reply, err := healthy.CallRaw(ctx, builtin.EchoPacket, want, nil)
		if err != nil || !bytes.Equal(reply, want) {
			t.Fatalf("input %s: after it, the healthy client's echo of %q is %q, %v", liveShow(in), want, reply, err)
		}
		if msgs := logs.take(); len(msgs) > 0 {
			t.Fatalf("input %s: the server logged\n%s", liveShow(in), strings.Join(msgs, "\n"))
		}
		if err := liveCheck(in, got, end); err != nil {
			t.Fatalf("input %s (mode %d, cuts %d %d)\nserver wrote %s, then %v:\n%v", liveShow(in), mode, cut1, cut2, liveShow(got), end, err)
		}
	})
}

// liveEnd is how the read of the server's answer ended.
type liveEnd int

const (
	liveOpen  liveEnd = iota // the server kept the connection
	liveEOF                  // the server closed it
	liveReset                // it was reset: what the server wrote last may be lost
)

func (e liveEnd) String() string {
	return [...]string{"kept the connection", "closed it", "it was reset"}[e]
}

// liveSentinel is the payload of the Ping FuzzLiveServer may send after an
// input: its Pong says the server has answered everything before it.
var liveSentinel = []byte("rpcd fuzz sentinel")

// liveExchange dials addr, writes in (cut at cut1 and cut2, modulo its
// length, with a pause between the pieces), half-closes the connection if
// mode&1, reads until liveReadFor has passed, the server closes or, if
// mode&4, the Pong of a Ping sent after in comes back, and closes: with a
// reset if mode&2. It returns what the server wrote and how the read
// ended.
func liveExchange(addr string, in []byte, cut1, cut2 uint16, mode uint8) (got []byte, end liveEnd, err error) {
	nc, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, liveOpen, fmt.Errorf("dial: %v", err)
	}
	tc := nc.(*net.TCPConn)
	defer func() {
		if mode&2 != 0 {
			_ = tc.SetLinger(0) // close with RST
		}
		tc.Close()
	}()
	cuts := []int{0}
	if len(in) > 0 {
		a, b := int(cut1)%len(in), int(cut2)%len(in)
		cuts = append(cuts, min(a, b), max(a, b))
	}
	cuts = append(cuts, len(in))
	_ = tc.SetDeadline(time.Now().Add(time.Second))
	for i := 1; i < len(cuts); i++ {
		piece := in[cuts[i-1]:cuts[i]]
		if len(piece) == 0 {
			continue
		}
		if i > 1 {
			time.Sleep(2 * time.Millisecond) // let the server see the pieces apart
		}
		if _, err := tc.Write(piece); err != nil {
			// The server may close while bytes are still going out, after a
			// protocol error it has seen in the first ones.
			if liveIsClosed(err) {
				break
			}
			return nil, liveOpen, fmt.Errorf("write: %v", err)
		}
	}
	if mode&1 != 0 {
		_ = tc.CloseWrite()
	}
	_ = tc.SetReadDeadline(time.Now().Add(liveReadFor))
	buf := make([]byte, 4096)
	pong := proto.AppendPong(nil, liveSentinel)
	for {
		n, err := tc.Read(buf)
		got = append(got, buf[:n]...)
		switch {
		case err == nil && mode&4 != 0 && bytes.HasSuffix(got, pong):
			return got, liveOpen, nil
		case err == nil:
			continue
		case errors.Is(err, os.ErrDeadlineExceeded):
			return got, liveOpen, nil
		case err == io.EOF:
			return got, liveEOF, nil
		case liveIsClosed(err):
			return got, liveReset, nil
		default:
			return got, liveOpen, fmt.Errorf("read: %v", err)
		}
	}
}

// liveIsClosed reports whether err is the peer closing or resetting the
// connection.
func liveIsClosed(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection reset") || strings.Contains(s, "broken pipe")
}

// liveRegistry is the live server's routes: the built-in ones and two of
// the fuzz target's own.
func liveRegistry() *handler.Registry {
	reg := handler.NewRegistry()
	builtin.Register(reg)
	reg.HandleFunc(liveBlockingEcho, func(_ context.Context, req, reply []byte) ([]byte, error) {
		return append(reply, req...), nil
	}, handler.Blocking())
	reg.HandleFunc(livePanic, func(context.Context, []byte, []byte) ([]byte, error) {
		panic("Fuzz/Panic panics")
	})
	return reg
}

// liveRoutes answers, for the checks, which routes the live server has.
var liveRoutes = liveRegistry()

// liveCall is one call of the input, as proto.Decode reads it.
type liveCall struct {
	route   string
	codec   proto.Codec
	payload []byte // expanded, if it came compressed
	refused bool   // compressed, and does not expand within its frame's room
	made    int    // Requests with this id
}

// liveCheck checks what the server wrote, got, against the bytes it was
// sent, in, and how the connection ended.
func liveCheck(in, got []byte, end liveEnd) error {
	// What the input holds, frame by frame, as proto reads it.
	calls := map[uint32]*liveCall{}
	var inErr error
	whole, quiet := true, true // all of in is whole valid frames; no Cancel, GoAway
	// Streams the input opens. Whether a stream frame breaks the protocol
	// can hang on timing (a handler that has returned forgets its stream,
	// whose late frames are then dropped; one that reads grants more
	// window): streamMaybe notes input the server may refuse.
	streams := map[uint32]*liveStream{}
	streamMaybe := false
	greeted, goneAway := false, false // a frame but Ping or Hello came; the input's GoAway
	for rest := in; len(rest) > 0 && inErr == nil; {
		f, n, err := proto.Decode(rest, nil)
		if err != nil {
			inErr = err
			break
		}
		if n == 0 {
			whole = false
			break
		}
		// The rules of a connection's frames in order (docs/protocol.md,
		// "Frames in order"): what the frame alone does not break.
		switch f.Kind {
		case proto.KindWelcome, proto.KindMessage:
			inErr = fmt.Errorf("a %v from a client", f.Kind)
		case proto.KindHello:
			if greeted {
				inErr = errors.New("a Hello that is not the first frame")
			}
		case proto.KindRequest, proto.KindOneWay, proto.KindStreamOpen, proto.KindSubscribe, proto.KindPublish:
			if goneAway {
				inErr = fmt.Errorf("a %v after the client's GoAway", f.Kind)
			}
		case proto.KindGoAway:
			goneAway = true
		case proto.KindStreamReset:
			if code, _ := f.ErrorBody(); code == proto.CodeOK && proto.StreamOpenedByClient(f.ID) {
				inErr = errors.New("a StreamReset with code 0 from the opener")
			}
		}
		greeted = greeted || f.Kind != proto.KindPing
		if inErr != nil {
			break
		}
		st := streams[f.ID]
		switch f.Kind {
		case proto.KindStreamOpen:
			switch {
			case !proto.StreamOpenedByClient(f.ID):
				inErr = errors.New("StreamOpen with an even stream id from the client")
			case st != nil:
				streamMaybe = true // still open, or finished and forgotten
			default:
				streams[f.ID] = &liveStream{}
			}
		case proto.KindStreamData:
			if st == nil {
				break
			}
			streamMaybe = streamMaybe || st.ended
			data := f.Payload
			if z := f.Flags.Compression(); z != proto.CompressionNone {
				var err error
				data, err = compression.Expand(nil, f.Payload, z, liveStreamWindow)
				if errors.Is(err, compression.ErrTooLarge) {
					streamMaybe = true // past the window, unless the handler read and granted more
				} else if err != nil && !st.ended {
					delete(streams, f.ID) // the server resets the stream: later frames of it are dropped
					break
				}
			}
			st.sent += len(data)
			streamMaybe = streamMaybe || st.sent > liveStreamWindow
		case proto.KindStreamEnd:
			if st != nil {
				streamMaybe = streamMaybe || st.ended
				st.ended = true
			}
		case proto.KindStreamCredit:
			if st != nil {
				st.credit += int64(f.StreamWindow())
				streamMaybe = streamMaybe || st.credit > proto.MaxStreamWindow-liveStreamWindow
			}
		case proto.KindStreamReset:
			delete(streams, f.ID) // finished: the id may open a new stream
		}
		switch f.Kind {
		case proto.KindRequest:
			c := calls[f.ID]
			if c == nil {
				c = &liveCall{route: string(f.Route), codec: f.Codec, payload: f.Payload}
				if z := f.Flags.Compression(); z != proto.CompressionNone {
					var err error
					c.payload, err = compression.Expand(nil, f.Payload, z, f.PayloadRoom(proto.DefaultMaxFrameSize))
					c.refused = err != nil
				}
				calls[f.ID] = c
			}
			c.made++
		case proto.KindCancel, proto.KindGoAway:
			quiet = false
		}
		rest = rest[n:]
	}

	// What the server wrote: whole, valid frames only.
	answered := map[uint32][]proto.Frame{}
	var goAway *proto.Frame
	for rest := got; len(rest) > 0; {
		f, n, err := proto.Decode(rest, nil)
		if err != nil {
			return fmt.Errorf("the server wrote a frame that breaks the protocol: %v", err)
		}
		if n == 0 {
			if end == liveEOF {
				return fmt.Errorf("the server closed the connection in the middle of a frame (% x)", rest)
			}
			break // the rest was on its way when the read stopped
		}
		switch f.Kind {
		case proto.KindResponse, proto.KindError:
			answered[f.ID] = append(answered[f.ID], f)
		case proto.KindGoAway:
			if goAway != nil {
				return errors.New("the server sent two GoAways")
			}
			goAway = &f
		}
		rest = rest[n:]
	}

	// A protocol error in the input, and only then, ends the connection
	// with a GoAway (Internal). A reset may lose the GoAway: the kernel
	// resets a connection closed with bytes unread, and drops what was
	// received but not yet read.
	var code proto.Code
	var msg []byte
	if goAway != nil {
		_, code, msg = goAway.GoAwayBody()
	}
	switch {
	case inErr != nil && goAway == nil && end != liveReset:
		return fmt.Errorf("input breaks the protocol (%v); the server sent no GoAway and %v", inErr, end)
	case inErr != nil && goAway != nil && code != proto.CodeInternal:
		return fmt.Errorf("input breaks the protocol (%v); the server's GoAway has code %v %q", inErr, code, msg)
	case inErr == nil && goAway != nil && code == proto.CodeInternal &&
		!(streamMaybe && bytes.Contains(bytes.ToLower(msg), []byte("stream"))):
		return fmt.Errorf("the server found a protocol error (%q) where proto.Decode finds none", msg)
	}

	// Answers go to calls that were made, at most once per Request.
	for id, fs := range answered {
		c := calls[id]
		if c == nil {
			return fmt.Errorf("the server answered call %d, which was never made (as a Request)", id)
		}
		if len(fs) > c.made {
			return fmt.Errorf("the server answered call %d %d times; it was made %d times", id, len(fs), c.made)
		}
	}
	if !whole || !quiet || inErr != nil || streamMaybe && (goAway != nil || end != liveOpen) {
		return nil
	}
	// Every call on a route that answers at once is answered, and an echo
	// is the request's payload in its codec.
	for id, c := range calls {
		if c.route == liveBlockingEcho {
			continue
		}
		fs := answered[id]
		if len(fs) == 0 {
			return fmt.Errorf("call %d to %s got no answer", id, c.route)
		}
		f := fs[0]
		if c.refused && c.made == 1 {
			code, _ := f.ErrorBody()
			if liveRoutes.Lookup([]byte(c.route)) == nil { // refused first as no route (testdata's 1b6139705c734c6a)
				if f.Kind != proto.KindError || code != proto.CodeNotFound {
					return fmt.Errorf("call %d, compressed, to no route: answered %v code %v, want NotFound", id, f.Kind, code)
				}
				continue
			}
			if f.Kind != proto.KindError || f.Flags&proto.FlagUnprocessed == 0 ||
				code != proto.CodeInvalidArgument && code != proto.CodeResourceExhausted {
				return fmt.Errorf("call %d, compressed, does not expand: answered %v %v, want InvalidArgument or ResourceExhausted, Unprocessed", id, f.Kind, f.Flags)
			}
			continue
		}
		if c.route == builtin.EchoPacket && c.made == 1 {
			payload := f.Payload
			if z := f.Flags.Compression(); z != proto.CompressionNone { // the input's Hello asked for it
				var err error
				if payload, err = compression.Expand(nil, f.Payload, z, proto.DefaultMaxFrameSize); err != nil {
					return fmt.Errorf("call %d: a compressed reply that does not expand: %v", id, err)
				}
			}
			if f.Kind != proto.KindResponse || !bytes.Equal(payload, c.payload) || f.Codec != c.codec {
				return fmt.Errorf("call %d to %s: %v codec %v payload %q; want the echo, codec %v payload %q", id, c.route, f.Kind, f.Codec, payload, c.codec, c.payload)
			}
		}
	}
	return nil
}

// liveStream is a stream the input opened, as the server may see it.
type liveStream struct {
	sent   int   // StreamData bytes sent on it
	credit int64 // credit granted to the server
	ended  bool  // StreamEnd sent
}

// liveStreamWindow is the window the live server grants a stream: the
// default.
const liveStreamWindow = 256 << 10

// liveShow quotes bytes for a failure message, cut short if long.
func liveShow(b []byte) string {
	if len(b) > 200 {
		return fmt.Sprintf("%q... (%d bytes)", b[:200], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// liveLog is a slog.Handler that keeps the server's warnings and errors,
// but for the panics of Fuzz/Panic, which are expected.
type liveLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *liveLog) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelWarn }

func (l *liveLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	expected := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "route" && a.Value.String() == livePanic {
			expected = true
		}
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	if expected && r.Message == "rpcd: handler panicked" {
		return nil
	}
	l.mu.Lock()
	l.msgs = append(l.msgs, b.String())
	l.mu.Unlock()
	return nil
}

func (l *liveLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *liveLog) WithGroup(string) slog.Handler      { return l }

// take returns the messages kept since the last take.
func (l *liveLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	msgs := l.msgs
	l.msgs = nil
	return msgs
}

// liveSeeds are byte streams a client could send: valid frames of every
// kind alone and pipelined, garbage, headers announcing huge sections,
// broken metadata and routes, and valid frames followed by broken ones.
func liveSeeds() [][]byte {
	req := func(id uint32, route string, codec proto.Codec, md proto.Metadata, payload string) []byte {
		return proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, Codec: codec, ID: id}, route, md, []byte(payload))
	}
	oneWay := func(id uint32, route, payload string) []byte {
		return proto.AppendFrame(nil, proto.Header{Kind: proto.KindOneWay, ID: id}, route, nil, []byte(payload))
	}
	cat := func(frames ...[]byte) []byte { return bytes.Join(frames, nil) }
	compressed := func(id uint32, c proto.Compression, payload string) []byte {
		h := proto.Header{Kind: proto.KindRequest, ID: id, Flags: proto.Flags(0).WithCompression(c)}
		return proto.AppendFrame(nil, h, builtin.EchoPacket, nil, compression.Append(nil, []byte(payload), c))
	}
	streamData := func(id uint32, c proto.Compression, payload []byte) []byte {
		b := proto.AppendStreamData(nil, id, payload)
		proto.SetCompression(b, c)
		return b
	}
	// header returns a bare header with the given fields.
	header := func(kind proto.Kind, flags proto.Flags, routeLen uint16, id uint32, mdLen uint16, payloadLen uint32) []byte {
		h := proto.AppendFrame(nil, proto.Header{Kind: kind, Flags: flags, ID: id}, "", nil, nil)
		h[6], h[7] = byte(routeLen>>8), byte(routeLen)
		h[16], h[17] = byte(mdLen>>8), byte(mdLen)
		h[20], h[21], h[22], h[23] = byte(payloadLen>>24), byte(payloadLen>>16), byte(payloadLen>>8), byte(payloadLen)
		return h
	}
	md := proto.AppendMetadata(proto.AppendMetadata(nil, "traceparent", []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")), "tenant", []byte("acme"))
	echo := req(1, builtin.EchoPacket, proto.CodecRaw, nil, "ping")
	sum := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, Codec: proto.CodecJSON, ID: 2, Deadline: 1000}, builtin.Sum, nil, []byte(`{"a":1,"b":2}`))
	withDeadline := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 3, Deadline: 1}, liveBlockingEcho, nil, []byte("late"))

	return [][]byte{
		// Valid frames, alone and pipelined.
		echo,
		sum,
		req(3, builtin.EchoPacket, proto.CodecJSON, md, `"with metadata"`),
		cat(echo, proto.AppendPing(nil, []byte("12345678")), oneWay(7, builtin.EchoPacket, "one way"), sum,
			req(4, "No/Such", proto.CodecRaw, nil, ""), req(5, liveBlockingEcho, proto.CodecRaw, nil, "pool"),
			proto.AppendCancel(nil, 5), req(6, livePanic, proto.CodecRaw, nil, ""), req(8, builtin.Routes, proto.CodecJSON, nil, "")),
		oneWay(1, builtin.EchoPacket, "x"),
		proto.AppendPing(nil, nil),
		proto.AppendCancel(nil, 9),
		withDeadline,
		cat(req(1, liveBlockingEcho, proto.CodecRaw, nil, "a"), req(1, liveBlockingEcho, proto.CodecRaw, nil, "b")), // an id in flight twice
		cat(req(1, builtin.EchoPacket, proto.CodecRaw, nil, "a"), req(1, builtin.EchoPacket, proto.CodecRaw, nil, "b")),
		req(0xFFFFFFFF, builtin.EchoPacket, proto.CodecRaw, nil, "last id"),
		req(10, builtin.Sum, proto.CodecJSON, nil, `{"a":`),               // arguments that do not decode
		req(11, builtin.Sum, proto.CodecRaw, nil, `{"a":1}`),              // a codec the route does not take
		req(12, builtin.EchoString, proto.CodecJSON, nil, "\"\xff\xfe\""), // not UTF-8
		req(13, builtin.EchoPacket, 0x80, nil, "user codec"),
		// Compression: a Hello that asks for it, then calls compressed,
		// one that does not expand, and a reply large enough to come
		// back compressed.
		cat(proto.AppendHello(nil, "", nil, proto.CompressionZstd, proto.CompressionGzip),
			compressed(15, proto.CompressionGzip, strings.Repeat("gzip me ", 200)),
			compressed(16, proto.CompressionZstd, strings.Repeat("zstd me ", 200)),
			req(17, builtin.EchoPacket, proto.CodecRaw, nil, strings.Repeat("reply ", 400))),
		cat(compressed(18, proto.CompressionGzip, "x"), compressed(19, proto.CompressionZstd, "y")),
		proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 20, Flags: proto.Flags(0).WithCompression(proto.CompressionGzip)}, builtin.EchoPacket, nil, []byte("not gzip")),
		// Frames a server does not expect from a client.
		cat(proto.AppendFrame(nil, proto.Header{Kind: proto.KindResponse, ID: 1}, "", nil, []byte("stray")),
			proto.AppendError(nil, 2, proto.FlagUnprocessed, proto.CodeNotFound, "stray"),
			proto.AppendPong(nil, []byte("stray")), echo),
		cat(echo, proto.AppendGoAway(nil, 1, proto.CodeInternal, "client goes away"), sum),
		cat(echo, proto.AppendGoAway(nil, 1, proto.CodeUnavailable, "client goes away"), proto.AppendPing(nil, nil), proto.AppendCancel(nil, 1)),
		proto.AppendFrame(nil, proto.Header{Kind: 0x10}, "", nil, []byte("hello?")),
		// Frames in the wrong order: a Welcome, a Hello after a call or
		// after a Hello, a StreamReset of code 0 from the opener.
		cat(proto.AppendWelcome(nil, "me"), echo),
		cat(echo, proto.AppendHello(nil, "", nil, proto.CompressionGzip), sum),
		cat(proto.AppendPing(nil, nil), proto.AppendHello(nil, "", nil), proto.AppendHello(nil, "", nil)),
		cat(proto.AppendStreamOpen(nil, 1, builtin.StreamSink, proto.CodecRaw, 0, nil, 1024), proto.AppendStreamReset(nil, 1, 0, proto.CodeOK, ""), echo),
		// Streams: an upload, a download left unread, frames of unknown
		// streams, an overrun, an even id from the client.
		cat(proto.AppendStreamOpen(nil, 1, builtin.StreamSink, proto.CodecRaw, 0, nil, 1024),
			proto.AppendStreamData(nil, 1, []byte("stream bytes")), proto.AppendStreamEnd(nil, 1), echo),
		cat(proto.AppendStreamOpen(nil, 3, builtin.StreamSource, proto.CodecRaw, 500, nil, 100),
			proto.AppendStreamData(nil, 3, []byte{0, 0, 0, 0, 0, 1, 0, 0}), sum),
		cat(proto.AppendStreamData(nil, 9, []byte("x")), proto.AppendStreamCredit(nil, 9, 1),
			proto.AppendStreamEnd(nil, 9), proto.AppendStreamReset(nil, 9, 0, proto.CodeCanceled, ""), echo),
		cat(proto.AppendStreamOpen(nil, 5, builtin.StreamSink, proto.CodecRaw, 0, nil, 0),
			proto.AppendStreamData(nil, 5, make([]byte, 300<<10))),
		proto.AppendStreamOpen(nil, 2, builtin.StreamSink, proto.CodecRaw, 0, nil, 0),
		// Compressed streams: one that names compressions and sends its
		// data gzipped, data that does not expand, data that expands past
		// the window.
		cat(proto.AppendStreamOpen(nil, 11, builtin.StreamSink, proto.CodecRaw, 0,
			proto.AppendMetadata(nil, proto.MetaCompression, []byte("zstd,gzip")), 1024),
			streamData(11, proto.CompressionGzip, compression.Append(nil, bytes.Repeat([]byte("log "), 500), proto.CompressionGzip)),
			proto.AppendStreamEnd(nil, 11), echo),
		cat(proto.AppendStreamOpen(nil, 13, builtin.StreamSink, proto.CodecRaw, 0, nil, 0),
			streamData(13, proto.CompressionZstd, []byte("not zstd")), proto.AppendStreamData(nil, 13, []byte("late")), echo),
		cat(proto.AppendStreamOpen(nil, 15, builtin.StreamSink, proto.CodecRaw, 0, nil, 0),
			streamData(15, proto.CompressionZstd, compression.Append(nil, make([]byte, 300<<10), proto.CompressionZstd))),
		// Publish and subscribe: a subscription that takes compressed
		// Messages and one that does not, a publish both get (compressed
		// for the first), one neither does, an unsubscribe.
		cat(proto.AppendSubscribe(nil, 1, "logs.>", proto.CompressionZstd, proto.CompressionGzip),
			proto.AppendSubscribe(nil, 2, "logs.web"),
			proto.AppendPublish(nil, "logs.web", proto.CodecRaw, bytes.Repeat([]byte("GET / 200; "), 200)),
			proto.AppendPublish(nil, "other", proto.CodecRaw, []byte("x")),
			proto.AppendUnsubscribe(nil, 1, proto.CodeOK, ""), echo),
		// Garbage.
		[]byte("GET / HTTP/1.1\r\nHost: rpcd\r\n\r\n"),
		make([]byte, proto.HeaderSize),
		[]byte("RD"),
		[]byte("RD\x01"),
		{0xff, 0xfe, 0xfd, 0x00, 0x01, 0x02, 0x52, 0x44, 0x01, 0x01},
		// Headers announcing huge sections, with or without the bytes.
		header(proto.KindRequest, 0, 8, 1, 0, 0xFFFFFFFF),
		header(proto.KindRequest, 0, 0xFFFF, 1, 0, 0),
		header(proto.KindRequest, 0, 8, 1, 0xFFFF, 0),
		append(header(proto.KindRequest, 0, 16, 1, 0, proto.DefaultMaxFrameSize-proto.HeaderSize-16), "Bench/EchoPacket0123"...), // at the limit, never finished
		append(header(proto.KindRequest, 0, 16, 1, 0, proto.DefaultMaxFrameSize-proto.HeaderSize-15), "Bench/EchoPacket"...),     // one past it
		append(header(proto.KindResponse, 0, 0, 1, 0, 100<<10), "partial"...),
		req(14, builtin.EchoPacket, proto.CodecRaw, nil, strings.Repeat("big frame ", 7000)), // past the server's 64 KiB big-frame size
		// Broken metadata and routes.
		proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, builtin.EchoPacket, proto.Metadata{0, 0, 0}, nil),                // a zero key length
		proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, builtin.EchoPacket, proto.Metadata{3, 'k', 'e', 'y', 0, 9}, nil), // a value past the section
		proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, builtin.EchoPacket, proto.Metadata{1, ' ', 0, 0}, nil),           // a key byte that is not printable
		cat(echo, proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 2}, "Bench/Echo Packet", nil, nil)),                        // a space in a route
		proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, "Bench/\x7fEcho", nil, nil),
		proto.AppendFrame(nil, proto.Header{Kind: proto.KindResponse, ID: 1}, "Route/OnResponse", nil, nil),
		// Valid frames, then header fields a kind may not carry.
		cat(echo, header(proto.KindRequest, 0, 0, 1, 0, 0)),           // a Request without a route
		cat(echo, header(proto.KindPing, 0, 0, 1, 0, 0)),              // a Ping with a call id
		cat(echo, header(proto.KindCancel, 0, 0, 1, 0, 1), []byte{0}), // a Cancel with a payload
		cat(echo, header(proto.KindRequest, proto.FlagUnprocessed, 0, 1, 0, 0)),
		cat(echo, header(0x09, 0, 0, 1, 0, 0)),
		cat(sum, []byte{'R', 'D', 0x02, 0x01}),
		cat(sum, header(proto.KindError, 0, 0, 1, 0, 1), []byte{0}), // an Error body shorter than its code
		cat(sum, header(proto.KindGoAway, 0, 0, 0, 0, 5), []byte{0, 0, 0, 0, 0}),
		append(append([]byte(nil), echo[:18]...), append([]byte{0, 1}, echo[20:]...)...), // a reserved field not zero
	}
}
