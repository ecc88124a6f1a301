package wire

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ReplayOriginArchive is the --from value of the archive of accepted events.
const ReplayOriginArchive = "archive"

// dlqPrefix starts the --from value of a dead-letter queue.
const dlqPrefix = "dlq:"

// ReplayOrigin is where a replay reads: the archive, or one DLQ.
type ReplayOrigin struct {
	// Queue is the DLQ's name; empty for the archive.
	Queue string
}

// IsArchive reports whether o is the archive.
func (o ReplayOrigin) IsArchive() bool { return o.Queue == "" }

// String returns the --from spelling: "archive" or "dlq:<queue>".
func (o ReplayOrigin) String() string {
	if o.IsArchive() {
		return ReplayOriginArchive
	}
	return dlqPrefix + o.Queue
}

// ParseReplayOrigin parses a --from value: "archive" or "dlq:<queue>", the queue
// named as a local queue is (1-80 letters, digits, - and _).
func ParseReplayOrigin(s string) (ReplayOrigin, error) {
	if s == ReplayOriginArchive {
		return ReplayOrigin{}, nil
	}
	q, ok := strings.CutPrefix(s, dlqPrefix)
	if !ok {
		return ReplayOrigin{}, fmt.Errorf("unknown --from %.60q: use archive, or dlq:QUEUE for a dead-letter queue (snavio queue list shows them)", s)
	}
	if q == "" || len(q) > QueueMaxNameLen {
		return ReplayOrigin{}, fmt.Errorf("invalid --from %.60q: the queue name after dlq: must be 1 to %d characters", s, QueueMaxNameLen)
	}
	for _, r := range q {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return ReplayOrigin{}, fmt.Errorf("invalid --from %.60q: character %q is not allowed in a queue name: use letters, digits, - and _", s, r)
		}
	}
	return ReplayOrigin{Queue: q}, nil
}

// ParseReplayRate parses a --rate value: N/s, N/m (per minute) or N/h (per
// hour), N a positive decimal number; the result is commands per second,
// at most ReplayMaxRate.
func ParseReplayRate(s string) (float64, error) {
	num, unit, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("invalid --rate %.40q: give a count per unit, such as 50/s, 600/m or 1000/h", s)
	}
	var per float64
	switch unit {
	case "s", "sec", "second":
		per = 1
	case "m", "min", "minute":
		per = 60
	case "h", "hour":
		per = 3600
	default:
		return 0, fmt.Errorf("invalid --rate %.40q: unknown unit %.10q: use /s, /m or /h", s, unit)
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) || n <= 0 || strings.ContainsAny(num, "xXpP_") {
		return 0, fmt.Errorf("invalid --rate %.40q: the count must be a positive decimal number, such as 50/s", s)
	}
	r := n / per
	if r > ReplayMaxRate || r < 1.0/3600 {
		return 0, fmt.Errorf("invalid --rate %.40q: use between 1/h and %d/s", s, ReplayMaxRate)
	}
	return r, nil
}

// maxAgo bounds relative times: ten years.
const maxAgo = 10 * 365 * 24 * time.Hour

// ParseReplayTime parses a --start or --end value: an RFC 3339 time
// (2026-11-21T12:00:00Z), or a duration meaning that long before now
// (90m, 2h, 3d). flag names the flag in errors.
func ParseReplayTime(flag, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		if t.Year() < 2000 || t.After(now.Add(24*time.Hour)) {
			return time.Time{}, fmt.Errorf("invalid --%s %.40q: the time is out of range: use a time after 2000 and not in the future", flag, s)
		}
		return t.UTC(), nil
	}
	d, err := parseAgo(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid --%s %.40q: use an RFC 3339 time such as 2026-11-21T12:00:00Z, or how long ago, such as 90m, 2h or 3d", flag, s)
	}
	return now.Add(-d).UTC(), nil
}

// parseAgo parses a positive duration with Go's units plus d (days).
func parseAgo(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 || n > int(maxAgo/(24*time.Hour)) {
			return 0, fmt.Errorf("bad day count")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d <= 0 || d > maxAgo {
		return 0, fmt.Errorf("duration out of range")
	}
	return d, nil
}

// ParseReplayRange parses --start and --end and checks start is before end.
func ParseReplayRange(start, end string, now time.Time) (time.Time, time.Time, error) {
	s, err := ParseReplayTime("start", start, now)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	e, err := ParseReplayTime("end", end, now)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	f := ReplayFilter{Start: s, End: e}
	if err := f.Validate(); err != nil {
		return time.Time{}, time.Time{}, err
	}
	return s, e, nil
}
