//go:build !race

package dashboard_test

// paintBound is TestBrowser's first-paint bound (ms): the goal.
const paintBound = 200.0
