package awsstore

// WithBatch returns a copy of p that sends its batches with b: tests put
// an emulator without PublishBatch (kumo) behind it.
func (p *SNSPublisher) WithBatch(b PublishBatchAPI) *SNSPublisher {
	c := *p
	c.batch = b
	return &c
}
