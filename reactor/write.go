package reactor

// Writing a wake-up's output. On an event loop rpcd writes to the socket
// itself, never into gnet's outbound buffer: what the socket does not take
// at once is kept in conn.held, the connection stops running frames, and
// it leaves its loop for a goroutine of its own (handoff.go) that writes
// the rest as the peer reads it and reads nothing meanwhile, so that TCP
// holds the peer back. gnet's buffer would not do: gnet goes on reading a
// connection whose output waits, and what its buffer holds cannot be
// handed on. On the connection's own goroutine a write waits until the
// peer has taken it all, or has taken nothing for Options.WriteTimeout
// (writeStd). The loop's system calls on the socket are in socket_unix.go.

// flush writes out, a wake-up's output so far, and returns it emptied for
// what follows. A failed write loses the connection (c.lost).
func (c *conn) flush(out []byte) []byte {
	if len(out) > 0 && !c.lost {
		c.write(out, nil)
	}
	return out[:0]
}

// writeOwn writes the replies in out and then a large reply's payload from
// the handler's own slice, so that the payload is not copied (on a loop,
// in one writev). It returns out emptied, for the replies that follow.
func (c *conn) writeOwn(out, own []byte) []byte {
	if !c.lost {
		c.write(out, own)
	}
	return out[:0]
}

// write writes out and then own, if any, on whichever goroutine serves the
// connection.
func (c *conn) write(out, own []byte) {
	c.tapOut(out, own)
	if c.std.Load() != nil {
		c.lost = !c.writeStd(out, own)
		return
	}
	c.writeLoop(out, own)
}

// writeLoop writes out and then own on the loop's socket without waiting.
// What the socket does not take is copied to c.held, as is everything
// once something is held; readFrames stops running frames then.
func (c *conn) writeLoop(out, own []byte) {
	if c.held != nil {
		c.held = append(append(c.held, out...), own...)
		return
	}
	fd := c.gc.Fd()
	if fd < 0 { // no socket: a test's connection, which takes everything
		var err error
		if own != nil {
			_, err = c.gc.Writev([][]byte{out, own})
		} else {
			_, err = c.gc.Write(out)
		}
		c.wrote(len(out)+len(own), err)
		return
	}
	n, err := writeSocket(fd, out, own)
	c.wrote(n, err)
	if rest := len(out) + len(own) - n; rest > 0 && err == nil {
		held := make([]byte, 0, rest)
		if n < len(out) {
			held, n = append(held, out[n:]...), 0
		} else {
			n -= len(out)
		}
		c.held = append(held, own[n:]...)
	}
}

// wrote counts n bytes written and acts on a failed write.
func (c *conn) wrote(n int, err error) {
	c.bytesOut.Add(uint64(n))
	if err != nil {
		c.s.log.Debug("rpcd: writing to a connection", "remote", c.remote, "err", err)
		c.lost = true
	}
}
