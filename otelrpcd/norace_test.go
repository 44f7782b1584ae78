//go:build !race

package otelrpcd_test

const raceEnabled = false
