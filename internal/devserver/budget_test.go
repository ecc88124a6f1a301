package devserver

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/pkg/dispatch/shield"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// TestInvalidFloodIsBudgeted: the attack run put 150 forged entries as one
// source and got 150 snavio.command.invalid events (and as many alerts)
// into the tenant's stream, and 150 archived events. Past the source's
// invalid budget the entries are still acknowledged, but get no event of
// their own and are not archived.
func TestInvalidFloodIsBudgeted(t *testing.T) {
	dir := t.TempDir()
	s := startDemo(t, dir, true)
	defer s.Shutdown(context.Background())
	k := demoKeyFrom(t, dir)
	const flood = shield.DefaultInvalidBudget + 50
	for i := range flood {
		bad := signed(t, k, fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", i), DemoTarget, DemoCommand, `{"n":1}`)
		bad = bytes.Replace(bad, []byte(`"n":1`), []byte(`"n":2`), 1)
		if out := putEvent(t, dir, s.Info().URL, DemoSource, bad); out["FailedEntryCount"].(float64) != 0 {
			t.Fatalf("entry %d refused: %v", i, out)
		}
	}
	invalid := 0
	for _, n := range names(t, s, "demo") {
		if n == telemetry.NameInvalid {
			invalid++
		}
	}
	if invalid != shield.DefaultInvalidBudget {
		t.Fatalf("%d invalid events for %d forged entries, want the budget, %d", invalid, flood, shield.DefaultInvalidBudget)
	}
	got, _, err := s.store.ArchiveQuery(context.Background(), embedded.ArchiveQuery{From: time.Now().Add(-time.Hour), Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	// At most the budget: whether invalid entries within it are archived
	// (with the shield's verdict) is the archive's decision.
	if len(got) > shield.DefaultInvalidBudget {
		t.Fatalf("%d archived events, want at most %d", len(got), shield.DefaultInvalidBudget)
	}
}
