// Package tail is the terminal UI of `snavio tail`: a live, filterable view
// of telemetry events. The model does no I/O: events, heartbeats and
// connection changes arrive as messages on a channel fed by a source (see
// Listen), so it is tested with teatest and a fake source.
package tail

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// Event is one telemetry event of a tenant's stream.
type Event struct {
	Tenant string    `json:"tenant"`
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	// Name is the event name, e.g. snavio.command.failed.
	Name      string `json:"event"`
	CommandID string `json:"command_id,omitempty"`
	Source    string `json:"source,omitempty"`
	Target    string `json:"target,omitempty"`
	Command   string `json:"command_name,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// Raw is the whole event as JSON, shown in the detail pane.
	Raw json.RawMessage `json:"-"`
}

// Kind groups event names for colour and counts.
type Kind string

// Kinds, in display order.
const (
	KindDelivered Kind = "delivered"
	KindInvalid   Kind = "invalid"
	KindFailed    Kind = "failed"
	KindDuplicate Kind = "duplicate"
	KindFairness  Kind = "fairness"
	KindSecret    Kind = "secret"
	KindSkew      Kind = "skew"
	KindDropped   Kind = "dropped"
	KindOther     Kind = "other"
)

// Kinds lists every kind in display order.
func Kinds() []Kind {
	return []Kind{KindDelivered, KindInvalid, KindFailed, KindDuplicate, KindFairness, KindSecret, KindSkew, KindDropped, KindOther}
}

// KindOf classifies an event name.
func KindOf(name string) Kind {
	switch name {
	case telemetry.NameDelivered:
		return KindDelivered
	case telemetry.NameInvalid:
		return KindInvalid
	case telemetry.NameFailed, telemetry.NameExecutedAfterACLRevoked:
		return KindFailed
	case telemetry.NameDuplicate:
		return KindDuplicate
	case telemetry.NameWarmPathBan, telemetry.NameAbuseDetected:
		return KindFairness
	case telemetry.NameLegacyKeyUsed, telemetry.NameKeyExpiryImminent:
		return KindSecret
	case telemetry.NameSkewNearLimit, telemetry.NameSkewSample:
		return KindSkew
	case telemetry.NameDropped:
		return KindDropped
	}
	return KindOther
}

// Filter is a parsed filter expression: space-separated terms, all of
// which must match (case-insensitive substrings). A term is field:value
// with field one of type, source, target, command, reason, tenant, id; a
// bare word matches any of them. "type:" matches the kind or the event
// name. A value may list alternatives separated by commas, any of which
// may match: type:failed,invalid.
type Filter struct {
	terms []term
}

type term struct {
	field string
	// values are the alternatives; a term with no non-empty alternative
	// ("source:" or ",") matches everything.
	values []string
}

func alternatives(v string) []string {
	var out []string
	for _, a := range strings.Split(strings.ToLower(v), ",") {
		if a != "" {
			out = append(out, a)
		}
	}
	return out
}

// filterField reports whether a filter term may name field.
func filterField(field string) bool {
	switch field {
	case "type", "source", "target", "command", "reason", "tenant", "id":
		return true
	}
	return false
}

// ParseFilter parses s. Unknown field names are an error naming the
// allowed ones.
func ParseFilter(s string) (Filter, error) {
	var f Filter
	for _, w := range strings.Fields(s) {
		field, value, ok := strings.Cut(w, ":")
		if !ok {
			f.terms = append(f.terms, term{values: alternatives(w)})
			continue
		}
		field = strings.ToLower(field)
		if !filterField(field) {
			return Filter{}, &FilterError{Term: w}
		}
		f.terms = append(f.terms, term{field: field, values: alternatives(value)})
	}
	return f, nil
}

// FilterError is an unknown field in a filter.
type FilterError struct{ Term string }

func (e *FilterError) Error() string {
	return "unknown filter field in " + e.Term + ": use type:, source:, target:, command:, reason:, tenant: or id:"
}

// Empty reports whether the filter matches everything.
func (f Filter) Empty() bool { return len(f.terms) == 0 }

// Match reports whether e passes every term.
func (f Filter) Match(e *Event) bool {
	for _, t := range f.terms {
		if !t.match(e) {
			return false
		}
	}
	return true
}

func contains(s, sub string) bool { return strings.Contains(strings.ToLower(s), sub) }

func (t term) match(e *Event) bool {
	if len(t.values) == 0 {
		return true
	}
	for _, v := range t.values {
		if t.matchOne(e, v) {
			return true
		}
	}
	return false
}

func (t term) matchOne(e *Event, v string) bool {
	switch t.field {
	case "type":
		return contains(string(KindOf(e.Name)), v) || contains(e.Name, v)
	case "source":
		return contains(e.Source, v)
	case "target":
		return contains(e.Target, v)
	case "command":
		return contains(e.Command, v)
	case "reason":
		return contains(e.Reason, v)
	case "tenant":
		return contains(e.Tenant, v)
	case "id":
		return contains(e.CommandID, v)
	}
	return contains(e.Name, v) || contains(e.Source, v) || contains(e.Target, v) ||
		contains(e.Command, v) || contains(e.Reason, v) || contains(e.CommandID, v) || contains(e.Tenant, v)
}
