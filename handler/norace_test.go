//go:build !race

package handler

const raceEnabled = false
