//go:build !race

package devserver

const raceEnabled = false
