package wire

import (
	"fmt"
	"time"

	"github.com/google/uuid"
)

// The replayer endpoints (/v1/replayer/...) serve a replay that the CLI
// runs on an aws profile (docs/replay.md, "On AWS"): the audits in the
// flow table, claimed by the replayer running each, and the verification
// and re-signing that need the tenants' keys, which stay in the control
// function.

// MaxReplayClaimSeconds bounds a claim: a replayer renews it with every
// write.
const MaxReplayClaimSeconds = 3600

// MaxReplaySignRecords bounds the records of one sign or verify request:
// a PutEvents batch.
const MaxReplaySignRecords = 10

// ReplayClaim is a replayer's hold on a running audit: its id (a UUID the
// replayer draws once) and how long the hold lasts past each write. No
// other replayer can resume or write the audit meanwhile.
type ReplayClaim struct {
	Runner       string `json:"runner"`
	ClaimSeconds int64  `json:"claim_seconds"`
}

// For is how long the claim lasts past a write.
func (c ReplayClaim) For() time.Duration { return time.Duration(c.ClaimSeconds) * time.Second }

// Validate checks c.
func (c ReplayClaim) Validate() error {
	if _, err := uuid.Parse(c.Runner); err != nil || len(c.Runner) != 36 {
		return fmt.Errorf("invalid replayer id %.60q: use a UUID", c.Runner)
	}
	if c.ClaimSeconds < 1 || c.ClaimSeconds > MaxReplayClaimSeconds {
		return fmt.Errorf("invalid claim_seconds %d: give 1 to %d", c.ClaimSeconds, MaxReplayClaimSeconds)
	}
	return nil
}

// ReplayAuditWrite records an audit (POST /v1/replayer/audits creates it,
// PUT /v1/replayer/audits/{id} records a progress) and renews the claim.
// Audit.Sent holds the sent ids from number SentFrom on (a multiple of
// 1,000, the ids one stored chunk holds): a write carries the chunk it
// changes, not every id the run sent.
type ReplayAuditWrite struct {
	ReplayClaim
	SentFrom int         `json:"sent_from,omitzero"`
	Audit    ReplayAudit `json:"audit"`
}

// ReplayRecord is a record the replayer read, as the control function
// verifies and re-signs it.
type ReplayRecord struct {
	// Source is the bus source (archive) or the message's source attribute
	// (DLQ).
	Source     string    `json:"source,omitempty"`
	DetailType string    `json:"detail_type,omitempty"`
	Detail     string    `json:"detail"`
	ReceivedAt time.Time `json:"received_at,omitzero"`
	// Attributes are a DLQ message's attributes: its delivery signature.
	Attributes map[string]string `json:"attributes,omitempty"`
}

// ReplayVerifyRequest asks for the refusals of archived events
// (POST /v1/replayer/archive/verify).
type ReplayVerifyRequest struct {
	Records []ReplayRecord `json:"records"`
}

// ReplayVerifyResponse holds, per record in order, why it must never be
// replayed ("" when it may be).
type ReplayVerifyResponse struct {
	Refusals []string `json:"refusals"`
}

// ReplaySignRequest asks for the re-signed entries of a batch of replay
// ReplayID (POST /v1/replayer/sign), which Runner holds. QueueARN is the
// DLQ's ARN when the replay reads a DLQ.
type ReplaySignRequest struct {
	ReplayID string         `json:"replay_id"`
	Runner   string         `json:"runner"`
	QueueARN string         `json:"queue_arn,omitempty"`
	Records  []ReplayRecord `json:"records"`
}

// ReplaySigned is one record's entry to put on the bus, or its refusal.
type ReplaySigned struct {
	Source     string `json:"source,omitempty"`
	DetailType string `json:"detail_type,omitempty"`
	Detail     string `json:"detail,omitempty"`
	Refusal    string `json:"refusal,omitempty"`
}

// ReplaySignResponse holds one result per record, in order.
type ReplaySignResponse struct {
	Results []ReplaySigned `json:"results"`
}
