//go:build race

package record

// raceEnabled: the race detector is on, and sync.Pool drops items at
// random, so allocation counts that rely on a pool do not hold.
const raceEnabled = true
