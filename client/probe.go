package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// probePayload is the Ping a probe sends. Its line breaks make an HTTP
// server answer at once (a request line it cannot parse: 400) rather than
// wait for the rest of a request; an rpcd server echoes it in its Pong.
var probePayload = []byte("rpcd probe\r\n\r\n")

// probe checks that the peer of nc, a new connection to addr, is an rpcd
// server: it sends a Ping and reads exactly one frame, its answer, within
// d (and ctx). A Pong passes; a GoAway is the server's refusal (draining,
// full); anything else is an Unavailable error saying what the peer did.
func probe(ctx context.Context, nc net.Conn, addr string, d time.Duration, lim *proto.Limits) error {
	start := time.Now()
	dl := start.Add(d)
	if cdl, ok := ctx.Deadline(); ok && cdl.Before(dl) {
		dl = cdl
	}
	_ = nc.SetDeadline(dl)
	defer nc.SetDeadline(time.Time{})
	unavailable := func(msg string) error {
		return &handler.Error{Code: proto.CodeUnavailable, Message: msg, Unprocessed: true}
	}
	if _, err := nc.Write(proto.AppendPing(nil, probePayload)); err != nil {
		return unavailable("probing " + addr + ": " + err.Error())
	}
	// The header alone, read without a buffer, so that nothing after the
	// answer is taken from the connection before its reader starts; each
	// read's bytes are looked at as they come (a TLS alert is 7 bytes).
	var hdr [proto.HeaderSize]byte
	var n int
	var err error
	for n < len(hdr) && err == nil {
		var m int
		m, err = nc.Read(hdr[n:])
		n += m
		if n > 0 && !looksLikeRPCD(hdr[:n]) {
			return unavailable(notRPCD(addr, hdr[:n]))
		}
	}
	switch {
	case err == nil:
	case n == 0 && errors.Is(err, os.ErrDeadlineExceeded):
		return unavailable(addr + " did not answer an rpcd Ping within " + dl.Sub(start).Round(time.Millisecond).String() + ": is it an rpcd server?")
	case n == 0 && (errors.Is(err, io.EOF) || isReset(err)):
		return unavailable(addr + " closed the connection without answering an rpcd Ping: not an rpcd server, or one that wants TLS")
	default:
		return unavailable("probing " + addr + ": " + err.Error())
	}
	h, err := proto.DecodeHeader(hdr[:], lim)
	if err != nil {
		return unavailable(addr + " answered an rpcd Ping with a frame rpcd cannot read: " + trimRPCD(err))
	}
	frame := make([]byte, h.Len())
	copy(frame, hdr[:])
	if _, err := io.ReadFull(nc, frame[proto.HeaderSize:]); err != nil {
		return unavailable("probing " + addr + ": reading its answer: " + err.Error())
	}
	f, _, err := proto.Decode(frame, lim)
	switch {
	case err != nil:
		return unavailable(addr + " answered an rpcd Ping with a frame rpcd cannot read: " + trimRPCD(err))
	case f.Kind == proto.KindPong && bytes.Equal(f.Payload, probePayload):
		return nil
	case f.Kind == proto.KindGoAway:
		_, code, msg := f.GoAwayBody()
		return &handler.Error{Code: code, Message: addr + " refused the connection: " + string(msg), Unprocessed: true}
	}
	return unavailable(addr + " answered an rpcd Ping with " + f.Kind.String())
}

// looksLikeRPCD reports whether b, the first bytes a peer sent, can begin
// an rpcd frame.
func looksLikeRPCD(b []byte) bool {
	want := [...]byte{proto.Magic0, proto.Magic1, proto.Version}
	return bytes.HasPrefix(want[:], b[:min(len(b), len(want))])
}

// notRPCD says that the peer at addr sent b, which no rpcd frame begins
// with, naming the protocol it looks like.
func notRPCD(addr string, b []byte) string {
	msg := addr + " answered with bytes that are not rpcd frames"
	switch {
	case bytes.HasPrefix(b, []byte("HTTP/")):
		msg += " (HTTP?)"
	case len(b) >= 2 && (b[0] == 0x15 || b[0] == 0x16) && b[1] == 0x03:
		msg += " (TLS?)"
	case bytes.HasPrefix(b, []byte("SSH-")):
		msg += " (SSH?)"
	case b[0] == proto.Magic0 && len(b) >= 3 && b[1] == proto.Magic1:
		msg = addr + " speaks rpcd protocol version " + strconv.Itoa(int(b[2])) + ", not " + strconv.Itoa(int(proto.Version))
	}
	return msg
}

// isReset reports whether err is the peer resetting the connection.
func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && !oe.Timeout() && oe.Op == "read"
}

// trimRPCD returns err's message without its "rpcd: " prefix, for a
// message that has one already.
func trimRPCD(err error) string {
	s := err.Error()
	if len(s) > 6 && s[:6] == "rpcd: " {
		return s[6:]
	}
	return s
}
