package client_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// goneAwayServer is a fake server whose first connection answers one call
// and then goes away (GoAway naming it: a drain, or the connection's
// maximum age), refusing later calls unprocessed as rpcd's server does;
// every later connection answers every call. A reply is the number of the
// connection that answered it.
func goneAwayServer(t *testing.T) string {
	var conns atomic.Int32
	return fakeServer(t, func(nc net.Conn) {
		n := conns.Add(1)
		r := &frameReader{nc: nc}
		away := false
		for {
			f, err := r.next()
			if err != nil {
				return
			}
			if f.Kind != proto.KindRequest {
				continue
			}
			var out []byte
			switch {
			case away:
				out = proto.AppendError(nil, f.ID, proto.FlagUnprocessed, proto.CodeUnavailable, "connection past its maximum age")
			case n == 1:
				out = append(response(f, []byte("1")), proto.AppendGoAway(nil, f.ID, proto.CodeUnavailable, "connection past its maximum age")...)
				away = true
			default:
				out = response(f, []byte(strconv.Itoa(int(n))))
			}
			if _, err := nc.Write(out); err != nil {
				return
			}
		}
	})
}

// gatedDial is an Options.Dial whose dials after the first wait for open
// to be closed, and then dial, or fail if fail is set.
type gatedDial struct {
	dials atomic.Int32
	open  chan struct{}
	fail  bool
}

func (g *gatedDial) dial(ctx context.Context, addr string) (net.Conn, error) {
	if g.dials.Add(1) > 1 {
		select {
		case <-g.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if g.fail {
			return nil, errors.New("dial refused by the test")
		}
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// TestGoAwaySuccessor: a call made while the successor of a connection the
// server sent away after serving it (a drain, its maximum age) is being
// dialled waits for it and goes on it, with no retry counted, rather than
// failing because no connection is usable in the moment between the two
// (here the dial is held for longer than the call's retries would take).
// If that dial fails, the calls waiting for it are not held: they fail
// (Unavailable, unprocessed) by the retry rules, before their deadline.
func TestGoAwaySuccessor(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail bool
	}{{"the successor comes", false}, {"its dial fails", true}} {
		t.Run(tc.name, func(t *testing.T) {
			g := &gatedDial{open: make(chan struct{}), fail: tc.fail}
			opts := fast
			opts.Dial = g.dial
			c := dial(t, goneAwayServer(t), opts)
			ctx := ctxFor(t, 10*time.Second)
			if reply, err := c.CallRaw(ctx, "Any/Route", nil, nil); err != nil || string(reply) != "1" {
				t.Fatalf("the first call: %q, %v", reply, err)
			}
			waitFor(t, func() bool { return g.dials.Load() == 2 }) // the successor is being dialled

			var wg sync.WaitGroup
			var reply []byte
			var err error
			wg.Add(1)
			go func() {
				defer wg.Done()
				reply, err = c.CallRaw(ctx, "Any/Route", nil, nil)
			}()
			// Room for the call to fail, were it not waiting: its retries
			// take a few backoffs.
			time.Sleep(200 * time.Millisecond)
			close(g.open)
			wg.Wait()
			if tc.fail {
				var e *handler.Error
				if !errors.As(err, &e) || e.Code != proto.CodeUnavailable || !e.Unprocessed {
					t.Fatalf("a call waiting for a successor whose dial failed: %q, %#v; want Unavailable, unprocessed", reply, err)
				}
				return
			}
			if err != nil || string(reply) != "2" {
				t.Fatalf("a call made while the successor was dialled: %q, %v; want it answered on the second connection", reply, err)
			}
			if n := client.Retries(c); n != 0 {
				t.Errorf("%d retries; want none: the call waited for the successor", n)
			}
		})
	}
}
