package controlapi

import (
	"encoding/json"
	"testing"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
)

// FuzzCreateRequest: whatever JSON body a client sends, Validate never
// panics, and every configuration it accepts is one the store accepts.
func FuzzCreateRequest(f *testing.F) {
	for _, s := range []string{
		`{"name":"orders"}`,
		`{"name":"orders","dlq":"orders-dlq","max_receives":3,"visibility_timeout_seconds":60,"max_depth":10}`,
		`{"name":"orders.fifo"}`,
		`{"name":"a b","max_receives":-1}`,
		`{"name":"q","dlq":"q","max_receives":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req wire.QueueCreateRequest
		if json.Unmarshal(b, &req) != nil {
			return
		}
		cfg, err := storeConfig(req)
		if err != nil {
			return
		}
		st, err := embedded.Open(embedded.Options{Ephemeral: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if cfg.DeadLetterQueue != "" {
			if _, err := st.CreateQueue(t.Context(), localqueue.QueueConfig{Name: cfg.DeadLetterQueue}); err != nil {
				t.Fatalf("the store refused the DLQ %q that Validate accepted: %v", cfg.DeadLetterQueue, err)
			}
		}
		if _, err := st.CreateQueue(t.Context(), cfg); err != nil {
			t.Fatalf("the store refused %+v that Validate accepted: %v", cfg, err)
		}
	})
}
