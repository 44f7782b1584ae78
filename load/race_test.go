//go:build race

package load

// raceOn is whether the race detector is on: it adds to every goroutine's
// and object's memory, so memory bounds are not comparable.
const raceOn = true
