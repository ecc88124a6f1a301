//go:build race

package devserver

const raceEnabled = true
