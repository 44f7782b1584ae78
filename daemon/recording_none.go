//go:build !rpcdrecord

package daemon

import (
	"errors"
	"net"
	"net/http"
)

// Without package record (until it is merged): no recording paths, and
// Config.Record refused.

type recording struct{}

func (d *Daemon) recordHandler(_ net.Addr, next http.Handler) http.Handler { return next }

func (d *Daemon) stopRecording() {}

func (d *Daemon) startConfigRecording(net.Addr) error {
	if d.cfg.Record != "" {
		return errors.New("rpcd: this build records nothing")
	}
	return nil
}

func (c *Config) checkRecord() error { return nil }
