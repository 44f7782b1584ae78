package daemon

import (
	"context"
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
// without a port is a ConfigError.
func Ready(ctx context.Context, addr string) (string, error) {
	url, err := adminURL(addr, "/readyz")
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", configErrorf("%v", err)
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("rpcd: not ready: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	answer := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("rpcd: not ready: %s answered %s: %s", url, resp.Status, answer)
	}
	return answer, nil
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
