//go:build race

package dashboard_test

// paintBound is TestBrowser's first-paint bound: the race detector slows
// the server's rendering several times.
const paintBound = 600.0
