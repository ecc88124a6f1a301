package registry_test

import (
	"errors"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// FuzzValidate decodes arbitrary registry data and validates it: Validate
// must never panic, must return nil or a *ValidationError, must be
// deterministic, and data it accepts must still be accepted after a JSON
// round trip (what registration accepts, a snapshot of it must load).
func FuzzValidate(f *testing.F) {
	f.Add([]byte(`{"routes":[{"target":"billing","command":"charge","queue_arn":"arn:aws:sqs:eu-west-1:123456789012:q","dlq_arn":"arn:aws:sqs:eu-west-1:123456789012:d"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d registry.Data
		if json.Unmarshal(b, &d) != nil {
			return
		}
		err := registry.Validate(&d)
		var ve *registry.ValidationError
		if err != nil && (!errors.As(err, &ve) || !errors.Is(err, registry.ErrInvalid) || len(ve.Problems) == 0 || len(ve.Problems) > registry.MaxProblems) {
			t.Fatalf("Validate returned %T %v", err, err)
		}
		if again := registry.Validate(&d); (again == nil) != (err == nil) {
			t.Fatalf("Validate is not deterministic: %v then %v", err, again)
		}
		if err != nil {
			return
		}
		out, merr := json.Marshal(&d)
		if merr != nil {
			t.Fatalf("marshal valid data: %v", merr)
		}
		var back registry.Data
		if uerr := json.Unmarshal(out, &back); uerr != nil {
			t.Fatalf("unmarshal own output: %v", uerr)
		}
		if verr := registry.Validate(&back); verr != nil {
			t.Fatalf("valid data invalid after a round trip: %v\n%s", verr, out)
		}
	})
}
