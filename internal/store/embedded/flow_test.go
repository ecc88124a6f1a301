package embedded

import (
	"path/filepath"
	"testing"

	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/flow"
)

func openTest(t *testing.T, opts Options) *Store {
	t.Helper()
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func TestFlowStoreDurable(t *testing.T) {
	dispatchtest.TestFlowStore(t, func(t *testing.T) flow.Store {
		return openTest(t, Options{Path: filepath.Join(t.TempDir(), "snavio.db")})
	})
}

func TestFlowStoreEphemeral(t *testing.T) {
	dispatchtest.TestFlowStore(t, func(t *testing.T) flow.Store {
		return openTest(t, Options{Ephemeral: true})
	})
}
