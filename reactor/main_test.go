package reactor_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/rpcd/rpcd/internal/leaktest"
)

func TestMain(m *testing.M) {
	// Panics and protocol errors are logged by design; the tests assert them.
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	leaktest.VerifyTestMain(m)
}
