package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/stream"
	"github.com/rpcd/rpcd/proto"
)

// fakeHost is a connection's end as a test plays it: it records what the
// streams send and the handlers they would start.
type fakeHost struct {
	t       *Streams
	mu      sync.Mutex
	control [][]byte            // frames from SendControl
	data    []proto.Compression // the compression of each SendData
	starts  []func()            // handlers Go was given, not run
	refused []proto.Code
	calls   []*handler.Call

	openErr   error
	acceptErr *handler.Error
	noGo      bool
}

func (h *fakeHost) SendData(_ context.Context, _ uint32, _ []byte, zip proto.Compression) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.data = append(h.data, zip)
	return nil
}

func (h *fakeHost) SendControl(frame []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.control = append(h.control, frame)
	return nil
}

func (h *fakeHost) Forget(st *stream.Stream)  { h.t.Forget(st) }
func (h *fakeHost) OpenErr() error            { return h.openErr }
func (h *fakeHost) AcceptErr() *handler.Error { return h.acceptErr }
func (h *fakeHost) Refused(code proto.Code)   { h.refused = append(h.refused, code) }

func (h *fakeHost) NewCall() *handler.Call {
	c := &handler.Call{Peer: nil}
	h.calls = append(h.calls, c)
	return c
}

func (h *fakeHost) Go(run func()) bool {
	if h.noGo {
		return false
	}
	h.starts = append(h.starts, run)
	return true
}

// newStreams returns a table of cfg's side on a fake host.
func newStreams(cfg *StreamConfig) (*Streams, *fakeHost) {
	t := &Streams{}
	h := &fakeHost{t: t}
	t.Init(cfg, h)
	return t, h
}

// decoded decodes one whole frame.
func decoded(t *testing.T, b []byte) *proto.Frame {
	t.Helper()
	lim := proto.Limits{}.WithDefaults()
	f, n, err := proto.Decode(b, &lim)
	if err != nil || n != len(b) {
		t.Fatalf("decoding %x: %d bytes, %v", b, n, err)
	}
	return &f
}

// serverConfig is a server's side with one stream route, Echo.
func serverConfig(maxAccepted int) *StreamConfig {
	reg := handler.NewRegistry()
	reg.HandleStream("S/Echo", func(ctx context.Context, s handler.Stream) error { return nil })
	return &StreamConfig{
		MaxOpened: 2, MaxAccepted: maxAccepted, Limits: proto.Limits{}.WithDefaults(),
		Registry: reg, Runner: &transport.Runner{}, Base: context.Background(),
		Takes: []proto.Compression{proto.CompressionZstd, proto.CompressionGzip}, ZipMin: 16,
	}
}

// TestStreamsAccept: a StreamOpen from the peer is accepted with its first
// StreamCredit, naming what this end takes if the opener named some, and
// its handler's Call carries the route, a copy of the metadata and the
// deadline; or it is refused with an Unprocessed reset saying why; or, if
// it breaks the protocol, it is an error.
func TestStreamsAccept(t *testing.T) {
	tb, h := newStreams(serverConfig(2))
	md := proto.AppendMetadata(proto.AppendMetadata(nil, proto.MetaCompression, []byte("gzip")), "k", []byte("v"))
	open := proto.AppendStreamOpen(nil, 1, "S/Echo", proto.CodecRaw, 500, md, 1<<16)
	f := decoded(t, open)
	out, err := tb.Handle(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	credit := decoded(t, out)
	if credit.Kind != proto.KindStreamCredit || credit.ID != 1 || credit.StreamWindow() != stream.DefaultWindow {
		t.Fatalf("answer %v id %d window %d, want a StreamCredit for 1 of %d", credit.Kind, credit.ID, credit.StreamWindow(), stream.DefaultWindow)
	}
	if takes, _ := credit.Metadata.Get(proto.MetaCompression); string(takes) != "zstd,gzip" {
		t.Errorf("first credit names %q, want zstd,gzip", takes)
	}
	if tb.Open() != 1 || len(h.starts) != 1 || len(h.calls) != 1 {
		t.Fatalf("%d open, %d handlers, %d calls; want 1 each", tb.Open(), len(h.starts), len(h.calls))
	}
	call := h.calls[0]
	for i := range open {
		open[i] = 0 // the input is reused: the call must hold its own copy
	}
	if v, _ := call.Metadata.Get("k"); call.Route != "S/Echo" || call.ID != 1 || string(v) != "v" {
		t.Fatalf("call %q id %d metadata k=%q", call.Route, call.ID, v)
	}
	if dl, ok := call.Deadline(); !ok || time.Until(dl) > 500*time.Millisecond {
		t.Fatalf("deadline %v, %v", dl, ok)
	}

	// The handler's data goes in the opener's gzip, past ZipMin.
	st := handler.StreamFrom(call)
	if _, err := st.Write([]byte(strings.Repeat("a", 1000))); err != nil {
		t.Fatal(err)
	}
	if len(h.data) != 1 || h.data[0] != proto.CompressionGzip {
		t.Fatalf("data sent in %v, want gzip", h.data)
	}

	refusals := []struct {
		name  string
		frame []byte
		setup func()
		code  proto.Code
	}{
		{"no such route", proto.AppendStreamOpen(nil, 3, "S/None", proto.CodecRaw, 0, nil, 1024), nil, proto.CodeNotFound},
		{"draining", proto.AppendStreamOpen(nil, 5, "S/Echo", proto.CodecRaw, 0, nil, 1024),
			func() { h.acceptErr = &handler.Error{Code: proto.CodeUnavailable, Message: "server is draining"} }, proto.CodeUnavailable},
		{"no handler may start", proto.AppendStreamOpen(nil, 7, "S/Echo", proto.CodecRaw, 0, nil, 1024),
			func() { h.acceptErr, h.noGo = nil, true }, proto.CodeUnavailable},
	}
	for _, r := range refusals {
		if r.setup != nil {
			r.setup()
		}
		out, err := tb.Handle(decoded(t, r.frame), nil)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		reset := decoded(t, out)
		if code, _ := reset.ErrorBody(); reset.Kind != proto.KindStreamReset || code != r.code || reset.Flags&proto.FlagUnprocessed == 0 {
			t.Fatalf("%s: answered %v code %v flags %v, want an Unprocessed StreamReset %v", r.name, reset.Kind, code, reset.Flags, r.code)
		}
		if h.refused[len(h.refused)-1] != r.code {
			t.Fatalf("%s: counted %v", r.name, h.refused)
		}
	}
	h.noGo = false
	if tb.Open() != 1 {
		t.Fatalf("%d open after the refusals, want 1", tb.Open())
	}

	// A second stream fits MaxAccepted (2), a third does not.
	if _, err := tb.Handle(decoded(t, proto.AppendStreamOpen(nil, 9, "S/Echo", proto.CodecRaw, 0, nil, 1024)), nil); err != nil {
		t.Fatal(err)
	}
	out, _ = tb.Handle(decoded(t, proto.AppendStreamOpen(nil, 11, "S/Echo", proto.CodecRaw, 0, nil, 1024)), nil)
	if code, _ := decoded(t, out).ErrorBody(); code != proto.CodeResourceExhausted {
		t.Fatalf("past MaxAccepted: %v, want ResourceExhausted", code)
	}

	// A reset from the opener ends the stream and frees its place.
	if _, err := tb.Handle(decoded(t, proto.AppendStreamReset(nil, 9, 0, proto.CodeCanceled, "bye")), nil); err != nil {
		t.Fatal(err)
	}
	if tb.Open() != 1 {
		t.Fatalf("%d open after the reset, want 1", tb.Open())
	}
	// Frames for a stream that is gone were in flight: dropped.
	for _, b := range [][]byte{proto.AppendStreamData(nil, 9, []byte("late")), proto.AppendStreamEnd(nil, 9), proto.AppendStreamCredit(nil, 9, 10)} {
		if out, err := tb.Handle(decoded(t, b), nil); err != nil || len(out) != 0 {
			t.Fatalf("frame for a finished stream: %x, %v", out, err)
		}
	}

	for _, bad := range []struct{ name, frame string }{
		{"StreamOpen with the server's parity", string(proto.AppendStreamOpen(nil, 2, "S/Echo", proto.CodecRaw, 0, nil, 1024))},
		{"StreamOpen of a stream open", string(proto.AppendStreamOpen(nil, 1, "S/Echo", proto.CodecRaw, 0, nil, 1024))},
		{"StreamReset with code 0 from the opener", string(proto.AppendStreamReset(nil, 1, 0, proto.CodeOK, ""))},
	} {
		if _, err := tb.Handle(decoded(t, []byte(bad.frame)), nil); !errors.Is(err, proto.ErrProtocol) {
			t.Errorf("%s: %v, want a protocol error", bad.name, err)
		}
	}
}

// TestStreamsStart: the streams this end opens get its parity's ids,
// their StreamOpen names what this end takes before the caller's metadata,
// and are refused past MaxOpened, when the host says so, or once closed.
func TestStreamsStart(t *testing.T) {
	cfg := serverConfig(2)
	srv, sh := newStreams(cfg)
	ccfg := *cfg
	ccfg.Client, ccfg.Takes, ccfg.Zip, ccfg.MaxOpened = true, []proto.Compression{proto.CompressionGzip}, proto.CompressionGzip, 0 // no bound
	cli, ch := newStreams(&ccfg)
	ctx := context.Background()

	md := proto.AppendMetadata(nil, "k", []byte("v"))
	for i, want := range []uint32{1, 3} {
		st, err := cli.Start(ctx, "S/Echo", 100, md)
		if err != nil || st.ID() != want {
			t.Fatalf("client's stream %d: %v, %v; want id %d", i, st, err, want)
		}
		f := decoded(t, ch.control[i])
		if f.Kind != proto.KindStreamOpen || f.ID != want || f.Deadline != 100 || string(f.Route) != "S/Echo" {
			t.Fatalf("StreamOpen %v id %d deadline %d route %q", f.Kind, f.ID, f.Deadline, f.Route)
		}
		if k, _ := f.Metadata.Get(proto.MetaCompression); string(k) != "gzip" || !strings.HasPrefix(string(f.Metadata), string(proto.AppendMetadata(nil, proto.MetaCompression, []byte("gzip")))) {
			t.Fatalf("metadata %q: want rpcd-compression: gzip first", f.Metadata)
		}
		if v, _ := f.Metadata.Get("k"); string(v) != "v" {
			t.Fatalf("metadata %q lost the caller's", f.Metadata)
		}
	}
	for _, want := range []uint32{2, 4} {
		if st, err := srv.Start(ctx, "C/Echo", 0, nil); err != nil || st.ID() != want {
			t.Fatalf("server's stream: %v, %v; want id %d", st, err, want)
		}
	}
	if _, err := srv.Start(ctx, "C/Echo", 0, nil); handler.CodeOf(err) != proto.CodeResourceExhausted || !handler.IsUnprocessed(err) {
		t.Fatalf("past MaxOpened: %v", err)
	}
	gone := &handler.Error{Code: proto.CodeUnavailable, Message: "gone", Unprocessed: true}
	ch.openErr = gone
	if _, err := cli.Start(ctx, "S/Echo", 0, nil); err != gone {
		t.Fatalf("host refusing: %v", err)
	}
	ch.openErr = nil
	if _, err := cli.Start(ctx, "S/Echo", 0, proto.AppendMetadata(nil, "big", make([]byte, cfg.Limits.MaxMetadata))); handler.CodeOf(err) != proto.CodeResourceExhausted {
		t.Fatalf("metadata past the limit: %v", err)
	}

	// The server's first credit names zstd first; the client sends its own
	// choice, gzip, because the server names it.
	st, _ := cli.Start(ctx, "S/Echo", 0, nil)
	if _, err := cli.Handle(decoded(t, proto.AppendFirstStreamCredit(nil, st.ID(), 1<<16, proto.CompressionZstd, proto.CompressionGzip)), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write([]byte(strings.Repeat("a", 1000))); err != nil {
		t.Fatal(err)
	}
	if len(ch.data) != 1 || ch.data[0] != proto.CompressionGzip {
		t.Fatalf("client's data in %v, want gzip", ch.data)
	}

	cli.Close()
	if _, err := cli.Start(ctx, "S/Echo", 0, nil); err == nil {
		t.Fatal("a closed table opened a stream")
	}
	if cli.Open() != 0 {
		t.Fatalf("%d open after Close", cli.Open())
	}
	_ = sh
}

// FuzzStreams feeds a table frames decoded from the input, as a peer could
// send them: it must never panic, and its count of open streams must
// match what it holds.
func FuzzStreams(f *testing.F) {
	f.Add(proto.AppendStreamOpen(nil, 1, "S/Echo", proto.CodecRaw, 10, nil, 1024))
	f.Add(append(proto.AppendStreamOpen(nil, 1, "S/Echo", proto.CodecRaw, 0, nil, 8), proto.AppendStreamData(nil, 1, []byte("0123456789"))...))
	f.Add(append(proto.AppendStreamOpen(nil, 3, "S/Echo", proto.CodecRaw, 0, nil, 8), proto.AppendStreamReset(nil, 3, 0, proto.CodeOK, "")...))
	f.Add(append(proto.AppendStreamOpen(nil, 3, "S/Echo", proto.CodecRaw, 0, nil, 8), proto.AppendStreamOpen(nil, 3, "S/Echo", proto.CodecRaw, 0, nil, 8)...))
	f.Add(proto.AppendStreamCredit(nil, 2, 1<<31-1))
	lim := proto.Limits{}.WithDefaults()
	f.Fuzz(func(t *testing.T, in []byte) {
		tb, _ := newStreams(serverConfig(4))
		for len(in) > 0 {
			fr, n, err := proto.Decode(in, &lim)
			if err != nil || n == 0 {
				return
			}
			in = in[n:]
			switch fr.Kind {
			case proto.KindStreamOpen, proto.KindStreamData, proto.KindStreamCredit, proto.KindStreamEnd, proto.KindStreamReset:
			default:
				continue
			}
			if _, err := tb.Handle(&fr, nil); err != nil {
				return // the connection would end here
			}
			tb.mu.Lock()
			held, counted := len(tb.m), tb.Open()
			tb.mu.Unlock()
			if held != counted || tb.accepted < 0 || tb.opened < 0 || tb.accepted > 4 {
				t.Fatalf("table holds %d streams, counts %d (accepted %d, opened %d)", held, counted, tb.accepted, tb.opened)
			}
		}
	})
}
