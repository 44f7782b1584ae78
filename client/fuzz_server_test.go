package client_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/proto"
)

// fzCallTimeout is the context of FuzzClientFromServer's call; a call
// that has not returned by fzHang is taken as hung.
const (
	fzCallTimeout = 200 * time.Millisecond
	fzHang        = 5 * time.Second
)

// fzReadBuf is the client's read buffer; frames larger than it take
// another path (client/wire.go), which the seeds cover.
const fzReadBuf = 64 << 10

// FuzzClientFromServer points a client at a fake server that answers each
// connection's first Request with the fuzzed bytes (the call id of their
// first frame set to the Request's when they begin with a Response or an
// Error header, unless mode&4), in one write or two (mode&2), and then
// closes the connection, or (mode&1) keeps it open and reads until the
// client closes it. The client makes one CallRaw with a 200ms context, and:
//   - the call returns, a reply or an *handler.Error, in bounded time, and
//     so does Close;
//   - a reply is the payload of a Response among the bytes;
//   - when the first valid frame answering the call is a Response, the
//     call returns its payload; when it is an Error that the client does
//     not retry, the call fails with its code;
//   - what the client writes on a connection kept open is valid frames.
//
// The package's TestMain checks, after all the tests, that no goroutine is
// left.
func FuzzClientFromServer(f *testing.F) {
	for _, s := range fzSeeds() {
		f.Add(s, uint8(0))
	}
	for _, s := range fzSeeds()[:6] {
		f.Add(s, uint8(1)) // the connection kept open
		f.Add(s, uint8(2)) // in two writes
	}
	f.Fuzz(func(t *testing.T, in []byte, mode uint8) {
		srv := newFzServer(t, in, mode)
		defer srv.close()

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := client.Dial(ctx, srv.addr(), client.Options{
			DialTimeout: 200 * time.Millisecond,
			MinBackoff:  time.Millisecond,
			MaxBackoff:  10 * time.Millisecond,
		})
		cancel()
		if err != nil {
			t.Fatalf("Dial: %v", err)
		}
		type result struct {
			reply []byte
			err   error
		}
		done := make(chan result, 1)
		start := time.Now()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), fzCallTimeout)
			defer cancel()
			reply, err := c.CallRaw(ctx, builtin.EchoPacket, []byte("ping"), nil)
			done <- result{reply, err}
		}()
		var res result
		select {
		case res = <-done:
		case <-time.After(fzHang):
			t.Fatalf("bytes %s (mode %d): the call has not returned after %v\n%s", fzShow(in), mode, fzHang, fzStacks())
		}
		took := time.Since(start)
		closed := make(chan struct{})
		go func() { c.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(fzHang):
			t.Fatalf("bytes %s (mode %d): Close has not returned after %v\n%s", fzShow(in), mode, fzHang, fzStacks())
		}
		srv.close()

		if res.err != nil {
			var e *handler.Error
			if !errors.As(res.err, &e) {
				t.Fatalf("bytes %s (mode %d): the call's error %T %v is not a *handler.Error", fzShow(in), mode, res.err, res.err)
			}
		}
		if err := srv.check(res.reply, res.err); err != nil {
			t.Fatalf("bytes %s (mode %d): the call returned %q, %v after %v: %v", fzShow(in), mode, res.reply, res.err, took, err)
		}
	})
}

// fzServer is a listener that answers every connection's first Request
// with the fuzzed bytes.
type fzServer struct {
	t    *testing.T
	ln   net.Listener
	in   []byte
	mode uint8
	wg   sync.WaitGroup
	once sync.Once

	mu    sync.Mutex
	conns []*fzConn // in the order accepted
}

// fzConn is what happened on one connection.
type fzConn struct {
	nc    net.Conn
	id    uint32 // the first Request's call id; 0 if none came
	sent  []byte // the bytes written, after the id was set
	extra []byte // what the client wrote after the Request (mode&1)
	err   error  // a frame the client wrote that breaks the protocol
}

func newFzServer(t *testing.T, in []byte, mode uint8) *fzServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fzServer{t: t, ln: ln, in: in, mode: mode}
	s.wg.Add(1)
	go s.accept()
	return s
}

func (s *fzServer) addr() string { return s.ln.Addr().String() }

func (s *fzServer) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		fc := &fzConn{nc: nc}
		s.mu.Lock()
		s.conns = append(s.conns, fc)
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer nc.Close()
			s.serve(fc)
		}()
	}
}

// serve reads frames until a Request, writes the bytes back, and closes or,
// if mode&1, reads what the client writes until it closes.
func (s *fzServer) serve(fc *fzConn) {
	_ = fc.nc.SetDeadline(time.Now().Add(2 * time.Second))
	br := bufio.NewReader(fc.nc)
	for fc.id == 0 {
		f, err := fzReadFrame(br)
		if err != nil {
			if errors.Is(err, proto.ErrProtocol) {
				fc.err = err
			}
			return
		}
		if f.Kind == proto.KindRequest {
			fc.id = f.ID
		}
	}
	fc.sent = append([]byte(nil), s.in...)
	if s.mode&4 == 0 && len(fc.sent) >= proto.HeaderSize && bytes.HasPrefix(fc.sent, []byte{proto.Magic0, proto.Magic1, proto.Version}) &&
		(proto.Kind(fc.sent[3]) == proto.KindResponse || proto.Kind(fc.sent[3]) == proto.KindError) {
		binary.BigEndian.PutUint32(fc.sent[8:12], fc.id)
	}
	if s.mode&2 != 0 && len(fc.sent) > 1 {
		half := len(fc.sent) / 2
		if _, err := fc.nc.Write(fc.sent[:half]); err != nil {
			return
		}
		time.Sleep(time.Millisecond)
		_, _ = fc.nc.Write(fc.sent[half:])
	} else {
		_, _ = fc.nc.Write(fc.sent)
	}
	if s.mode&1 == 0 {
		return
	}
	// Keep the connection until the client closes it; all it writes must
	// be frames.
	for {
		f, err := fzReadFrame(br)
		if err != nil {
			if errors.Is(err, proto.ErrProtocol) {
				fc.err = err
			}
			return
		}
		fc.extra = append(fc.extra, byte(f.Kind))
	}
}

// fzReadFrame reads one whole frame from br; a frame that breaks the
// protocol is an error wrapping proto.ErrProtocol.
func fzReadFrame(br *bufio.Reader) (proto.Frame, error) {
	hdr, err := br.Peek(proto.HeaderSize)
	if err != nil {
		return proto.Frame{}, err
	}
	h, err := proto.DecodeHeader(hdr, nil)
	if err != nil {
		return proto.Frame{}, fmt.Errorf("the client wrote a header that breaks the protocol: %w", err)
	}
	b := make([]byte, h.Len())
	if _, err := io.ReadFull(br, b); err != nil {
		return proto.Frame{}, err
	}
	f, _, err := proto.Decode(b, nil)
	if err != nil {
		return proto.Frame{}, fmt.Errorf("the client wrote a frame that breaks the protocol: %w", err)
	}
	return f, nil
}

// close stops accepting, ends the connections and waits for their
// goroutines.
func (s *fzServer) close() {
	s.once.Do(func() {
		s.ln.Close()
		s.mu.Lock()
		for _, fc := range s.conns {
			_ = fc.nc.SetDeadline(time.Now()) // unblock a read; the client may not have closed yet
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
}

// check holds the call's result against the bytes the connections were
// sent.
func (s *fzServer) check(reply []byte, callErr error) error {
	for _, fc := range s.conns {
		if fc.err != nil {
			return fc.err
		}
	}
	first, decided := s.firstAnswer()
	if callErr == nil {
		if decided && first.Kind == proto.KindResponse {
			if want, ok := fzReplyOf(&first); !ok || !bytes.Equal(reply, want) {
				return fmt.Errorf("the first answer to call %d is a Response with payload %q (flags %v)", first.ID, first.Payload, first.Flags)
			}
			return nil
		}
		// After a retry, a reply is the payload of a Response among the
		// bytes.
		for _, fc := range s.conns {
			for rest := fc.sent; len(rest) > 0; {
				f, n, err := proto.Decode(rest, nil)
				if err != nil || n == 0 {
					break
				}
				if want, ok := fzReplyOf(&f); f.Kind == proto.KindResponse && ok && bytes.Equal(want, reply) {
					return nil
				}
				rest = rest[n:]
			}
		}
		return errors.New("the reply is no Response's payload")
	}
	if !decided {
		return nil
	}
	if first.Kind == proto.KindResponse {
		if _, ok := fzReplyOf(&first); !ok && handler.CodeOf(callErr) == proto.CodeDataLoss {
			return nil // compressed, and does not expand
		}
		return fmt.Errorf("the first answer to call %d is a Response with payload %q (flags %v)", first.ID, first.Payload, first.Flags)
	}
	code, msg := first.ErrorBody()
	unprocessed := first.Flags&proto.FlagUnprocessed != 0
	if unprocessed && (code == proto.CodeUnavailable || code == proto.CodeResourceExhausted) {
		return nil // the client may send it again, and time out
	}
	var e *handler.Error
	if errors.As(callErr, &e) && e.Code == code && e.Message == string(msg) {
		return nil
	}
	return fmt.Errorf("the first answer to call %d is an Error %v %q (unprocessed %v)", first.ID, code, msg, unprocessed)
}

// firstAnswer returns the first frame answering the first connection's
// call, a Response or an Error, and reports whether the client must read
// it: it is whole, and no frame before it breaks the protocol.
func (s *fzServer) firstAnswer() (proto.Frame, bool) {
	if len(s.conns) == 0 || s.conns[0].id == 0 {
		return proto.Frame{}, false // the call never reached the server
	}
	fc := s.conns[0]
	for rest := fc.sent; len(rest) > 0; {
		f, n, err := proto.Decode(rest, nil)
		if err != nil || n == 0 {
			return proto.Frame{}, false // a protocol error, or the connection closed
		}
		if f.ID == fc.id && (f.Kind == proto.KindResponse || f.Kind == proto.KindError) {
			return f, true
		}
		rest = rest[n:]
	}
	return proto.Frame{}, false
}

// fzShow quotes bytes for a failure message, cut short if long.
func fzShow(b []byte) string {
	if len(b) > 200 {
		return fmt.Sprintf("%q... (%d bytes)", b[:200], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// fzReplyOf returns the reply a Response carries, expanded if it is
// compressed, and false if it does not expand within the frame limit.
func fzReplyOf(f *proto.Frame) ([]byte, bool) {
	c := f.Flags.Compression()
	if c == proto.CompressionNone {
		return f.Payload, true
	}
	reply, err := compression.Expand(nil, f.Payload, c, f.PayloadRoom(proto.DefaultMaxFrameSize))
	return reply, err == nil
}

// fzStacks returns every goroutine's stack, for a hang.
func fzStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// fzSeeds are answers a server could send to call id 1: valid frames of
// each kind, alone and mixed, truncated frames and garbage.
func fzSeeds() [][]byte {
	resp := func(id uint32, payload string) []byte {
		return proto.AppendFrame(nil, proto.Header{Kind: proto.KindResponse, ID: id}, "", nil, []byte(payload))
	}
	cat := func(frames ...[]byte) []byte { return bytes.Join(frames, nil) }
	ok := resp(1, "ping")
	notFound := proto.AppendError(nil, 1, proto.FlagUnprocessed, proto.CodeNotFound, "no route")
	goAway := proto.AppendGoAway(nil, 0, proto.CodeUnavailable, "draining")
	ping := proto.AppendPing(nil, []byte("12345678"))
	big := proto.AppendFrame(nil, proto.Header{Kind: proto.KindResponse, ID: 1}, "", nil, bytes.Repeat([]byte("big"), 30000))
	bigError := proto.AppendError(nil, 1, 0, proto.CodeInternal, string(bytes.Repeat([]byte("e"), fzReadBuf)))
	md := proto.AppendMetadata(nil, "k", []byte("v"))
	return [][]byte{
		ok,
		notFound,
		cat(ping, ok),
		cat(goAway, ok),
		goAway,
		ping,
		proto.AppendError(nil, 1, 0, proto.CodeInternal, "handler panicked"),
		proto.AppendError(nil, 1, proto.FlagUnprocessed, proto.CodeUnavailable, "draining"),
		proto.AppendError(nil, 1, proto.FlagUnprocessed, proto.CodeResourceExhausted, "too many calls"),
		proto.AppendError(nil, 1, 0, 999, "a code past the table"),
		proto.AppendError(nil, 1, 0, proto.CodeOK, ""),
		proto.AppendFrame(nil, proto.Header{Kind: proto.KindResponse, Codec: proto.CodecJSON, ID: 1}, "", md, []byte(`"ping"`)),
		resp(1, ""),
		cat(resp(2, "not yours"), ok),
		cat(ok, ok),
		cat(ok, []byte("garbage after")),
		big,
		big[:len(big)-1000],
		bigError,
		proto.AppendPong(nil, []byte("unasked")),
		proto.AppendCancel(nil, 1),
		proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, "Client/Route", nil, []byte("reverse call")),
		proto.AppendFrame(nil, proto.Header{Kind: proto.KindOneWay, ID: 1}, "Client/Route", nil, nil),
		proto.AppendGoAway(nil, 1, proto.CodeInternal, "protocol error"),
		proto.AppendFrame(nil, proto.Header{Kind: 0x11}, "", nil, []byte("welcome")),
		// Compressed replies, though the client asked for none: it expands
		// them all the same, and fails the call on one that does not expand.
		proto.AppendFrame(nil, proto.Header{Kind: proto.KindResponse, ID: 1, Flags: proto.Flags(0).WithCompression(proto.CompressionGzip)}, "", nil,
			compression.Append(nil, []byte("ping"), proto.CompressionGzip)),
		proto.AppendFrame(nil, proto.Header{Kind: proto.KindResponse, ID: 1, Flags: proto.Flags(0).WithCompression(proto.CompressionZstd)}, "", nil,
			compression.Append(nil, bytes.Repeat([]byte("big zstd "), 20000), proto.CompressionZstd)),
		proto.AppendFrame(nil, proto.Header{Kind: proto.KindResponse, ID: 1, Flags: proto.Flags(0).WithCompression(proto.CompressionZstd)}, "", nil, []byte("not zstd")),
		// Truncated frames.
		ok[:proto.HeaderSize],
		ok[:proto.HeaderSize-1],
		ok[:len(ok)-1],
		notFound[:proto.HeaderSize+1],
		// Frames that break the protocol.
		append(append([]byte(nil), ok[:3]...), 0x09),
		cat(ping, []byte{proto.Magic0, proto.Magic1, 0x02}),
		func() []byte { b := append([]byte(nil), ok...); b[19] = 1; return b }(),                 // a reserved field not zero
		func() []byte { b := append([]byte(nil), notFound...); b[23] = 1; return b[:25] }(),      // an Error body of one byte
		func() []byte { b := append([]byte(nil), ok...); b[20], b[21] = 0x7f, 0xff; return b }(), // past the frame limit
		// ... after a good frame in the same read, whose frames the
		// reader handles in one pass: a bad header, bad sections.
		func() []byte { b := cat(ping, ok); b[len(ping)+19] = 1; return b }(),
		func() []byte { b := cat(ping, notFound); b[len(ping)+23] = 1; return b[:len(ping)+25] }(),
		// Garbage.
		[]byte("HTTP/1.1 400 Bad Request\r\n\r\n"),
		{},
		make([]byte, 64),
	}
}
