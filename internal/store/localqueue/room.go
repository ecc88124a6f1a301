package localqueue

// QueueRoom says how many more messages queue takes before a send to it
// fails with ErrQueueFull: the dispatcher admits no more of a route's
// commands to its slow stage than the route's queue has room for.
func (qs *Queues) QueueRoom(queue string) (int, error) {
	q, err := qs.lockQueue(queue, "")
	if err != nil {
		return 0, err
	}
	defer qs.mu.Unlock()
	return max(0, q.q.MaxDepth-(q.depth()+q.reserved)), nil
}
