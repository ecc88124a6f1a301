package awsstore

import "sync"

// bounded is a concurrent map of at most max entries: adding one to a full
// map drops an arbitrary other. It caches what can be looked up again
// (queue URLs, an outbox tenant's last sequence number), so a dropped
// entry costs one call, never correctness.
type bounded[V any] struct {
	max int
	mu  sync.RWMutex
	m   map[string]V
}

func newBounded[V any](max int) *bounded[V] { return &bounded[V]{max: max, m: map[string]V{}} }

func (c *bounded[V]) get(k string) (V, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *bounded[V]) put(k string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		for old := range c.m {
			delete(c.m, old)
			break
		}
	}
	c.m[k] = v
}

func (c *bounded[V]) drop(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}

func (c *bounded[V]) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
