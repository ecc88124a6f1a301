package replay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snavio/snavio/internal/atomicfile"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
)

// AuditStore keeps audits. Implementations must be safe for concurrent use.
type AuditStore interface {
	Create(ctx context.Context, a wire.ReplayAudit) error
	Update(ctx context.Context, a wire.ReplayAudit) error
	Get(ctx context.Context, id string) (wire.ReplayAudit, error)
	// List returns all audits, newest first.
	List(ctx context.Context) ([]wire.ReplayAudit, error)
}

// ErrNotFound is returned by Get for an unknown replay id.
var ErrNotFound = errors.New("no such replay")

// ErrNotClaimed: a replayer acts on an audit it does not hold (never
// claimed, or its claim ran out).
var ErrNotClaimed = errors.New("the replayer does not hold this replay's claim")

// MemoryAudits keeps audits in memory.
type MemoryAudits struct {
	mu sync.Mutex
	m  map[string]wire.ReplayAudit
}

// Create implements AuditStore.
func (s *MemoryAudits) Create(_ context.Context, a wire.ReplayAudit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]wire.ReplayAudit{}
	}
	if _, ok := s.m[a.ID]; ok {
		return fmt.Errorf("replay %s already exists", a.ID)
	}
	s.m[a.ID] = clone(a)
	return nil
}

// Update implements AuditStore.
func (s *MemoryAudits) Update(_ context.Context, a wire.ReplayAudit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[a.ID]; !ok {
		return fmt.Errorf("replay %s: %w", a.ID, ErrNotFound)
	}
	s.m[a.ID] = clone(a)
	return nil
}

// Get implements AuditStore.
func (s *MemoryAudits) Get(_ context.Context, id string) (wire.ReplayAudit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.m[id]
	if !ok {
		return wire.ReplayAudit{}, fmt.Errorf("replay %s: %w: see `snavio replay list`", id, ErrNotFound)
	}
	return clone(a), nil
}

// List implements AuditStore.
func (s *MemoryAudits) List(context.Context) ([]wire.ReplayAudit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]wire.ReplayAudit, 0, len(s.m))
	for _, a := range s.m {
		out = append(out, clone(a))
	}
	NewestFirst(out)
	return out, nil
}

// Shown is an audit as the APIs show it: without the sent ids and the
// cursor (a resume reads them from the store).
func Shown(a wire.ReplayAudit) wire.ReplayAudit {
	a.Sent, a.Cursor = nil, ""
	return a
}

func clone(a wire.ReplayAudit) wire.ReplayAudit {
	a.Sent = append([]string(nil), a.Sent...)
	return a
}

// NewestFirst sorts audits newest first (ties by id).
func NewestFirst(as []wire.ReplayAudit) {
	sort.Slice(as, func(i, j int) bool {
		if !as[i].StartedAt.Equal(as[j].StartedAt) {
			return as[i].StartedAt.After(as[j].StartedAt)
		}
		return as[i].ID < as[j].ID
	})
}

// FileAudits keeps one JSON file per audit in Dir, written atomically with
// mode 0600, so audits survive a crash of the replaying process.
type FileAudits struct {
	Dir string
	mu  sync.Mutex
}

func (s *FileAudits) path(id string) (string, error) {
	if id == "" || strings.ContainsAny(id, `/\.`) {
		return "", fmt.Errorf("invalid replay id %q", id)
	}
	return filepath.Join(s.Dir, id+".json"), nil
}

// Create implements AuditStore.
func (s *FileAudits) Create(ctx context.Context, a wire.ReplayAudit) error {
	p, err := s.path(a.ID)
	if err != nil {
		return err
	}
	if _, err := os.Stat(p); err == nil {
		return fmt.Errorf("replay %s already exists", a.ID)
	}
	return s.write(p, a)
}

// Update implements AuditStore.
func (s *FileAudits) Update(ctx context.Context, a wire.ReplayAudit) error {
	p, err := s.path(a.ID)
	if err != nil {
		return err
	}
	if _, err := os.Stat(p); err != nil {
		return fmt.Errorf("replay %s: %w", a.ID, ErrNotFound)
	}
	return s.write(p, a)
}

func (s *FileAudits) write(p string, a wire.ReplayAudit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := jsonv2.Marshal(a)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("create the replay audit directory %s: %w", s.Dir, err)
	}
	return atomicfile.Write(p, b, 0o600)
}

// Get implements AuditStore.
func (s *FileAudits) Get(_ context.Context, id string) (wire.ReplayAudit, error) {
	p, err := s.path(id)
	if err != nil {
		return wire.ReplayAudit{}, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return wire.ReplayAudit{}, fmt.Errorf("replay %s: %w: see `snavio replay list`", id, ErrNotFound)
	}
	if err != nil {
		return wire.ReplayAudit{}, err
	}
	var a wire.ReplayAudit
	if err := jsonv2.Unmarshal(b, &a); err != nil {
		return wire.ReplayAudit{}, fmt.Errorf("replay audit %s is corrupt: %w", p, err)
	}
	return a, nil
}

// List implements AuditStore.
func (s *FileAudits) List(ctx context.Context) ([]wire.ReplayAudit, error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []wire.ReplayAudit
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		a, err := s.Get(ctx, strings.TrimSuffix(name, ".json"))
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	NewestFirst(out)
	return out, nil
}

// unmarshalDelivered reads a body as the dispatcher delivered it (with
// command.source): a trusted format, read without the producer rules.
func unmarshalDelivered(b []byte, env *envelope.Envelope) error {
	if err := jsonv2.Unmarshal(b, env); err != nil {
		return err
	}
	if env.Metadata.ID == "" || env.Command.Target == "" || env.Command.Name == "" || len(env.Command.Payload) == 0 {
		return errors.New("not a command envelope")
	}
	return nil
}

// ErrRunning is returned for a replay another run holds.
var ErrRunning = errors.New("the replay is running elsewhere: wait for it, or stop the replayer running it and resume")
