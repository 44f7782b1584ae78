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
//	h := admin.New(srv, admin.Options{Metrics: m})
//	go http.Serve(adminListener, h)
//
// Its paths:
//
//	/             the live page: one HTML file, no outside resources, that
//	              reads /stats.json every second
//	/stats.json   the figures the page shows (see Stats)
//	/metrics      Prometheus text format: the server's counters, the
//	              gateway's (Options.Gateway) and rpcd_build_info
//	              (Collector), the routes' (metrics.Metrics), and the Go
//	              runtime's and the process's collectors
//	/healthz      200 while the process serves HTTP at all
//	/readyz       200 while the server accepts connections; 503 once it
//	              drains, so that a load balancer stops sending to it
//	/debug/pprof/ net/http/pprof's handlers, mounted on this mux
//
// Rates and percentiles on the page are computed here, not in the browser:
// each /stats.json request reads the counters and compares them with a
// sample taken earlier (the newest at least a second old for rates, ten
// seconds for percentiles). Samples are taken only when the page asks, at
// most two a second, and kept for about ten seconds; nothing runs in the
// background.
//
// Importing net/http/pprof also registers its handlers on
// http.DefaultServeMux, as a side effect of that package; rpcd never serves
// that mux, and a program embedding rpcd should not serve it on a public
// address either.
package admin
