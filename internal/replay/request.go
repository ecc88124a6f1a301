package replay

import (
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
)

// BadRequest is a replay request refused as given: what is wrong, and the
// fix (hosts answer it as a bad request, the CLI exits 2).
type BadRequest struct{ Msg, Fix string }

func (e *BadRequest) Error() string { return e.Msg + ": " + e.Fix }

// Prepare validates a replay request as every host does and returns its
// origin and run options: an archive needs --start, has no failure
// reason, and ends at now at the latest (a replay never reads what it,
// or anything after it, put).
func Prepare(req wire.ReplayRequest, operator string, now time.Time, dedupeTTL time.Duration) (wire.ReplayOrigin, Options, error) {
	origin, err := wire.ParseReplayOrigin(req.From)
	if err != nil {
		return origin, Options{}, &BadRequest{err.Error(), "pass --from archive or --from dlq:QUEUE"}
	}
	mode, err := wire.ParseReplayDedupeMode(req.Dedupe)
	if err != nil {
		return origin, Options{}, &BadRequest{err.Error(), "pass --dedupe keep-id or --dedupe new-id"}
	}
	opts := Options{
		Filter: wire.ReplayFilter{Source: req.Source, Target: req.Target, Command: req.Command, Reason: req.FailureReason},
		Reason: req.Reason, Operator: operator, Dedupe: mode, DedupeTTL: dedupeTTL, Rate: req.Rate, Limit: req.Limit,
	}
	if !req.Start.IsZero() {
		opts.Filter.Start = req.Start.UTC()
	}
	if !req.End.IsZero() {
		opts.Filter.End = req.End.UTC()
	}
	if origin.IsArchive() {
		if opts.Filter.Start.IsZero() {
			return origin, Options{}, &BadRequest{"replaying the archive needs --start", "give the start of the range, such as --start 1h or --start 2026-11-21T12:00:00Z"}
		}
		if opts.Filter.Reason != "" {
			return origin, Options{}, &BadRequest{"--reason filters a DLQ by failure reason; archived events have none", "drop --reason, or replay --from dlq:QUEUE"}
		}
		if opts.Filter.End.IsZero() || opts.Filter.End.After(now) {
			opts.Filter.End = now
		}
	}
	if err := opts.Validate(); err != nil {
		return origin, Options{}, &BadRequest{err.Error(), "fix the flag named; see `snavio replay --help`"}
	}
	return origin, opts, nil
}
