package admin

import (
	_ "embed"
	"errors"
	"net/http"
	"net/http/pprof"
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
	// shows calls, latency and the table by route from it. Without it the
	// page shows connections, bytes and errors only.
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
}

// Handler serves the admin paths for one server. Make one with New.
type Handler struct {
	srv     *reactor.Server
	metrics *metrics.Metrics
	gw      *gateway.Gateway
	mux     *http.ServeMux
	build   buildinfo.Info

	mu      sync.Mutex
	samples []sample // oldest first; see sampleAndCompare
}

// New returns the admin handler for srv.
func New(srv *reactor.Server, opts Options) *Handler {
	h := &Handler{srv: srv, metrics: opts.Metrics, gw: opts.Gateway, mux: http.NewServeMux(), build: buildinfo.Read()}
	h.samples = append(h.samples, h.take(time.Now())) // the base of the first rates

	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	register(reg, collectors.NewGoCollector())
	register(reg, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	register(reg, Collector(srv, opts.Gateway))
	if h.metrics != nil {
		register(reg, h.metrics)
	}

	h.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	h.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		plain(w, http.StatusOK, "ok\n")
	})
	h.mux.HandleFunc("GET /readyz", h.readyz)
	h.mux.HandleFunc("GET /stats.json", h.statsJSON)
	h.mux.HandleFunc("GET /{$}", h.page)
	h.mux.HandleFunc("/debug/pprof/", pprof.Index) // and each profile by name under it
	h.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	h.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	h.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	h.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return h
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

// page serves the live page.
func (h *Handler) page(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(pageHTML)
}

func plain(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}
