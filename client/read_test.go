package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
)

// The tests of read.go: a caller reads its own reply when no one else
// reads the connection, and everything a reader must do still happens
// whoever reads.

// TestCancelWhileReading: a call's cancel and deadline end it whether its
// caller reads the connection itself (alone on it) or waits while another
// reads (behind a call in flight), and the connection serves calls after.
func TestCancelWhileReading(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	for _, behind := range []bool{false, true} {
		t.Run(fmt.Sprintf("behind=%v", behind), func(t *testing.T) {
			c := dial(t, s.Addr().String(), client.Options{})
			echo := func(ctx context.Context) {
				t.Helper()
				reply, err := c.CallRaw(ctx, builtin.EchoPacket, []byte("ping"), nil)
				if err != nil || string(reply) != "ping" {
					t.Fatalf("echo: %q, %v", reply, err)
				}
			}
			echo(context.Background())
			if behind {
				// A call that waits until the test ends: its caller reads,
				// or the listener does; either way this test's calls do not.
				bctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() {
					defer close(done)
					c.CallRaw(bctx, "Block/Forever", nil, nil)
				}()
				t.Cleanup(func() { cancel(); <-done })
				time.Sleep(20 * time.Millisecond)
			}

			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			err := within(t, func() error { _, err := c.CallRaw(ctx, "Block/Forever", nil, nil); return err })
			if code := handler.CodeOf(err); code != proto.CodeCanceled {
				t.Fatalf("cancelled call: %v (code %v), want Canceled", err, code)
			}

			ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel()
			err = within(t, func() error { _, err := c.CallRaw(ctx, "Block/Forever", nil, nil); return err })
			if code := handler.CodeOf(err); code != proto.CodeDeadlineExceeded {
				t.Fatalf("call past its deadline: %v (code %v), want DeadlineExceeded", err, code)
			}

			// A read deadline the calls above left set must not cut the
			// next reader short, be it a caller or, after a pause, the
			// listener.
			echo(context.Background())
			ctx, cancel = context.WithCancel(context.Background())
			defer cancel()
			echo(ctx)
			time.Sleep(20 * time.Millisecond)
			echo(context.Background())
		})
	}
}

// within runs call and returns its error, failing the test if it has not
// returned in 10 s: a call that misses its cancel or deadline would wait
// for Block/Forever for ever.
func within(t *testing.T, call func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- call() }()
	select {
	case err := <-errc:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the call ignored its context: still waiting after 10 s")
		return nil
	}
}

// TestReplyInPieces: a reply that arrives in two parts with a pause longer
// than a reading caller's read deadline between them is read whole, whether
// the cut falls in the frame's header, in a frame the read buffer holds, or
// in one larger than it, and whatever context the caller has.
func TestReplyInPieces(t *testing.T) {
	const pause = 50 * time.Millisecond // beyond the 20 ms a cancellable caller reads for (leadFor)
	cases := []struct {
		name        string
		size, split int
	}{
		{"in the header", 16, 10},
		{"in a small frame", 1000, 300},
		{"in a large frame", 300 << 10, 100 << 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := fakeServer(t, func(nc net.Conn) {
				r := &frameReader{nc: nc}
				for {
					f, err := r.next()
					if err != nil {
						return
					}
					if f.Kind != proto.KindRequest {
						continue
					}
					out := response(f, bytes.Repeat([]byte{byte(f.ID)}, tc.size))
					if _, err := nc.Write(out[:tc.split]); err != nil {
						return
					}
					time.Sleep(pause)
					if _, err := nc.Write(out[tc.split:]); err != nil {
						return
					}
				}
			})
			c := dial(t, addr, client.Options{})
			cancelled, cancel := context.WithCancel(context.Background())
			defer cancel()
			timed, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel2()
			for i, ctx := range []context.Context{context.Background(), cancelled, timed, cancelled} {
				reply, err := c.CallRaw(ctx, "Any/Route", []byte("x"), nil)
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if len(reply) != tc.size || reply[0] != reply[len(reply)-1] {
					t.Fatalf("call %d: reply of %d bytes, want %d of one value", i, len(reply), tc.size)
				}
			}
		})
	}
}

// TestIdleClientHearsGoAway: a client that makes no call still reads what
// the server sends: a GoAway to its idle connection makes it close the
// connection (and dial anew), which the server sees. After one call the
// connection's listener is still reading; after a run of calls close
// together, the callers read their own replies, and the listener must take
// the connection back once they stop (lingerWatch).
func TestIdleClientHearsGoAway(t *testing.T) {
	for _, calls := range []int{1, 300} {
		t.Run(fmt.Sprintf("calls=%d", calls), func(t *testing.T) {
			closed := make(chan error, 1)
			var once sync.Once
			addr := fakeServer(t, func(nc net.Conn) {
				first := false
				once.Do(func() { first = true })
				r := &frameReader{nc: nc}
				var f proto.Frame
				for n := 0; !first || n < calls; n++ {
					var err error
					if f, err = r.next(); err != nil {
						return
					}
					if f.Kind == proto.KindRequest {
						if _, err := nc.Write(response(f, f.Payload)); err != nil {
							return
						}
					}
				}
				time.Sleep(30 * time.Millisecond) // the client idles
				if _, err := nc.Write(proto.AppendGoAway(nil, f.ID, proto.CodeUnavailable, "draining")); err != nil {
					closed <- err
					return
				}
				nc.SetReadDeadline(time.Now().Add(10 * time.Second))
				_, err := io.Copy(io.Discard, nc)
				closed <- err // nil: the client closed its end
			})
			c := dial(t, addr, client.Options{MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
			reply := make([]byte, 0, 8)
			for i := range calls {
				var err error
				if reply, err = c.CallRaw(context.Background(), "Any/Route", []byte("x"), reply[:0]); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			if err := <-closed; err != nil {
				t.Fatalf("the idle client did not close its connection after a GoAway: %v", err)
			}
		})
	}
}

// TestReadersMixed: callers that read their own replies, callers that wait
// while another reads, and futures, many at once on one and on several
// connections: every call gets its own reply, and none is left waiting.
func TestReadersMixed(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	for _, conns := range []int{1, 3} {
		t.Run(fmt.Sprintf("conns=%d", conns), func(t *testing.T) {
			c := dial(t, s.Addr().String(), client.Options{Conns: conns})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			const callers, calls = 8, 300
			var wg sync.WaitGroup
			errs := make(chan error, callers)
			for g := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range calls {
						req := fmt.Appendf(nil, "%d/%d", g, i)
						var reply []byte
						var err error
						switch i % 4 {
						case 0:
							reply, err = c.CallRaw(context.Background(), builtin.EchoPacket, req, nil)
						case 1, 2:
							reply, err = c.CallRaw(ctx, builtin.EchoPacket, req, nil)
						case 3:
							f := c.GoRaw(ctx, builtin.EchoPacket, req)
							err = f.Wait()
							reply = f.Reply()
						}
						if err == nil && !bytes.Equal(reply, req) {
							err = fmt.Errorf("reply %q to %q", reply, req)
						}
						if err != nil {
							errs <- err
							return
						}
						if g == 0 && i%50 == 0 {
							time.Sleep(2 * time.Millisecond) // let the token lie free a while
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					t.Fatalf("calls still waiting after 20s: %v", err)
				}
				t.Fatal(err)
			}
		})
	}
}

// TestBusyClientLeavesNoConnectionToItsListener: with as many callers as
// connections, each caller reads its own replies once the calls are under
// way. A connection's listener holds its token from the start, and again
// after a lull, reading while calls on it are sparse; it must offer the
// connection to callers meanwhile (the client's idle list), so that a busy
// client's calls come to it close enough together for it to hand the
// connection over, rather than keep it while the client's other
// connections take every call.
//
// What the listeners read is a matter of timing (two callers that meet on
// one connection wait for its listener; a slow machine spaces calls further
// than lingerIdle), so the test asserts the mechanism: every connection is
// on the idle list before each burst, and the listeners read a minority of
// the replies. Under the race detector calls on one connection come more
// than lingerIdle apart, when the listener rightly keeps reading: the test
// skips itself there, and CI runs it without.
func TestBusyClientLeavesNoConnectionToItsListener(t *testing.T) {
	if raceOn {
		t.Skip("calls are sparse under the race detector; run without -race")
	}
	if client.OnEventLoops() {
		t.Skip("event loops read every connection: there are no listeners")
	}
	const conns, calls = 48, 400
	s := server(t, "127.0.0.1:0")
	c, err := client.Dial(context.Background(), s.Addr().String(), client.Options{Conns: conns})
	if err != nil {
		t.Fatal(err)
	}
	allListed := func(when string) {
		t.Helper()
		var listed, n int
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if listed, n = client.Listed(c); listed == conns && n == conns {
				return
			}
		}
		t.Fatalf("%s: %d of %d connections on the idle list, want all %d: their listeners read them", when, listed, n, conns)
	}
	burst := func() {
		var wg sync.WaitGroup
		for range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				reply := make([]byte, 0, 16)
				for i := range calls {
					var err error
					if reply, err = c.CallRaw(context.Background(), builtin.EchoPacket, []byte("x"), reply[:0]); err != nil {
						t.Errorf("call %d: %v", i, err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	allListed("from the start")
	burst()
	// A lull: the linger watch gives every connection back to its
	// listener within 2 × lingerMax (128 ms) of the last call, and the
	// listener lists it.
	allListed("after a lull")
	burst()
	c.Close()
	n, all := client.Listened(c), uint64(2*conns*calls)
	t.Logf("the listeners read %d of %d replies", n, all)
	if n > all/4 {
		t.Errorf("the listeners read %d of %d replies; want under a quarter: callers read their own once under way", n, all)
	}
}
