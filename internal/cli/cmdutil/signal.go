package cmdutil

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// InterruptContext returns a context cancelled by SIGINT or SIGTERM, for
// commands that run until stopped (serve, tail, replay, send --wait) and
// must drain and exit cleanly. Call stop when done to restore the default
// signal behaviour.
func InterruptContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}
