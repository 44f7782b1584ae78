//go:build !unix && !windows

package cputime

import "time"

// Process returns 0: the system does not say.
func Process() time.Duration { return 0 }
