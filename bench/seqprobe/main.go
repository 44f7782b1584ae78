// Command seqprobe measures what one sequential call costs each side, client
// and server, with clients that differ only where the question needs them
// to (docs/performance.md, "Where the time goes"):
//
//   - bare: one goroutine that writes a request and reads its reply with
//     blocking calls, nothing else; against rpcd it speaks rpcd's frames,
//     against the gnet floor the floors' length-prefixed ones. The same
//     client against both servers compares the servers alone.
//   - client: rpcd's client (client.CallRaw) with context.Background().
//   - client-ctx: the same with a context that can be cancelled, as the
//     bench module's callers have.
//
// The servers are the bench module's, each in a child process ("bench
// -serve rpcd", "bench -serve gnet-floor"); every client run is a child
// process of its own, so its CPU time is its own. Runs are interleaved,
// -rounds times, and the medians printed with each run's figures:
//
//	cd bench && go build -o /tmp/bench . && go run ./seqprobe -bench /tmp/bench
//
// CPU time comes from the kernel's accounting: the client's from its exit
// status, the server's from /proc/PID/stat (10 ms ticks, so runs should
// last a second or more).
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/rpcd/rpcd/bench/internal/cputime"
	"github.com/rpcd/rpcd/bench/internal/stat"
	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
)

// pairing is a client against a server.
type pairing struct{ client, server string }

var pairings = []pairing{
	{"bare", "rpcd"},
	{"bare", "gnet-floor"},
	{"client", "rpcd"},
	{"client-ctx", "rpcd"},
}

func main() {
	benchBin := flag.String("bench", "", "the bench module's binary, which serves the systems (go build -o /tmp/bench .)")
	n := flag.Int("n", 40000, "sequential calls per run")
	rounds := flag.Int("rounds", 9, "runs of each pairing, interleaved")
	only := flag.String("pairings", "", "comma-separated client@server pairings to run (default: all)")
	child := flag.String("child", "", "internal: run this client against -addr and exit")
	addr := flag.String("addr", "", "internal: the server's address")
	server := flag.String("server", "", "internal: the server's system")
	flag.Parse()
	log.SetFlags(0)
	if *child != "" {
		if err := runClient(*child, *server, *addr, *n); err != nil {
			log.Fatalf("seqprobe: %s against %s: %v", *child, *server, err)
		}
		return
	}
	if *benchBin == "" {
		log.Fatal("seqprobe: -bench is required: cd bench && go build -o /tmp/bench .")
	}
	chosen := pairings
	if *only != "" {
		chosen = nil
		for _, p := range strings.Split(*only, ",") {
			c, s, ok := strings.Cut(p, "@")
			if !ok {
				log.Fatalf("seqprobe: pairing %q is not client@server", p)
			}
			chosen = append(chosen, pairing{c, s})
		}
	}
	servers := map[string]*serverProc{}
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	for _, p := range chosen {
		if servers[p.server] == nil {
			s, err := startServer(*benchBin, p.server)
			if err != nil {
				log.Fatal(err)
			}
			servers[p.server] = s
		}
	}
	exe, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	results := map[pairing][]result{}
	for r := 1; r <= *rounds; r++ {
		for _, p := range chosen {
			res, err := measure(exe, p, servers[p.server], *n)
			if err != nil {
				log.Fatal(err)
			}
			results[p] = append(results[p], res)
			fmt.Printf("round %d  %-10s @ %-10s  %7.0f calls/s  client %5.2f  server %5.2f  µs CPU/call\n",
				r, p.client, p.server, res.callsPerSec, res.clientUS, res.serverUS)
		}
	}
	fmt.Printf("\nmedians of %d rounds of %d sequential calls each:\n", *rounds, *n)
	for _, p := range chosen {
		rs := results[p]
		fmt.Printf("%-10s @ %-10s  %7.0f calls/s  client %5.2f  server %5.2f  µs CPU/call\n", p.client, p.server,
			stat.Median(rs, func(r result) float64 { return r.callsPerSec }),
			stat.Median(rs, func(r result) float64 { return r.clientUS }),
			stat.Median(rs, func(r result) float64 { return r.serverUS }))
	}
}

type result struct{ callsPerSec, clientUS, serverUS float64 }

// measure runs one client child against s and returns its figures.
func measure(exe string, p pairing, s *serverProc, n int) (result, error) {
	before, err := s.cpu()
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	cmd := exec.Command(exe, "-child", p.client, "-server", p.server, "-addr", s.addr, "-n", strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("seqprobe: client %s: %w", p.client, err)
	}
	elapsed := time.Since(start)
	after, err := s.cpu()
	if err != nil {
		return result{}, err
	}
	st := cmd.ProcessState
	clientCPU := st.UserTime() + st.SystemTime()
	return result{
		callsPerSec: float64(n) / elapsed.Seconds(), // includes the child's start-up: a few ms
		clientUS:    float64(clientCPU.Microseconds()) / float64(n),
		serverUS:    float64((after - before).Microseconds()) / float64(n),
	}, nil
}

// serverProc is a bench module server in a child process.
type serverProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
}

func startServer(benchBin, system string) (*serverProc, error) {
	cmd := exec.Command(benchBin, "-serve", system)
	stdin, err := cmd.StdinPipe() // the server stops when it closes
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("seqprobe: starting %s: %w", system, err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("seqprobe: %s did not say where it listens: %q, %v", system, line, err)
	}
	return &serverProc{cmd: cmd, stdin: stdin, addr: addr}, nil
}

func (s *serverProc) stop() {
	_ = s.stdin.Close()
	_ = s.cmd.Wait()
}

// cpu returns the server's user and system CPU time so far.
func (s *serverProc) cpu() (time.Duration, error) { return cputime.Process(s.cmd.Process.Pid) }

// runClient makes n sequential calls of a 16-byte echo.
func runClient(kind, server, addr string, n int) error {
	payload := make([]byte, 16)
	for i := range payload {
		payload[i] = byte('a' + i)
	}
	switch kind {
	case "bare":
		return bare(server, addr, payload, n)
	case "client", "client-ctx", "client-noka", "client-timeout":
		ctx := context.Background()
		if kind == "client-ctx" {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
		}
		opts := client.Options{}
		switch kind {
		case "client-noka":
			opts.KeepAlive = -1 // no keep-alive timer
		case "client-timeout":
			opts.Timeout = 5 * time.Second // a context with a timeout per call
		}
		c, err := client.Dial(ctx, addr, opts)
		if err != nil {
			return err
		}
		defer c.Close()
		reply := make([]byte, 0, 64)
		for range n {
			if reply, err = c.CallRaw(ctx, builtin.EchoPacket, payload, reply[:0]); err != nil {
				return err
			}
			if string(reply) != string(payload) {
				return fmt.Errorf("reply %q, want %q", reply, payload)
			}
		}
		return nil
	}
	return fmt.Errorf("no client %q (bare, client, client-ctx, client-noka, client-timeout)", kind)
}

// bare is the plainest sequential client: write, then read the reply with
// blocking calls, through a buffered reader, so that a reply takes one
// read from the socket whatever its framing (reading an rpcd frame's
// header and then its body straight from the socket took two).
func bare(server, addr string, payload []byte, n int) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	br := bufio.NewReaderSize(conn, 64<<10)
	buf := make([]byte, 4096)
	var req []byte
	var read func() ([]byte, error)
	switch server {
	case "rpcd":
		req = proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, Codec: proto.CodecRaw, ID: 1}, builtin.EchoPacket, nil, payload)
		lim := proto.Limits{}.WithDefaults()
		read = func() ([]byte, error) {
			if _, err := io.ReadFull(br, buf[:proto.HeaderSize]); err != nil {
				return nil, err
			}
			h, err := proto.DecodeHeader(buf[:proto.HeaderSize], &lim)
			if err != nil {
				return nil, err
			}
			if h.Kind != proto.KindResponse {
				return nil, fmt.Errorf("a %v frame, want a response", h.Kind)
			}
			body := buf[:h.Len()-proto.HeaderSize]
			if _, err := io.ReadFull(br, body); err != nil {
				return nil, err
			}
			return body[h.MetadataLen:], nil
		}
	case "gnet-floor", "tcp-floor":
		req = binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
		req = append(req, payload...)
		read = func() ([]byte, error) {
			body := buf[:len(req)]
			if _, err := io.ReadFull(br, body); err != nil {
				return nil, err
			}
			return body[4:], nil
		}
	default:
		return fmt.Errorf("the bare client speaks to rpcd, gnet-floor or tcp-floor, not %q", server)
	}
	for range n {
		if _, err := conn.Write(req); err != nil {
			return err
		}
		reply, err := read()
		if err != nil {
			return err
		}
		if string(reply) != string(payload) {
			return fmt.Errorf("reply %q, want %q", reply, payload)
		}
	}
	return nil
}
