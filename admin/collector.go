package admin

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rpcd/rpcd/gateway"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/buildinfo"
	"github.com/rpcd/rpcd/metrics"
	"github.com/rpcd/rpcd/reactor"
)

// The server's metrics; docs/operating.md explains each.
var (
	connsDesc = prometheus.NewDesc("rpcd_connections",
		"Connections open now.", nil, nil)
	connsOpenedDesc = prometheus.NewDesc("rpcd_connections_opened_total",
		"Connections taken in and served.", nil, nil)
	connsRefusedDesc = prometheus.NewDesc("rpcd_connections_refused_total",
		"Connections turned away at once with a GoAway: past the connection limit, or while draining.", nil, nil)
	bytesInDesc = prometheus.NewDesc("rpcd_received_bytes_total",
		"Bytes read from connections (after TLS).", nil, nil)
	bytesOutDesc = prometheus.NewDesc("rpcd_sent_bytes_total",
		"Bytes written to connections (before TLS).", nil, nil)
	slowDesc = prometheus.NewDesc("rpcd_slow_consumers_total",
		"Connections cut off because their peer took none of their output for the write timeout.", nil, nil)
	handedOffDesc = prometheus.NewDesc("rpcd_connections_handed_off_total",
		"Connections moved off their event loop to a goroutine of their own: their peer did not take their output at once, half-closed with calls owed, or was sent a GoAway that ends it.", nil, nil)
	errorsDesc = prometheus.NewDesc("rpcd_errors_total",
		"Calls answered with an error, by code, on the RPC port and through the gateway: calls whose handler failed and calls refused before any handler ran (no such route, draining, a limit).",
		[]string{"code"}, nil)
	gatewayResponsesDesc = prometheus.NewDesc("rpcd_gateway_responses_total",
		"Responses of the HTTP gateway, by route (the registered route's name; unknown for a path that names none; jsonrpc; ws) and HTTP status.",
		[]string{"route", "status"}, nil)
	buildInfoDesc = prometheus.NewDesc("rpcd_build_info",
		"1, labelled with the rpcd module's version, the revision of its source and the Go release that built it, as rpcd version prints them.",
		[]string{"version", "revision", "go_version"}, nil)
	blockingDesc = prometheus.NewDesc("rpcd_blocking_calls",
		"Calls of Blocking routes queued for the goroutine pool or running on it now.", nil, nil)
	drainingDesc = prometheus.NewDesc("rpcd_draining",
		"1 once the server has begun to drain (it takes no new connection or call), else 0.", nil, nil)
	topicRefusedDesc = prometheus.NewDesc("rpcd_pubsub_refused_total",
		"Publishes and subscriptions the server's topic permissions refused, by kind (publish or subscribe) and prefix: the first token of the topic or pattern when a rule names it, * or > for a wildcard, else other.",
		[]string{"kind", "prefix"}, nil)
	overrunsDesc = prometheus.NewDesc("rpcd_inline_overruns_total",
		"Inline handler runs that held their event loop past the watchdog's threshold, by route.",
		[]string{"route"}, nil)
	movedDesc = prometheus.NewDesc("rpcd_inline_moved",
		"1 for a route that moved itself from the event loop to the blocking pool, its inline runs having kept passing their budget; 0 for a route that runs inline.",
		[]string{"route"}, nil)
	configGenerationDesc = prometheus.NewDesc("rpcd_config_generation",
		"The generation of the configuration the server runs: 1 for the one it started with, one more for each reload applied.", nil, nil)
	configLoadedDesc = prometheus.NewDesc("rpcd_config_last_load_timestamp_seconds",
		"When the configuration the server runs was loaded, in seconds since the Unix epoch.", nil, nil)
	configFailedDesc = prometheus.NewDesc("rpcd_config_reloads_failed_total",
		"Reloads refused for a mistake in the configuration, the running one kept.", nil, nil)
)

// ServerCollector returns Collector(srv, nil): a prometheus.Collector of
// srv's own counters, for a server without a gateway.
func ServerCollector(srv *reactor.Server) prometheus.Collector { return Collector(srv, nil) }

// Collector returns a prometheus.Collector of srv's own counters
// (reactor.Stats): connections, bytes, slow consumers, connections handed
// off their event loops, error replies by code, Blocking calls, draining,
// and the publishes and subscriptions its topic permissions refused; for
// every route that runs or ran inline (Server.Routes), its watchdog
// overruns and whether it moved to the blocking pool; with gw, the
// gateway's responses by route and status, and its calls answered with
// an error added to the server's error replies in rpcd_errors_total; and
// rpcd_build_info. New registers it, with the series of Options.Config;
// a program with a /metrics of its own can register it there.
func Collector(srv *reactor.Server, gw *gateway.Gateway) prometheus.Collector {
	return serverCollector{srv: srv, gw: gw, build: buildinfo.Read()}
}

type serverCollector struct {
	srv    *reactor.Server
	gw     *gateway.Gateway // nil without a gateway
	build  buildinfo.Info
	config func() ConfigStatus // Options.Config; nil without
}

// Describe implements prometheus.Collector.
func (c serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{connsDesc, connsOpenedDesc, connsRefusedDesc, bytesInDesc, bytesOutDesc, slowDesc, handedOffDesc, errorsDesc, blockingDesc, drainingDesc, topicRefusedDesc, overrunsDesc, movedDesc, buildInfoDesc} {
		ch <- d
	}
	if c.gw != nil {
		ch <- gatewayResponsesDesc
	}
	if c.config != nil {
		ch <- configGenerationDesc
		ch <- configLoadedDesc
		ch <- configFailedDesc
	}
}

// Collect implements prometheus.Collector. Error codes, refusals by kind
// and prefix, and the gateway's routes and statuses appear once they have
// been counted.
func (c serverCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.srv.Stats()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge(connsDesc, float64(st.Conns))
	counter(connsOpenedDesc, st.ConnsOpened)
	counter(connsRefusedDesc, st.ConnsRefused)
	counter(bytesInDesc, st.BytesIn)
	counter(bytesOutDesc, st.BytesOut)
	counter(slowDesc, st.SlowConsumers)
	counter(handedOffDesc, st.HandedOff)
	gauge(blockingDesc, float64(st.Blocking))
	draining := 0.0
	if st.Draining {
		draining = 1
	}
	gauge(drainingDesc, draining)
	errs := st.Errors
	if c.gw != nil {
		gs := c.gw.Stats()
		for slot, n := range gs.Errors {
			errs[slot] += n
		}
		for _, r := range gs.Responses {
			ch <- prometheus.MustNewConstMetric(gatewayResponsesDesc, prometheus.CounterValue, float64(r.Count), r.Route, strconv.Itoa(r.Status))
		}
	}
	for slot, n := range errs {
		if n > 0 {
			ch <- prometheus.MustNewConstMetric(errorsDesc, prometheus.CounterValue, float64(n), metrics.CodeName(slot))
		}
	}
	for r, n := range c.srv.PubSubStats().Refused {
		ch <- prometheus.MustNewConstMetric(topicRefusedDesc, prometheus.CounterValue, float64(n), r.Kind, r.Label)
	}
	for _, r := range inlineRoutes(c.srv) {
		moved := 0.0
		if r.Moved {
			moved = 1
		}
		ch <- prometheus.MustNewConstMetric(overrunsDesc, prometheus.CounterValue, float64(r.Overruns), r.Name)
		ch <- prometheus.MustNewConstMetric(movedDesc, prometheus.GaugeValue, moved, r.Name)
	}
	ch <- prometheus.MustNewConstMetric(buildInfoDesc, prometheus.GaugeValue, 1, c.build.Version, c.build.Revision, c.build.GoVersion)
	if c.config != nil {
		cs := c.config()
		gauge(configGenerationDesc, float64(cs.Generation))
		gauge(configLoadedDesc, float64(cs.Loaded.UnixNano())/1e9)
		counter(configFailedDesc, cs.Failed)
	}
}

// inlineRoutes returns the routes of srv that run inline or did: every
// call route but those registered with handler.Blocking. Routes are
// registered names, so their number is bounded.
func inlineRoutes(srv *reactor.Server) []handler.RouteInfo {
	var out []handler.RouteInfo
	for _, r := range srv.Routes() {
		if !r.Stream && (!r.Blocking || r.Moved) {
			out = append(out, r)
		}
	}
	return out
}
