//go:build unix

package daemon

import (
	"os"
	"syscall"
)

// upgradeSignal is the signal on which RunSignals upgrades, nginx's.
var upgradeSignal os.Signal = syscall.SIGUSR2
