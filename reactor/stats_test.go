package reactor_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// waitStats polls s.Stats until ok holds, for at most 5 s.
func waitStats(t *testing.T, s *reactor.Server, what string, ok func(reactor.Stats) bool) reactor.Stats {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := s.Stats()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s; stats %+v", what, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStatsCounts: the bytes each way are exactly those on the wire, error
// replies are counted by code whether a handler failed or the call was
// refused, and connections are counted as they open and close.
func TestStatsCounts(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{})
	if st := s.Stats(); st != (reactor.Stats{}) {
		t.Fatalf("a new server's stats: %+v", st)
	}
	if !s.Ready() {
		t.Fatal("a started server is not ready")
	}
	r := dialRaw(t, s)
	var sent []byte
	frames := []struct {
		route   string
		codec   proto.Codec
		payload string
		code    proto.Code // what the reply says
	}{
		{builtin.EchoPacket, proto.CodecRaw, "0123456789", proto.CodeOK},
		{"No/Such", proto.CodecRaw, "", proto.CodeNotFound},                            // refused: no route
		{"Math/Sum", proto.CodecJSON, `"seven"`, proto.CodeInvalidArgument},            // the handler fails
		{"Math/Sum", proto.CodecJSON, `{"a":1,"b":2}`, proto.CodeOK},                   //
		{"No/Such", proto.CodecRaw, "x", proto.CodeNotFound},                           //
		{builtin.EchoPacket, proto.CodecRaw, string(make([]byte, 3000)), proto.CodeOK}, //
	}
	for i, f := range frames {
		sent = proto.AppendFrame(sent, proto.Header{Kind: proto.KindRequest, Codec: f.codec, ID: uint32(i + 1)}, f.route, nil, []byte(f.payload))
	}
	r.send(sent)
	received := 0
	for i, f := range frames {
		reply, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		received += reply.Len()
		code := proto.CodeOK
		if reply.Kind == proto.KindError {
			code, _ = reply.ErrorBody()
		}
		if reply.ID != uint32(i+1) || code != f.code {
			t.Fatalf("reply %d: id %d code %v, want code %v", i+1, reply.ID, code, f.code)
		}
	}
	if len(r.in) != 0 {
		t.Fatalf("%d bytes past the replies", len(r.in))
	}
	st := waitStats(t, s, "bytes out", func(st reactor.Stats) bool { return st.BytesOut == uint64(received) })
	want := reactor.Stats{Conns: 1, ConnsOpened: 1, BytesIn: uint64(len(sent)), BytesOut: uint64(received)}
	want.Errors[transport.CodeSlot(proto.CodeNotFound)] = 2
	want.Errors[transport.CodeSlot(proto.CodeInvalidArgument)] = 1
	if st != want {
		t.Fatalf("stats\n got %+v\nwant %+v", st, want)
	}

	// A second connection's bytes add to the first's, and both stay
	// counted once the connections close.
	r2 := dialRaw(t, s)
	ping := proto.AppendPing(nil, []byte("ping"))
	r2.send(ping)
	if f, err := r2.next(); err != nil || f.Kind != proto.KindPong {
		t.Fatalf("the Ping's answer: %v %v", f.Kind, err)
	}
	want.Conns, want.ConnsOpened = 2, 2
	want.BytesIn += uint64(len(ping))
	want.BytesOut += uint64(len(ping)) // a Pong is the Ping's frame, its kind changed
	if st = waitStats(t, s, "the Pong's bytes", func(st reactor.Stats) bool { return st.BytesOut == want.BytesOut }); st != want {
		t.Fatalf("stats with two connections\n got %+v\nwant %+v", st, want)
	}
	r.nc.Close()
	r2.nc.Close()
	st = waitStats(t, s, "the connections closed", func(st reactor.Stats) bool { return st.Conns == 0 })
	want.Conns = 0
	if st != want {
		t.Fatalf("stats once the connections closed\n got %+v\nwant %+v", st, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); !st.Draining || s.Ready() || st.ConnsOpened != 2 || st.BytesIn != want.BytesIn {
		t.Fatalf("after Shutdown: ready %v, stats %+v", s.Ready(), st)
	}
}

// TestStatsRefusedAndSlow: connections past MaxConns are counted as
// refused; a peer that never reads is counted as a slow consumer when the
// server cuts it off, once it has taken nothing for the write timeout; the
// connection is counted as handed off its event loop on the way (not on
// the standard library transport, TLS's among them, whose connections
// have goroutines of their own).
func TestStatsRefusedAndSlow(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{MaxConns: 1, WriteTimeout: 200 * time.Millisecond})
	r := dialRaw(t, s)
	waitStats(t, s, "the first connection", func(st reactor.Stats) bool { return st.Conns == 1 })
	second := dialRaw(t, s)
	if f, err := second.next(); err != nil || f.Kind != proto.KindGoAway {
		t.Fatalf("the connection past MaxConns: %v %v", f.Kind, err)
	}
	if st := s.Stats(); st.ConnsRefused != 1 || st.ConnsOpened != 1 {
		t.Fatalf("after a refusal: %+v", st)
	}

	if tcp, ok := r.nc.(*net.TCPConn); ok {
		tcp.SetReadBuffer(4096) // let the kernel hold little for us
	}
	frame := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, builtin.EchoPacket, nil, make([]byte, 128<<10))
	for i := 0; ; i++ {
		r.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := r.nc.Write(frame); err != nil {
			break // the server closed (or, over TLS, may still be sending its close_notify): see below
		}
		if i > 2000 { // 256 MiB asked for
			t.Fatal("the peer that never reads was never cut off")
		}
	}
	st := waitStats(t, s, "the slow consumer closed", func(st reactor.Stats) bool { return st.Conns == 0 })
	if st.SlowConsumers != 1 {
		t.Fatalf("slow consumers %d, want 1; stats %+v", st.SlowConsumers, st)
	}
	want := uint64(1)
	if s.Loops() == 0 { // TLS, Options.StdTransport, Windows: no loop to leave
		want = 0
	}
	if st.HandedOff != want {
		t.Fatalf("connections handed off %d, want %d; stats %+v", st.HandedOff, want, st)
	}
}
