package benchdata

import (
	"encoding/json"
	"testing"
)

func TestPayload1K(t *testing.T) {
	p := Payload1K()
	if len(p) != 1024 {
		t.Fatalf("%d bytes, want 1024", len(p))
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(p), &m); err != nil {
		t.Fatalf("not a JSON object of strings: %v", err)
	}
}
