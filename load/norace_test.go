//go:build !race

package load

const raceOn = false
