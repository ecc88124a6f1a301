package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Run under -race: concurrent writes and reads must not race, and every
// write is kept whole.
func TestConcurrentWritesAndReads(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte("ab\n"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := strings.Count(b.String(), "ab\n"); got != 800 {
		t.Fatalf("%d whole writes, want 800", got)
	}
}
