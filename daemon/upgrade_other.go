//go:build !unix

package daemon

import "os"

// upgradeSignal is nil: there is no SIGUSR2, and no upgrade (tableflip
// needs Unix).
var upgradeSignal os.Signal
