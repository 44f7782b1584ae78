// Package admin is the HTTP side of a running rpcd server, for the people
// and tools that operate it: Prometheus metrics, pprof, health and
// readiness checks, and a live page. It serves on a listener of its own
// (rpcd serve -admin 127.0.0.1:7071), never on the RPC port, and never
// through http.DefaultServeMux.
//
//	m := metrics.New()
//	reg.Use(m.Middleware())                     // count calls by route
//	srv := reactor.New(reg, reactor.Options{})
//	srv.Start("127.0.0.1:7070")
//	h := admin.New(srv, admin.Options{Metrics: m, Gateway: gw}) // gw: a gateway.Gateway, or nil
//	defer h.Close()                             // stops its sampling
//	go http.Serve(adminListener, h)
//
// Its paths:
//
//	/              the live page: one HTML file and uPlot (admin/uplot),
//	               no outside resources, that reads /stats.json and
//	               /history.json every second
//	/stats.json    the figures of the page's tiles and tables (see Stats)
//	/history.json  the charts' history: what happened between each sample
//	               and the one before (see History)
//	/uplot/        uPlot's script, style sheet and licence
//	/metrics       Prometheus text format: the server's counters, the
//	               gateway's, and rpcd_build_info (Collector), the
//	               configuration's generation (Options.Config), the
//	               routes' (metrics.Metrics), and the Go runtime's and the
//	               process's collectors
//	/healthz       200 while the process serves HTTP at all
//	/readyz        200 while the server accepts connections; 503 once it
//	               drains, so that a load balancer stops sending to it
//	/debug/pprof/  net/http/pprof's handlers, mounted on this mux
//
// Require puts a handler behind the listener's authentication (Auth): a
// bearer token, a verified client certificate (mutual TLS), or either;
// every path but the health probes (OpenPaths) then answers 401 without
// it. rpcd serve puts every admin path behind it, /upgrade and the
// recording paths of package daemon among them.
//
// The figures on the page are computed here, not in the browser. From New
// until Close, a goroutine reads the counters every Options.SampleInterval
// (a second) and keeps what happened between each reading and the one
// before for Options.History (ten minutes), so that a page opened now
// shows the last ten minutes; any number of pages share them. Each
// /stats.json request reads the counters again and compares them with a
// kept reading: the newest at least one interval old for rates, ten for
// percentiles, so that a first reading after a quiet spell covers the
// last interval, not the time since the process started.
//
// Importing net/http/pprof also registers its handlers on
// http.DefaultServeMux, as a side effect of that package; rpcd never serves
// that mux, and a program embedding rpcd should not serve it on a public
// address either.
package admin
