package ws_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/leaktest"
	"github.com/rpcd/rpcd/internal/servertest"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
	"github.com/rpcd/rpcd/ws"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// serve starts a reactor with the built-in routes and an HTTP server with
// ws.Handler at ws.Path; it returns the server and the WebSocket URL.
func serve(t *testing.T) (*reactor.Server, string) {
	t.Helper()
	reg := handler.NewRegistry()
	builtin.Register(reg)
	s := servertest.Start(t, reg, reactor.Options{})
	mux := http.NewServeMux()
	mux.Handle(ws.Path, ws.Handler(s, ws.Options{}))
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close) // before the server's shutdown
	return s, "ws" + strings.TrimPrefix(hs.URL, "http") + ws.Path
}

// rawDial opens a WebSocket to url with gorilla's client as it is, asking
// for the given subprotocols.
func rawDial(t *testing.T, url string, protocols ...string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{Subprotocols: protocols}
	wc, _, err := d.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wc.Close() })
	return wc
}

// TestOneFramePerMessage: frames sent together in one message, or one
// frame split over two, are each read; every reply comes in a binary
// message of its own holding exactly one frame, a large one included.
func TestOneFramePerMessage(t *testing.T) {
	_, url := serve(t)
	wc := rawDial(t, url, ws.Subprotocol)
	if wc.Subprotocol() != ws.Subprotocol {
		t.Fatalf("subprotocol %q", wc.Subprotocol())
	}
	big := bytes.Repeat([]byte{7}, 300<<10)
	var batch []byte
	for i := uint32(1); i <= 3; i++ {
		batch = proto.AppendFrame(batch, proto.Header{Kind: proto.KindRequest, ID: i}, builtin.EchoPacket, nil, []byte{byte(i)})
	}
	split := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 4}, builtin.EchoPacket, nil, big)
	for _, m := range [][]byte{batch, split[:1000], split[1000:]} {
		if err := wc.WriteMessage(websocket.BinaryMessage, m); err != nil {
			t.Fatal(err)
		}
	}
	wc.SetReadDeadline(time.Now().Add(10 * time.Second))
	for want := uint32(1); want <= 4; want++ {
		typ, m, err := wc.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		f, n, err := proto.Decode(m, nil)
		if typ != websocket.BinaryMessage || err != nil || n != len(m) {
			t.Fatalf("message %d: type %d, %d of %d bytes a frame, %v", want, typ, n, len(m), err)
		}
		if f.Kind != proto.KindResponse || f.ID != want {
			t.Fatalf("message %d: %v id %d", want, f.Kind, f.ID)
		}
		if want == 4 && !bytes.Equal(f.Payload, big) {
			t.Fatalf("the large echo: %d bytes", len(f.Payload))
		}
	}
}

// TestRefusals: a request that does not ask for the rpcd subprotocol gets
// 400 and no WebSocket; a text message ends the connection with close code
// 1003, unsupported data.
func TestRefusals(t *testing.T) {
	_, url := serve(t)
	d := websocket.Dialer{Subprotocols: []string{"chat"}}
	if _, resp, err := d.Dial(url, nil); err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a WebSocket without the rpcd subprotocol: %v, %v", resp, err)
	}
	wc := rawDial(t, url, ws.Subprotocol)
	if err := wc.WriteMessage(websocket.TextMessage, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	wc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err := wc.ReadMessage()
	if !websocket.IsCloseError(err, websocket.CloseUnsupportedData) {
		t.Fatalf("after a text message: %v, want close 1003", err)
	}
}

// TestClientOverWebSocket: rpcd's client, with Dial, calls, streams and
// subscribes over WebSocket as over TCP; the server counts the connection
// as its own and Shutdown ends it.
func TestClientOverWebSocket(t *testing.T) {
	s, url := serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, "ws", client.Options{Dial: func(ctx context.Context, _ string) (net.Conn, error) {
		return ws.Dial(ctx, url, nil)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var sum int64
	if err := c.Call(ctx, builtin.Sum, builtin.SumArgs{A: 40, B: 2}, &sum); err != nil || sum != 42 {
		t.Fatalf("Math/Sum over WebSocket: %d, %v", sum, err)
	}
	st, err := c.OpenStream(ctx, builtin.StreamSink)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	st.CloseSend()
	var got [8]byte
	if _, err := st.Read(got[:]); err != nil || got != [8]byte{0, 0, 0, 0, 0, 0x10, 0, 0} {
		t.Fatalf("the sink read % x, %v; want 1 MiB", got, err)
	}
	msgs := make(chan client.Message, 1)
	sub, err := c.Subscribe(ctx, "news.>", msgs)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if _, err := s.Publish("news.ws", proto.CodecRaw, []byte("over a WebSocket")); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-msgs:
		if string(m.Payload) != "over a WebSocket" {
			t.Fatalf("message %q", m.Payload)
		}
	case <-ctx.Done():
		t.Fatal("no message")
	}
	if s.Conns() != 1 {
		t.Fatalf("the server counts %d connections, want the WebSocket's 1", s.Conns())
	}
}

// TestReadDeadline: a Read cut short by a deadline (as the standard
// library transport cuts one to do other work) returns
// os.ErrDeadlineExceeded, and the connection goes on: the next message
// is read whole.
func TestReadDeadline(t *testing.T) {
	_, url := serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := ws.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	buf := make([]byte, 4096)
	if _, err := nc.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a Read past its deadline: %v", err)
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write(proto.AppendPing(nil, []byte("still there"))); err != nil {
		t.Fatal(err)
	}
	n, err := nc.Read(buf)
	f, k, derr := proto.Decode(buf[:n], nil)
	if err != nil || derr != nil || k != n || f.Kind != proto.KindPong || string(f.Payload) != "still there" {
		t.Fatalf("after the deadline: %v %q (%v, %v)", f.Kind, f.Payload, err, derr)
	}
}

// TestMessageTooLarge: a message past the frame limit ends the WebSocket
// with close 1009, and the peer gets that close message: the server reads
// the rest of the message before it closes, rather than resetting the
// connection with it unread.
func TestMessageTooLarge(t *testing.T) {
	reg := handler.NewRegistry()
	builtin.Register(reg)
	s := servertest.Start(t, reg, reactor.Options{})
	mux := http.NewServeMux()
	mux.Handle(ws.Path, ws.Handler(s, ws.Options{MaxFrameSize: 64 << 10}))
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	wc := rawDial(t, "ws"+strings.TrimPrefix(hs.URL, "http")+ws.Path, ws.Subprotocol)
	big := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, builtin.EchoPacket, nil, make([]byte, 1<<20))
	wc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if err := wc.WriteMessage(websocket.BinaryMessage, big); err != nil {
		t.Fatalf("writing 1 MiB to a server with a 64 KiB limit: %v; the server must read it before it closes", err)
	}
	wc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := wc.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
		t.Fatalf("after a message past the limit: %v, want close 1009", err)
	}
}

// TestLingerFromOptions: the lingering close after a message past the
// frame limit reads as much as Options.LingerBytes says, past its default:
// with 64 MiB, a message of 16 MiB (four times the default) is read to its
// end and the peer gets the close message; with the default, it would be
// cut off by a reset.
func TestLingerFromOptions(t *testing.T) {
	reg := handler.NewRegistry()
	builtin.Register(reg)
	s := servertest.Start(t, reg, reactor.Options{})
	mux := http.NewServeMux()
	mux.Handle(ws.Path, ws.Handler(s, ws.Options{MaxFrameSize: 64 << 10, LingerBytes: 64 << 20, LingerTime: time.Minute}))
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	wc := rawDial(t, "ws"+strings.TrimPrefix(hs.URL, "http")+ws.Path, ws.Subprotocol)
	big := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, builtin.EchoPacket, nil, make([]byte, 4*ws.DefaultLingerBytes))
	wc.SetWriteDeadline(time.Now().Add(20 * time.Second))
	if err := wc.WriteMessage(websocket.BinaryMessage, big); err != nil {
		t.Fatalf("writing 16 MiB to a server with a 64 KiB limit that lingers for 64 MiB: %v", err)
	}
	wc.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, _, err := wc.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
		t.Fatalf("after a message past the limit: %v, want close 1009", err)
	}
}
