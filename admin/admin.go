package admin

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/pprof"
	"path"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rpcd/rpcd/gateway"
	"github.com/rpcd/rpcd/internal/buildinfo"
	"github.com/rpcd/rpcd/metrics"
	"github.com/rpcd/rpcd/reactor"
)

// Options configures a Handler. The zero Options is valid.
type Options struct {
	// Metrics, if set, counts the server's calls by route (its Middleware
	// is in the server's registry): /metrics exports it, and the live page
	// shows calls, handler time and the table by route from it. Without it
	// the page shows connections, bytes and errors only.
	Metrics *metrics.Metrics

	// Gateway, if set, is the HTTP/JSON gateway that serves the same
	// registry: /metrics counts its responses by route and status
	// (rpcd_gateway_responses_total), and its calls answered with an error
	// in rpcd_errors_total with the server's; the live page's errors too.
	Gateway *gateway.Gateway

	// Registry, if set, is where the Handler registers its collectors and
	// what /metrics serves, so that a program can add metrics of its own.
	// Default: a registry of the Handler's own.
	Registry *prometheus.Registry

	// SampleInterval is how often the Handler reads the counters, from New
	// until Close, for the live page's charts (/history.json) and as the
	// bases of its rates: rates are over the last interval or so,
	// percentiles over the last ten. Default DefaultSampleInterval.
	SampleInterval time.Duration

	// History is how long the samples are kept for /history.json. Default
	// DefaultHistory.
	History time.Duration

	// CompressMin is the smallest JSON reply (/stats.json,
	// /history.json) compressed for a client whose Accept-Encoding takes
	// zstd or gzip, by the gateway's rules (gateway.Write): 0 means
	// gateway.DefaultCompressMin (1 KiB), negative never. (/metrics
	// compresses as promhttp does: gzip when asked.)
	CompressMin int

	// Config, if set, says which configuration the server runs: /metrics
	// exports its generation, the time it was loaded and the reloads
	// refused (rpcd_config_generation,
	// rpcd_config_last_load_timestamp_seconds,
	// rpcd_config_reloads_failed_total).
	Config func() ConfigStatus
}

// ConfigStatus is which configuration a server runs, as Options.Config
// says it.
type ConfigStatus struct {
	Generation uint64    // 1 for the configuration it started with, one more for each reload it applied
	Loaded     time.Time // when that configuration was loaded
	Failed     uint64    // reloads refused, the running configuration kept
}

// The defaults of Options.
const (
	DefaultSampleInterval = time.Second
	DefaultHistory        = 10 * time.Minute
)

// Handler serves the admin paths for one server. Make one with New, and
// Close it when done: it samples the counters on a goroutine of its own.
type Handler struct {
	srv     *reactor.Server
	metrics *metrics.Metrics
	gw      *gateway.Gateway
	mux     *http.ServeMux
	build   buildinfo.Info
	zipMin  int // Options.CompressMin

	interval      time.Duration // between samples
	rateWindow    time.Duration // the least age of a rate's base sample
	latencyWindow time.Duration // the least age of a percentile's base sample

	mu      sync.Mutex
	recent  []sample // oldest first: one at least latencyWindow old, and those after it
	history ring     // the points between samples, for /history.json

	stop      chan struct{} // closed by Close
	done      chan struct{} // closed when the sampler has stopped
	closeOnce sync.Once
}

// New returns the admin handler for srv. It takes a first sample at once
// and then one every Options.SampleInterval until Close.
func New(srv *reactor.Server, opts Options) *Handler {
	if opts.SampleInterval <= 0 {
		opts.SampleInterval = DefaultSampleInterval
	}
	if opts.History <= 0 {
		opts.History = DefaultHistory
	}
	h := &Handler{
		srv: srv, metrics: opts.Metrics, gw: opts.Gateway, mux: http.NewServeMux(), build: buildinfo.Read(), zipMin: opts.CompressMin,
		interval:      opts.SampleInterval,
		rateWindow:    opts.SampleInterval,
		latencyWindow: 10 * opts.SampleInterval,
		history:       newRing(int(max(opts.History/opts.SampleInterval, 1))),
		stop:          make(chan struct{}),
		done:          make(chan struct{}),
	}
	h.recent = append(h.recent, h.take(time.Now())) // the base of the first rates and points

	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	register(reg, collectors.NewGoCollector())
	register(reg, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	register(reg, serverCollector{srv: srv, gw: opts.Gateway, build: h.build, config: opts.Config})
	if h.metrics != nil {
		register(reg, h.metrics)
	}

	h.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	h.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		plain(w, http.StatusOK, "ok\n")
	})
	h.mux.HandleFunc("GET /readyz", h.readyz)
	h.mux.HandleFunc("GET /stats.json", h.statsJSON)
	h.mux.HandleFunc("GET /history.json", h.historyJSON)
	h.mux.HandleFunc("GET /{$}", h.page)
	h.mux.HandleFunc("GET /uplot/{file}", uplotFile)
	h.mux.HandleFunc("/debug/pprof/", pprof.Index) // and each profile by name under it
	h.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	h.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	h.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	h.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go h.sampleEvery()
	return h
}

// Close stops the sampling; the Handler still serves, its history no
// longer growing. It returns once the sampling goroutine has ended.
func (h *Handler) Close() error {
	h.closeOnce.Do(func() { close(h.stop) })
	<-h.done
	return nil
}

// register adds c to reg; a collector reg already has (a program's own Go
// collector) is left as it is.
func register(reg *prometheus.Registry, c prometheus.Collector) {
	var are prometheus.AlreadyRegisteredError
	if err := reg.Register(c); err != nil && !errors.As(err, &are) {
		panic("rpcd: admin: " + err.Error())
	}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// readyz answers 200 while the server accepts connections and 503 before
// it does and once it drains.
func (h *Handler) readyz(w http.ResponseWriter, _ *http.Request) {
	switch {
	case h.srv.Ready():
		plain(w, http.StatusOK, "ready\n")
	case h.srv.Stats().Draining:
		plain(w, http.StatusServiceUnavailable, "draining\n")
	default:
		plain(w, http.StatusServiceUnavailable, "not serving\n")
	}
}

//go:embed page.html
var pageHTML []byte

// uPlot draws the live page's charts: a copy of its release, unchanged,
// embedded (admin/uplot/README.md says where from and how to update it).
//
//go:embed uplot/uPlot.iife.min.js uplot/uPlot.min.css uplot/LICENSE
var uplotFS embed.FS

// uplotVersion is the release of uPlot the live page is drawn with, in
// admin/uplot.
const uplotVersion = "1.6.32"

// uplotFile serves a file of admin/uplot: the script, its style sheet
// and its licence, tagged with uPlot's version, so that a browser asks
// again after an upgrade and is answered 304 until then.
func uplotFile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, err := uplotFS.ReadFile("uplot/" + name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	ct := "text/plain; charset=utf-8"
	switch path.Ext(name) {
	case ".js":
		ct = "text/javascript; charset=utf-8"
	case ".css":
		ct = "text/css; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("ETag", `"uplot-`+uplotVersion+`"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}

// page serves the live page.
func (h *Handler) page(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(pageHTML)
}

// writeJSON writes v as a JSON reply, not to be cached, compressed by the
// gateway's rules.
func (h *Handler) writeJSON(w http.ResponseWriter, r *http.Request, v any, indent bool) {
	var b []byte
	var err error
	if indent {
		b, err = json.MarshalIndent(v, "", " ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		plain(w, http.StatusInternalServerError, "rpcd: admin: "+err.Error()+"\n")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	gateway.Write(w, r, http.StatusOK, "application/json", append(b, '\n'), h.zipMin)
}

func plain(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}
