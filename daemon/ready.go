package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// Ready asks the admin listener at addr whether its daemon is ready (GET
// /readyz), as a container's health check does (rpcd health): it returns
// the answer ("ready") if the listener says 200, else an error that says
// why (503 before the daemon serves and from the moment it drains). An
// unspecified host (none, 0.0.0.0, ::) is this machine's loopback, so that
// the admin setting of a container serves for its check too. An addr
// without a port is a ConfigError. A listener that serves HTTPS
// (admin-tls-cert) is asked over HTTPS (askAdmin); /readyz needs no
// authentication.
func Ready(ctx context.Context, addr string) (string, error) {
	status, answer, url, err := askAdmin(ctx, http.MethodGet, addr, "/readyz", 1024)
	if err != nil {
		if _, ok := err.(*ConfigError); ok {
			return "", err
		}
		return "", fmt.Errorf("rpcd: not ready: %v", err)
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("rpcd: not ready: %s answered %d %s: %s", url, status, http.StatusText(status), answer)
	}
	return answer, nil
}

// askAdmin sends a request without a body to path on the admin listener
// at addr and returns the status, the answer (at most limit bytes,
// trimmed) and the URL asked. It asks over HTTP, and again over HTTPS if
// the listener answers that it serves HTTPS (admin-tls-cert), without
// verifying its certificate: what Ready and RequestUpgrade send carries
// no secret, and they ask this machine (RequestUpgrade is refused from
// anywhere else). A listener that requires authentication answers 401 to
// all but its health probes.
func askAdmin(ctx context.Context, method, addr, path string, limit int64) (int, string, string, error) {
	url, err := adminURL(addr, path)
	if err != nil {
		return 0, "", url, err
	}
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	for {
		req, err := http.NewRequestWithContext(ctx, method, url, nil)
		if err != nil {
			return 0, "", url, configErrorf("%v", err)
		}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return 0, "", url, err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, limit))
		resp.Body.Close()
		answer := strings.TrimSpace(string(body))
		if resp.StatusCode == http.StatusBadRequest && strings.HasPrefix(url, "http:") && strings.Contains(answer, "HTTP request to an HTTPS server") {
			url = "https:" + strings.TrimPrefix(url, "http:")
			tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // see above
			continue
		}
		return resp.StatusCode, answer, url, nil
	}
}

// adminURL returns the URL of path on the admin listener at addr, whose
// unspecified host (none, 0.0.0.0, ::) is this machine's loopback; an addr
// without a port is a ConfigError.
func adminURL(addr, path string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", configErrorf("the admin address is %q, want host:port", addr)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}
