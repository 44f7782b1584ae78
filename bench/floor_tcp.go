package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// tcpFloor is the bare minimum of a request and a reply over loopback TCP:
// frames of a 4-byte big-endian length and the payload, a goroutine per
// connection on the server doing blocking reads and echoing each frame with
// one write. No routing, no ids, no multiplexing: callers sharing a
// connection take turns (a mutex per connection), so its 1-conn ×
// 128-caller cell is 128 callers queueing for one ping-pong, not
// multiplexing.
type tcpFloor struct {
	// corrupt, if set, makes the server flip a bit of every echo (tests use
	// it to see the reply check fail).
	corrupt bool
}

func init() { register(tcpFloor{}) }

func (tcpFloor) name() string { return "tcp-floor" }

// maxFloorFrame bounds a floor frame's payload.
const maxFloorFrame = 64 << 20

func (f tcpFloor) serve(addr string) (func(), string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	var (
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.echo(c)
				c.Close()
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
			}()
		}
	}()
	stop := func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}
	return stop, ln.Addr().String(), nil
}

// echo serves one connection: read a frame, write it back, until EOF.
func (f tcpFloor) echo(c net.Conn) {
	r := bufio.NewReaderSize(c, 64<<10)
	buf := make([]byte, 0, 64<<10)
	for {
		frame, err := readFrame(r, buf[:0])
		if err != nil {
			return
		}
		buf = frame
		if f.corrupt && len(frame) > 4 {
			frame[len(frame)-1] ^= 1
		}
		if _, err := c.Write(frame); err != nil {
			return
		}
	}
}

// readFrame reads one length-prefixed frame from r and appends it, header
// included, to buf.
func readFrame(r io.Reader, buf []byte) ([]byte, error) {
	buf = append(buf[:0], 0, 0, 0, 0)
	if _, err := io.ReadFull(r, buf[:4]); err != nil {
		return buf, err
	}
	n := int(binary.BigEndian.Uint32(buf[:4]))
	if n > maxFloorFrame {
		return buf, fmt.Errorf("bench: floor frame of %d bytes", n)
	}
	if cap(buf) < 4+n {
		nb := make([]byte, 4, 4+n)
		copy(nb, buf)
		buf = nb
	}
	buf = buf[:4+n]
	_, err := io.ReadFull(r, buf[4:])
	return buf, err
}

func (tcpFloor) dial(addr string, conns int) (caller, error) { return dialFloor(addr, conns) }

// floorCaller is the floors' client: per connection, write a frame and read
// the echo with blocking calls, one call at a time.
type floorCaller struct{ conns []*floorConn }

type floorConn struct {
	mu   sync.Mutex
	c    net.Conn
	r    *bufio.Reader
	hdr  [4]byte
	vec  [2][]byte
	bufs net.Buffers
}

func dialFloor(addr string, conns int) (caller, error) {
	f := &floorCaller{}
	for range conns {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			f.close()
			return nil, err
		}
		f.conns = append(f.conns, &floorConn{c: c, r: bufio.NewReaderSize(c, 64<<10)})
	}
	return f, nil
}

// call writes header and payload with one writev, then reads the echo's
// header and its payload straight into reply.
func (f *floorCaller) call(_ context.Context, worker int, req, reply []byte) ([]byte, error) {
	fc := f.conns[connIndex(worker, len(f.conns))]
	fc.mu.Lock()
	defer fc.mu.Unlock()
	binary.BigEndian.PutUint32(fc.hdr[:], uint32(len(req)))
	fc.vec = [2][]byte{fc.hdr[:], req}
	fc.bufs = fc.vec[:] // WriteTo consumes the slice, not the array
	if _, err := fc.bufs.WriteTo(fc.c); err != nil {
		return reply, err
	}
	if _, err := io.ReadFull(fc.r, fc.hdr[:]); err != nil {
		return reply, err
	}
	n := int(binary.BigEndian.Uint32(fc.hdr[:]))
	if n > maxFloorFrame {
		return reply, fmt.Errorf("bench: floor frame of %d bytes", n)
	}
	if cap(reply) < n {
		reply = make([]byte, n)
	}
	reply = reply[:n]
	_, err := io.ReadFull(fc.r, reply)
	return reply, err
}

func (f *floorCaller) close() error {
	var errs []error
	for _, fc := range f.conns {
		errs = append(errs, fc.c.Close())
	}
	return errors.Join(errs...)
}
