//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package reactor

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// TestPollListener: a listener with a descriptor is wrapped; its Accept
// takes the connections that come, and Close ends an Accept waiting in
// poll(2) with net.ErrClosed (with the waits unbounded here, a Close that
// did not wake the wait would hang, the Accept with it). A listener
// without a descriptor is left as is.
func TestPollListener(t *testing.T) {
	defer func(d time.Duration) { acceptPollMax = d }(acceptPollMax)
	acceptPollMax = time.Hour // only Close's wake-up can end a wait
	for _, addr := range []string{"127.0.0.1:0", "unix://" + filepath.Join(t.TempDir(), "s.sock")} {
		t.Run(addr[:4], func(t *testing.T) {
			ln, err := Listen(addr)
			if err != nil {
				t.Fatal(err)
			}
			pl, ok := newPollListener(ln).(*pollListener)
			if !ok {
				ln.Close()
				t.Fatalf("%T not wrapped", ln)
			}
			for i := range 3 {
				nc, err := net.Dial(ln.Addr().Network(), ln.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				got, err := pl.Accept()
				if err != nil {
					t.Fatalf("accept %d: %v", i, err)
				}
				if _, err := nc.Write([]byte{byte(i)}); err != nil {
					t.Fatal(err)
				}
				b := make([]byte, 1)
				if _, err := got.Read(b); err != nil || b[0] != byte(i) {
					t.Fatalf("connection %d read %v, %v", i, b, err)
				}
				nc.Close()
				got.Close()
			}

			acceptErr, closeErr := closeWhileAccepting(t, pl, pl.Close)
			if !errors.Is(acceptErr, net.ErrClosed) || closeErr != nil {
				t.Errorf("Accept and Close: %v and %v, want net.ErrClosed and nil", acceptErr, closeErr)
			}
			if _, err := pl.Accept(); !errors.Is(err, net.ErrClosed) {
				t.Errorf("Accept on a closed listener: %v, want net.ErrClosed", err)
			}
			if err := pl.Close(); err != nil {
				t.Errorf("a second Close: %v", err)
			}
		})
	}

	t.Run("closed underneath", func(t *testing.T) {
		// Server.Serve's caller may close its own listener: a wait in
		// poll(2) holds the descriptor for at most acceptPollMax, so that
		// Close returns and the Accept ends, and the pipe is closed.
		acceptPollMax = 200 * time.Millisecond
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		pl := newPollListener(ln).(*pollListener)
		if acceptErr, _ := closeWhileAccepting(t, pl, ln.Close); !errors.Is(acceptErr, net.ErrClosed) {
			t.Errorf("Accept after the listener's own Close: %v, want net.ErrClosed", acceptErr)
		}
		if fd := pl.wakeR.Fd(); fd != ^uintptr(0) {
			t.Errorf("the pipe's read end is still open (descriptor %d)", fd)
		}
	})

	type plain struct{ net.Listener } // hides the descriptor
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got := newPollListener(plain{ln}); got != (plain{ln}) {
		t.Errorf("a listener without a descriptor became %T", got)
	}
}

// closeWhileAccepting starts an Accept on pl, lets it wait in poll(2),
// calls closeFn, and returns what the Accept and closeFn returned; it
// fails the test if either has not returned within 5 s.
func closeWhileAccepting(t *testing.T, pl *pollListener, closeFn func() error) (acceptErr, closeErr error) {
	t.Helper()
	accepted, closed := make(chan error, 1), make(chan error, 1)
	go func() {
		nc, err := pl.Accept()
		if nc != nil {
			nc.Close()
		}
		accepted <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it wait in poll(2)
	go func() { closed <- closeFn() }()
	for _, p := range []struct {
		ch  chan error
		err *error
	}{{accepted, &acceptErr}, {closed, &closeErr}} {
		select {
		case *p.err = <-p.ch:
		case <-time.After(5 * time.Second):
			t.Fatal("the Close and the Accept waiting in poll(2) did not both return")
		}
	}
	return acceptErr, closeErr
}

// TestPollListenerOnlyWithALoopPerP: a server whose loops take every P
// accepts through poll(2), which busy loops do not starve; one with a P to
// spare accepts in Go's network poller, where a wait costs nothing (each
// wait in poll(2) has sysmon tick). Either takes its connections.
func TestPollListenerOnlyWithALoopPerP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	for _, tc := range []struct {
		loops int
		poll  bool
	}{{1, false}, {2, true}} {
		s := New(handler.NewRegistry(), Options{Loops: tc.loops})
		if err := s.Start("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if _, poll := s.ln.(*pollListener); poll != tc.poll {
			t.Errorf("%d loops on 2 Ps: listener %T, want poll(2) %v", tc.loops, s.ln, tc.poll)
		}
		nc, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(proto.AppendPing(nil, []byte("x"))); err != nil {
			t.Fatal(err)
		}
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		lim := proto.Limits{}.WithDefaults()
		var buf []byte
		var f proto.Frame
		for err == nil {
			b := make([]byte, 64)
			var n, used int
			if n, err = nc.Read(b); err == nil {
				buf = append(buf, b[:n]...)
				if f, used, err = proto.Decode(buf, &lim); used > 0 {
					break
				}
			}
		}
		if err != nil || f.Kind != proto.KindPong {
			t.Errorf("%d loops: a Ping got %v, %v; want a Pong", tc.loops, f.Kind, err)
		}
		nc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.Shutdown(ctx)
		cancel()
	}
}
