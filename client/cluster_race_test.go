//go:build race

package client_test

// raceOn is whether the race detector is on: sync.Pool drops items at
// random under it, so allocation counts are not comparable.
const raceOn = true
