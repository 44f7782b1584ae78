package record

import (
	"testing"

	"github.com/rpcd/rpcd/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }
