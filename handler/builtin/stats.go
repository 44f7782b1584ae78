package builtin

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/cputime"
)

// Stats is the route HandleStats registers.
const Stats = "Sys/Stats"

// StatsReply is what Sys/Stats returns: a sample of the serving process,
// for soak runs and for a look inside a running daemon.
type StatsReply struct {
	Goroutines int    `json:"goroutines"`
	HeapAlloc  uint64 `json:"heap_alloc"` // bytes of live and not yet swept heap objects
	HeapInuse  uint64 `json:"heap_inuse"` // bytes in heap spans in use
	Sys        uint64 `json:"sys"`        // bytes the Go runtime got from the OS
	RSS        uint64 `json:"rss"`        // resident set size in bytes; 0 where unknown
	NumGC      uint32 `json:"num_gc"`
	Conns      int    `json:"conns"` // open connections; -1 where unknown
	// CPUSec is the user plus system CPU time the process has used so
	// far, in seconds (getrusage); 0 where unknown. Two samples' difference
	// over the calls between them is the server's CPU per call, as rpcd
	// bench and rpcd soak report it.
	CPUSec float64 `json:"cpu_sec"`
}

// HandleStats registers Sys/Stats on reg. conns, if not nil, reports the
// server's open connections. The route runs on the blocking pool: reading
// the memory statistics stops the world for a moment.
func HandleStats(reg *handler.Registry, conns func() int) {
	reg.Handle(Stats, handler.Func(func(context.Context, struct{}) (StatsReply, error) {
		return ReadStats(conns), nil
	}), handler.Blocking())
}

// ReadStats samples this process.
func ReadStats(conns func() int) StatsReply {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r := StatsReply{
		Goroutines: runtime.NumGoroutine(),
		HeapAlloc:  ms.HeapAlloc,
		HeapInuse:  ms.HeapInuse,
		Sys:        ms.Sys,
		RSS:        rss(),
		NumGC:      ms.NumGC,
		Conns:      -1,
		CPUSec:     cputime.Process().Seconds(),
	}
	if conns != nil {
		r.Conns = conns()
	}
	return r
}

// rss reads the resident set size from /proc/self/statm (Linux); 0
// elsewhere or on any error.
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}
