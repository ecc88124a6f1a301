package embedded

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
)

// durability is the store's adapters of the durability ports, over a
// fresh hand-off queue.
func durability(t *testing.T, s *Store) dispatchtest.Durability {
	t.Helper()
	if _, err := s.CreateQueue(context.Background(), localqueue.QueueConfig{Name: "handoff"}); err != nil {
		t.Fatal(err)
	}
	return dispatchtest.Durability{
		Archive: DispatchArchive{S: s},
		Handoff: Handoff{S: s, Queue: "handoff"},
		Archived: func(ctx context.Context, id string) (dispatch.Archived, bool, error) {
			e, ok, err := s.ArchiveGet(ctx, id)
			return dispatch.Archived{EventID: e.EventID, Source: e.Source, DetailType: e.DetailType, Detail: e.Detail, ReceivedAt: e.ReceivedAt,
				Verdict: dispatch.Verdict(e.Verdict), Reason: e.Reason, KeyVersion: e.KeyVersion}, ok, err
		},
	}
}

func TestDurabilityDurable(t *testing.T) {
	dispatchtest.TestDurability(t, func(t *testing.T) dispatchtest.Durability {
		return durability(t, openTest(t, Options{Path: filepath.Join(t.TempDir(), "snavio.db")}))
	})
}

func TestDurabilityEphemeral(t *testing.T) {
	dispatchtest.TestDurability(t, func(t *testing.T) dispatchtest.Durability {
		return durability(t, openTest(t, Options{Ephemeral: true}))
	})
}
