package tailcmd

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	tuitail "github.com/snavio/snavio/internal/tui/tail"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// eventNames are the catalog's event names (docs/security/telemetry.md).
var eventNames = []string{
	telemetry.NameDelivered, telemetry.NameInvalid, telemetry.NameFailed, telemetry.NameDuplicate,
	telemetry.NameExecutedAfterACLRevoked, telemetry.NameWarmPathBan, telemetry.NameAbuseDetected,
	telemetry.NameLegacyKeyUsed, telemetry.NameKeyExpiryImminent, telemetry.NameSkewNearLimit,
	telemetry.NameSkewSample, telemetry.NameDropped,
}

// typeNames lists what --type accepts: the kinds, then the event names.
func typeNames() []string {
	var out []string
	for _, k := range tuitail.Kinds() {
		if k != tuitail.KindOther {
			out = append(out, string(k))
		}
	}
	return append(out, eventNames...)
}

// ParseSince reads --since: a positive duration before now ("10m", "2h")
// or an RFC 3339 time. Empty is no start time.
func ParseSince(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("invalid --since %q: the duration must be positive (how far back to start), such as 10m", s)
		}
		t := now.Add(-d)
		if t.After(now) || t.Year() < 1 {
			return time.Time{}, fmt.Errorf("invalid --since %q: too far back; give a time such as 2026-11-21T12:00:00Z", s)
		}
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() < 1 || t.Year() > 9999 {
		return time.Time{}, fmt.Errorf("invalid --since %q: give a duration such as 10m or 2h, or an RFC 3339 time such as 2026-11-21T12:00:00Z", s)
	}
	return t, nil
}

// Filters are the filter flags; within a flag, values are alternatives
// (any may match); across flags, all must match.
type Filters struct {
	Types, Sources, Targets, Commands, Reasons []string
}

// maxFilterValue bounds one filter value.
const maxFilterValue = 256

// Expr validates the filters and returns them as a filter expression of
// the UI's filter bar (see tuitail.ParseFilter).
func (f Filters) Expr() (string, error) {
	var terms []string
	add := func(flag, field string, vals []string, check func(string) error) error {
		var ok []string
		for _, v := range vals {
			v = strings.TrimSpace(v)
			switch {
			case v == "":
				return fmt.Errorf("invalid --%s: an empty value; give a value or drop the flag", flag)
			case len(v) > maxFilterValue:
				return fmt.Errorf("invalid --%s %.40q...: longer than %d bytes", flag, v, maxFilterValue)
			case strings.ContainsFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
				return fmt.Errorf("invalid --%s %q: spaces and control characters cannot match any %s", flag, v, field)
			}
			if check != nil {
				if err := check(v); err != nil {
					return err
				}
			}
			ok = append(ok, v)
		}
		if len(ok) > 0 {
			terms = append(terms, field+":"+strings.Join(ok, ","))
		}
		return nil
	}
	checkType := func(v string) error {
		for _, n := range typeNames() {
			if strings.EqualFold(v, n) {
				return nil
			}
		}
		return fmt.Errorf("unknown --type %q: use one of %s", v, strings.Join(typeNames(), ", "))
	}
	for _, a := range []struct {
		flag, field string
		vals        []string
		check       func(string) error
	}{
		{"type", "type", f.Types, checkType},
		{"source", "source", f.Sources, nil},
		{"target", "target", f.Targets, nil},
		{"command", "command", f.Commands, nil},
		{"reason", "reason", f.Reasons, nil},
	} {
		if err := add(a.flag, a.field, a.vals, a.check); err != nil {
			return "", err
		}
	}
	expr := strings.Join(terms, " ")
	if _, err := tuitail.ParseFilter(expr); err != nil {
		return "", err // cannot happen: the fields are the parser's own
	}
	return expr, nil
}
