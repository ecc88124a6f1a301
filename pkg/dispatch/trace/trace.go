// Package trace records the decisions the dispatcher's real path takes on
// one command: each check of the shield, the fast stage and the slow
// stage, in order, with its result. The stages take an optional *Trace;
// a nil one records nothing and costs a nil check. With DryRun set the
// stages decide as they would but change nothing: no telemetry, no token
// or budget taken, no usage counted, no dedupe claim, no delivery
// (`snavio send --explain`, dispatch.Dispatcher.Explain).
package trace

import "time"

// Step results.
const (
	Pass     = "pass"
	Fail     = "fail"
	Skip     = "skip"     // not reached
	Escalate = "escalate" // handed to the slow stage
	Drop     = "drop"     // a duplicate
	Reject   = "reject"
	// Deferred: decided only by the store at delivery (a strict id's
	// claim, the window's budget), which a dry run does not touch.
	Deferred = "deferred"
)

// Stages.
const (
	Shield = "shield"
	Fast   = "fast"
	Slow   = "slow"
)

// Step is one check.
type Step struct {
	// Stage is shield, fast or slow.
	Stage  string `json:"stage"`
	Check  string `json:"check"`
	Result string `json:"result"`
	Detail string `json:"detail,omitempty"`
	// Cache is the state (fresh, stale, expired) of the cache the check
	// read, when it read one.
	Cache string `json:"cache,omitempty"`
}

// Trace is the record of one command's path.
type Trace struct {
	// DryRun: decide, change nothing.
	DryRun bool
	Steps  []Step
	// CommandID, Target and Command are set once the shield accepted the
	// command.
	CommandID, Target, Command string
	// RetryAfter and Until are the retry hints of a rate-limit refusal.
	RetryAfter time.Duration
	Until      time.Time
	// Err is a collaborator's failure: no decision could be made now.
	Err error
}

// Dry reports whether t is a dry run (false for a nil t).
func (t *Trace) Dry() bool { return t != nil && t.DryRun }

// Add records a step (nothing for a nil t).
func (t *Trace) Add(stage, check, result, detail string) {
	if t != nil {
		t.Steps = append(t.Steps, Step{Stage: stage, Check: check, Result: result, Detail: detail})
	}
}

// AddCache records a step that read a cache in state cache.
func (t *Trace) AddCache(stage, check, result, detail, cache string) {
	if t != nil {
		t.Steps = append(t.Steps, Step{Stage: stage, Check: check, Result: result, Detail: detail, Cache: cache})
	}
}
