package clock

import (
	"context"
	"time"
)

// Sleep waits for d on the wall clock, or until ctx ends (its error): the
// production value of the Sleep funcs that tests replace with one moving a
// Fake.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
