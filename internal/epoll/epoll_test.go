//go:build linux

package epoll_test

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/rpcd/rpcd/internal/epoll"
)

// pair returns a connected TCP pair on loopback: the client's duplicate
// descriptor (its net.Conn closed) and the server's end.
func pair(t *testing.T) (int, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	rc, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := epoll.Dup(rc)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close() // the socket stays fd's
	t.Cleanup(func() { syscall.Close(fd) })
	return fd, peer
}

// An instance reports a socket with bytes under its data, parks until
// then, and returns at its deadline with none.
func TestWait(t *testing.T) {
	in, err := epoll.New(8, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	fd, peer := pair(t)
	if err := in.Ctl(syscall.EPOLL_CTL_ADD, fd, syscall.EPOLLIN, 42); err != nil {
		t.Fatal(err)
	}
	in.SetDeadline(time.Now().Add(50 * time.Millisecond))
	if evs, err := in.Wait(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Wait on a quiet socket: %v, %v; want the deadline", evs, err)
	}
	in.SetDeadline(time.Time{})
	go func() {
		time.Sleep(20 * time.Millisecond)
		peer.Write([]byte("hello"))
	}()
	evs, err := in.Wait()
	if err != nil || len(evs) != 1 || evs[0].Fd != 42 || evs[0].Events&syscall.EPOLLIN == 0 {
		t.Fatalf("Wait: %v, %v; want one readable event with data 42", evs, err)
	}
	b := make([]byte, 16)
	if n, err := syscall.Read(fd, b); err != nil || string(b[:n]) != "hello" {
		t.Fatalf("read %q, %v from the duplicate", b[:n], err)
	}
}

// WriteNow takes what the socket takes and stops, without an error, when
// it is full; WaitFd, and Write, wait for room until their deadline.
func TestWriteNowAndWaitFd(t *testing.T) {
	fd, _ := pair(t) // the peer reads nothing
	if err := epoll.WaitFd(fd, epoll.PollIn, time.Now().Add(20*time.Millisecond)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("WaitFd for bytes that never come: %v, want the deadline", err)
	}
	big := make([]byte, 64<<20)
	n, err := epoll.WriteNow(fd, big)
	if err != nil || n <= 0 || n >= len(big) {
		t.Fatalf("WriteNow of 64 MiB to a peer that reads nothing: %d, %v; want part of it", n, err)
	}
	if err := epoll.WaitFd(fd, epoll.PollOut, time.Now().Add(20*time.Millisecond)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("WaitFd for room in a full socket: %v, want the deadline", err)
	}
	if n, err := epoll.Write(fd, big, time.Now().Add(20*time.Millisecond)); !errors.Is(err, os.ErrDeadlineExceeded) || n >= len(big) {
		t.Fatalf("Write to a full socket by a deadline: %d, %v; want part of it and the deadline", n, err)
	}
}
