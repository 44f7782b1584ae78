package reactor

import (
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// TestPollListener: a listener with a descriptor is wrapped; its Accept
// takes the connections that come, and Close ends an Accept waiting in
// poll(2) with net.ErrClosed (a Close that did not wake the wait would
// hang, the Accept with it). A listener without a descriptor is left as is.
func TestPollListener(t *testing.T) {
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

			accepted := make(chan error, 1)
			go func() {
				nc, err := pl.Accept()
				if nc != nil {
					nc.Close()
				}
				accepted <- err
			}()
			time.Sleep(20 * time.Millisecond) // let it wait in poll(2)
			closed := make(chan error, 1)
			go func() { closed <- pl.Close() }()
			for _, ch := range []chan error{accepted, closed} {
				select {
				case err := <-ch:
					if ch == accepted && !errors.Is(err, net.ErrClosed) {
						t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
					}
					if ch == closed && err != nil {
						t.Errorf("Close: %v", err)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("Close did not end the Accept waiting in poll(2)")
				}
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
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		pl := newPollListener(ln).(*pollListener)
		accepted := make(chan error, 1)
		go func() {
			_, err := pl.Accept()
			accepted <- err
		}()
		time.Sleep(20 * time.Millisecond)
		closed := make(chan error, 1)
		go func() { closed <- ln.Close() }()
		for _, ch := range []chan error{closed, accepted} {
			select {
			case err := <-ch:
				if ch == accepted && !errors.Is(err, net.ErrClosed) {
					t.Errorf("Accept after the listener's Close: %v, want net.ErrClosed", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the listener's own Close and the Accept did not end")
			}
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
