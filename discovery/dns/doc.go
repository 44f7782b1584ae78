// Package dns finds an rpcd service's nodes in DNS and follows them, for
// client.DialService: the A and AAAA records of a name, all on one port,
// or the SRV records of a name, each with its own port and weight. It is
// how a Kubernetes headless service, a Consul or CoreDNS domain, or any
// zone an operator keeps lists a service's servers. Importing the package
// registers the "dns" scheme with client.RegisterScheme:
//
//	client.DialService(ctx, "dns:///echo.prod.svc.cluster.local:7070", opts)  // A/AAAA, port 7070
//	client.DialService(ctx, "dns:///_rpcd._tcp.echo.example.com", opts)     // SRV
//	client.DialService(ctx, "dns://10.0.0.2:53/echo.internal:7070", opts)  // asking that server
//	client.DialService(ctx, "dns:///echo.internal:7070?refresh=5s", opts)  // looked up every 5 s
//
// A target's authority, when not empty, is the DNS server to ask instead of
// the system's resolver. Names are looked up again every Config.Refresh
// (30 s by default), or as often as a target's "?refresh=" says; a lookup that fails, or finds no record, keeps the
// last set, as client.Resolver asks. DNS does not say when a server
// stops: a Cluster's breaker sets aside a node that keeps failing until
// the next lookup drops it (docs/scale-out.md).
package dns
