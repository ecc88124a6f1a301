package wire

import (
	"fmt"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/envelope"
)

// ReplayStatus is a replay run's state.
type ReplayStatus string

// Replay statuses.
const (
	ReplayRunning     ReplayStatus = "running"
	ReplayInterrupted ReplayStatus = "interrupted"
	ReplayDone        ReplayStatus = "done"
	ReplayFailed      ReplayStatus = "failed"
	// ReplayPaused: the run stopped at its --limit; resume continues it.
	ReplayPaused ReplayStatus = "paused"
)

// ReplayAudit is the record of one replay: origin, reason, operator,
// filters, counts, start and end, and the progress a resume needs.
type ReplayAudit struct {
	ID       string           `json:"id"`
	Origin   string           `json:"origin"`
	Reason   string           `json:"reason"`
	Operator string           `json:"operator"`
	Filter   ReplayFilter     `json:"filter"`
	Dedupe   ReplayDedupeMode `json:"dedupe"`
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
	// Refused counts records the run refused to replay, by reason in
	// RefusedBy: never sent, never acknowledged. A resumed run counts
	// again what it reads again.
	Refused   int            `json:"refused,omitzero"`
	RefusedBy map[string]int `json:"refused_by_reason,omitempty"`

	Status    ReplayStatus `json:"status"`
	StartedAt time.Time    `json:"started_at"`
	EndedAt   time.Time    `json:"ended_at,omitzero"`
	Resumes   int          `json:"resumes,omitzero"`
	Error     string       `json:"error,omitempty"`
	LastError string       `json:"last_error,omitempty"`

	// ResumeAfter: records the interrupted run had received stay hidden
	// in their source until then; a resume waits for it.
	ResumeAfter time.Time `json:"resume_after,omitzero"`
	// Cursor is the source position after the last completed batch.
	Cursor string `json:"cursor,omitempty"`
	// Sent lists the original ids of the commands sent, so a resumed run
	// never sends one twice.
	Sent []string `json:"sent_ids,omitempty"`
}

// ReplayFilter selects records. Empty fields match everything.
type ReplayFilter struct {
	Source  string    `json:"source,omitempty"`
	Target  string    `json:"target,omitempty"`
	Command string    `json:"command,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	Start   time.Time `json:"start,omitzero"`
	End     time.Time `json:"end,omitzero"`
}

// Validate checks the filter.
func (f ReplayFilter) Validate() error {
	if !f.Start.IsZero() && !f.End.IsZero() && !f.Start.Before(f.End) {
		return fmt.Errorf("bad time range: --start %s is not before --end %s: give a start earlier than the end", f.Start.Format(time.RFC3339), f.End.Format(time.RFC3339))
	}
	if f.Source != "" && !envelope.ValidSource(f.Source) {
		return fmt.Errorf("invalid --source %q: use <tenant>/<service>, such as acme/billing", f.Source)
	}
	if f.Target != "" && !envelope.ValidTarget(f.Target) {
		return fmt.Errorf("invalid --target %q: use 1-64 characters of a-z 0-9 . _ -", f.Target)
	}
	if f.Command != "" && !envelope.ValidName(f.Command) {
		return fmt.Errorf("invalid --command %q: use 1-128 characters of A-Z a-z 0-9 . _ : -", f.Command)
	}
	if len(f.Reason) > 128 {
		return fmt.Errorf("invalid --reason %.20q...: a failure reason is at most 128 characters", f.Reason)
	}
	return nil
}

// ReplayDedupeMode is the operator's choice for strict-mode routes.
type ReplayDedupeMode string

// Dedupe modes.
const (
	// DedupeKeepID keeps ids; strict-route commands still inside their
	// dedupe TTL are held back (left in their source) until it ends.
	DedupeKeepID ReplayDedupeMode = "keep-id"
	// DedupeNewID gives replayed commands new ids: they run again even
	// inside the TTL.
	DedupeNewID ReplayDedupeMode = "new-id"
)

// ParseReplayDedupeMode validates a --dedupe value ("" is keep-id).
func ParseReplayDedupeMode(s string) (ReplayDedupeMode, error) {
	switch m := ReplayDedupeMode(s); m {
	case "":
		return DedupeKeepID, nil
	case DedupeKeepID, DedupeNewID:
		return m, nil
	}
	return "", fmt.Errorf("invalid --dedupe %q: use keep-id (hold strict-mode commands until their dedupe TTL ends) or new-id (run them again now under new ids)", s)
}

// ReplayMaxRate is the highest --rate, commands per second.
const ReplayMaxRate = 10_000

// ReplayPlan is what a run would do (--dry-run): it changes nothing.
type ReplayPlan struct {
	Origin  string         `json:"origin"`
	Total   int            `json:"total"`
	ByRoute map[string]int `json:"by_route"`
	FirstID string         `json:"first_id,omitempty"`
	LastID  string         `json:"last_id,omitempty"`
	// First and Last bound the records' times.
	First time.Time `json:"first_at,omitzero"`
	Last  time.Time `json:"last_at,omitzero"`
	// Held counts strict-mode commands inside their dedupe TTL that
	// keep-id would hold back, until HeldUntil.
	Held      int       `json:"held"`
	HeldUntil time.Time `json:"held_until,omitzero"`
	// Repeats counts records whose command id was already counted (a
	// keep-id replay's own copy in the archive, an at-least-once
	// duplicate in a DLQ): a run sends each id once.
	Repeats int `json:"repeated_ids"`
	Skipped int `json:"skipped_unreadable"`
	// Refused counts records that must never be replayed, by reason in
	// RefusedBy: a run never sends them.
	Refused   int            `json:"refused"`
	RefusedBy map[string]int `json:"refused_by_reason"`
	Warnings  []string       `json:"warnings"`
}

// ReplayRequest starts a replay (and plans one).
type ReplayRequest struct {
	// From is "archive" or "dlq:<queue>".
	From string `json:"from"`
	// Start and End bound when commands were received (archive) or first
	// queued (DLQ). The archive needs Start; its End defaults to now.
	Start time.Time `json:"start,omitzero"`
	End   time.Time `json:"end,omitzero"`
	// Source, Target and Command filter; FailureReason filters a DLQ by
	// the reason its messages carry.
	Source        string `json:"source,omitempty"`
	Target        string `json:"target,omitempty"`
	Command       string `json:"command,omitempty"`
	FailureReason string `json:"failure_reason,omitempty"`
	// Reason is why: audited, and carried as replay_reason.
	Reason string `json:"reason"`
	// Dedupe is keep-id (default) or new-id.
	Dedupe string `json:"dedupe,omitempty"`
	// Rate is commands per second (0: no limit).
	Rate float64 `json:"rate,omitzero"`
	// Limit stops the run after that many commands (paused, resumable).
	Limit int `json:"limit,omitzero"`
}

// ReplayResumeRequest resumes a replay.
type ReplayResumeRequest struct {
	Limit int `json:"limit,omitzero"`
}

// ReplayUpdate is one line of a run's NDJSON answer: "started" once the
// audit is recorded, "progress" after each batch, "finished" last (with
// the error that ended the run, if any).
type ReplayUpdate struct {
	Event  string      `json:"event"`
	Replay ReplayAudit `json:"replay"`
	Error  string      `json:"error,omitempty"`
}

// ReplayUpdate events.
const (
	ReplayEventStarted  = "started"
	ReplayEventProgress = "progress"
	ReplayEventFinished = "finished"
)

// ReplayPlanResponse is the answer of POST /v1/replays/plan.
type ReplayPlanResponse struct {
	Plan ReplayPlan `json:"plan"`
	// End is the end of the archive range the run would use.
	End time.Time `json:"end,omitzero"`
}

// ReplayList is the answer of GET /v1/replays.
type ReplayList struct {
	Replays []ReplayAudit `json:"replays"`
}
