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
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snavio/snavio/internal/atomicfile"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
)

// Status is a run's state.
type Status string

// Statuses.
const (
	StatusRunning     Status = "running"
	StatusInterrupted Status = "interrupted"
	StatusDone        Status = "done"
	StatusFailed      Status = "failed"
	// StatusPaused: the run stopped at its --limit; resume continues it.
	StatusPaused Status = "paused"
)

// Audit is the record of one replay: origin, reason, operator, filters,
// counts, start and end, and the progress a resume needs.
type Audit struct {
	ID       string     `json:"id"`
	Origin   string     `json:"origin"`
	Reason   string     `json:"reason"`
	Operator string     `json:"operator"`
	Filter   Filter     `json:"filter"`
	Dedupe   DedupeMode `json:"dedupe"`
	// DedupeTTLSeconds is the strict dedupe TTL keep-id holds commands
	// for.
	DedupeTTLSeconds int64   `json:"dedupe_ttl_seconds,omitzero"`
	Rate             float64 `json:"rate,omitzero"`

	Planned   int `json:"planned"`
	SentCount int `json:"sent"`
	Failed    int `json:"failed"`
	Skipped   int `json:"skipped"`
	// Held counts strict-mode commands keep-id held back (left in their
	// source) because their dedupe TTL had not ended; the last ends at
	// HeldUntil.
	Held      int       `json:"held,omitzero"`
	HeldUntil time.Time `json:"held_until,omitzero"`
	// Refused counts records the run refused to replay (Record.Refusal),
	// by reason in RefusedBy: never sent, never acknowledged. A resumed
	// run counts again what it reads again.
	Refused   int            `json:"refused,omitzero"`
	RefusedBy map[string]int `json:"refused_by_reason,omitempty"`

	Status    Status    `json:"status"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	Resumes   int       `json:"resumes,omitzero"`
	Error     string    `json:"error,omitempty"`
	LastError string    `json:"last_error,omitempty"`

	// ResumeAfter: records the interrupted run had received stay hidden
	// in their source until then; a resume waits for it.
	ResumeAfter time.Time `json:"resume_after,omitzero"`
	// Cursor is the source position after the last completed batch.
	Cursor string `json:"cursor,omitempty"`
	// Sent lists the original ids of the commands sent, so a resumed run
	// never sends one twice.
	Sent []string `json:"sent_ids,omitempty"`
}

// AuditStore keeps audits. Implementations must be safe for concurrent use.
type AuditStore interface {
	Create(ctx context.Context, a Audit) error
	Update(ctx context.Context, a Audit) error
	Get(ctx context.Context, id string) (Audit, error)
	// List returns all audits, newest first.
	List(ctx context.Context) ([]Audit, error)
}

// ErrNotFound is returned by Get for an unknown replay id.
var ErrNotFound = errors.New("no such replay")

// MemoryAudits keeps audits in memory.
type MemoryAudits struct {
	mu sync.Mutex
	m  map[string]Audit
}

// Create implements AuditStore.
func (s *MemoryAudits) Create(_ context.Context, a Audit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]Audit{}
	}
	if _, ok := s.m[a.ID]; ok {
		return fmt.Errorf("replay %s already exists", a.ID)
	}
	s.m[a.ID] = clone(a)
	return nil
}

// Update implements AuditStore.
func (s *MemoryAudits) Update(_ context.Context, a Audit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[a.ID]; !ok {
		return fmt.Errorf("replay %s: %w", a.ID, ErrNotFound)
	}
	s.m[a.ID] = clone(a)
	return nil
}

// Get implements AuditStore.
func (s *MemoryAudits) Get(_ context.Context, id string) (Audit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.m[id]
	if !ok {
		return Audit{}, fmt.Errorf("replay %s: %w: see `snavio replay list`", id, ErrNotFound)
	}
	return clone(a), nil
}

// List implements AuditStore.
func (s *MemoryAudits) List(context.Context) ([]Audit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Audit, 0, len(s.m))
	for _, a := range s.m {
		out = append(out, clone(a))
	}
	newestFirst(out)
	return out, nil
}

func clone(a Audit) Audit {
	a.Sent = append([]string(nil), a.Sent...)
	return a
}

func newestFirst(as []Audit) {
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
func (s *FileAudits) Create(ctx context.Context, a Audit) error {
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
func (s *FileAudits) Update(ctx context.Context, a Audit) error {
	p, err := s.path(a.ID)
	if err != nil {
		return err
	}
	if _, err := os.Stat(p); err != nil {
		return fmt.Errorf("replay %s: %w", a.ID, ErrNotFound)
	}
	return s.write(p, a)
}

func (s *FileAudits) write(p string, a Audit) error {
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
func (s *FileAudits) Get(_ context.Context, id string) (Audit, error) {
	p, err := s.path(id)
	if err != nil {
		return Audit{}, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return Audit{}, fmt.Errorf("replay %s: %w: see `snavio replay list`", id, ErrNotFound)
	}
	if err != nil {
		return Audit{}, err
	}
	var a Audit
	if err := jsonv2.Unmarshal(b, &a); err != nil {
		return Audit{}, fmt.Errorf("replay audit %s is corrupt: %w", p, err)
	}
	return a, nil
}

// List implements AuditStore.
func (s *FileAudits) List(ctx context.Context) ([]Audit, error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Audit
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
	newestFirst(out)
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
