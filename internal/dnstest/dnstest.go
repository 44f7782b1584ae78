// Package dnstest serves DNS on loopback for the tests of discovery/dns and
// of the commands: records a test sets, answered over UDP.
package dnstest

import (
	"net"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// Zone is a DNS server on loopback UDP that answers A and SRV questions
// from records the test sets, AAAA ones with none, and NXDOMAIN for names
// it has nothing for.
type Zone struct {
	pc net.PacketConn

	mu  sync.Mutex
	a   map[string][]string // name (with its final dot) -> IPv4 addresses
	srv map[string][]dnsmessage.SRVResource
}

// Start starts a Zone, stopped when the test ends.
func Start(t testing.TB) *Zone {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	z := &Zone{pc: pc, a: map[string][]string{}, srv: map[string][]dnsmessage.SRVResource{}}
	done := make(chan struct{})
	go func() { defer close(done); z.serve() }()
	t.Cleanup(func() { pc.Close(); <-done })
	return z
}

// Addr is the server's address, for dns.Config.Server or a dns:// target.
func (z *Zone) Addr() string { return z.pc.LocalAddr().String() }

// SetA sets the A records of name (with its final dot); none removes the
// name.
func (z *Zone) SetA(name string, ips ...string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if len(ips) == 0 {
		delete(z.a, name)
		return
	}
	z.a[name] = ips
}

// SetSRV sets the SRV records of name (with its final dot).
func (z *Zone) SetSRV(name string, rs ...dnsmessage.SRVResource) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.srv[name] = rs
}

func (z *Zone) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := z.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		if out, err := z.answer(h, q); err == nil {
			_, _ = z.pc.WriteTo(out, from)
		}
	}
}

func (z *Zone) answer(h dnsmessage.Header, q dnsmessage.Question) ([]byte, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	name := strings.ToLower(q.Name.String())
	_, hasA := z.a[name]
	_, hasSRV := z.srv[name]
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	if !hasA && !hasSRV {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	res := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}
	switch q.Type {
	case dnsmessage.TypeA:
		for _, ip := range z.a[name] {
			var a dnsmessage.AResource
			copy(a.A[:], net.ParseIP(ip).To4())
			if err := b.AResource(res, a); err != nil {
				return nil, err
			}
		}
	case dnsmessage.TypeSRV:
		for _, r := range z.srv[name] {
			if err := b.SRVResource(res, r); err != nil {
				return nil, err
			}
		}
	}
	return b.Finish()
}

// SRV is an SRV record.
func SRV(priority, weight, port uint16, target string) dnsmessage.SRVResource {
	return dnsmessage.SRVResource{Priority: priority, Weight: weight, Port: port, Target: dnsmessage.MustNewName(target)}
}
