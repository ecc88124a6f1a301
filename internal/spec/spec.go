// Package spec reads the declarative registry files of `snavio route
// apply`: multi-document YAML of routes and ACLs, in human units, turned
// into registry records and validated by the registry's one validation
// function. Plan compares desired records with the stored ones.
//
//	kind: route
//	target: mailer
//	command: send-receipt
//	queue: arn:aws:sqs:eu-west-1:123456789012:mailer-commands
//	dlq: arn:aws:sqs:eu-west-1:123456789012:mailer-commands-dlq
//	dedupe: strict               # none (default) | strict
//	expected_drain: 5m           # default 300s
//	sensitivity: critical        # critical | moderate (default) | low
//	rate: 100/s                  # N/s, N/m, N/h or N/<duration>
//	burst: 10
//	cooldown: 30s
//	fairness: {dominant_share: 0.9, competing_share: 0.05, competing_sources: 3, window: 30s, ban: 30s}
//	prefetch_leases: 5
//	ttl: 24h                     # an ephemeral route
//	metadata: {owner: team-mail}
//	---
//	kind: acl
//	source: acme/billing
//	target: mailer
//	command: send-receipt
//	sensitivity: critical        # default: the route's
//	fresh_ttl: 1s                # both or neither
//	stale_ttl: 3s
package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// MaxFileBytes bounds a spec file.
const MaxFileBytes = 4 << 20

// MaxDocuments bounds the documents of one file.
const MaxDocuments = 10000

type doc struct {
	Kind           string            `yaml:"kind"`
	Target         string            `yaml:"target"`
	Command        string            `yaml:"command"`
	Source         string            `yaml:"source"`
	Queue          string            `yaml:"queue"`
	DLQ            string            `yaml:"dlq"`
	Dedupe         string            `yaml:"dedupe"`
	ExpectedDrain  string            `yaml:"expected_drain"`
	Sensitivity    string            `yaml:"sensitivity"`
	Rate           string            `yaml:"rate"`
	Burst          int64             `yaml:"burst"`
	Cooldown       string            `yaml:"cooldown"`
	Fairness       *fairness         `yaml:"fairness"`
	PrefetchLeases int               `yaml:"prefetch_leases"`
	TTL            string            `yaml:"ttl"`
	Metadata       map[string]string `yaml:"metadata"`
	FreshTTL       string            `yaml:"fresh_ttl"`
	StaleTTL       string            `yaml:"stale_ttl"`
}

type fairness struct {
	Disabled         bool    `yaml:"disabled"`
	DominantShare    float64 `yaml:"dominant_share"`
	CompetingShare   float64 `yaml:"competing_share"`
	CompetingSources int     `yaml:"competing_sources"`
	Window           string  `yaml:"window"`
	Ban              string  `yaml:"ban"`
}

// Error is a problem in a spec file, located by document and line.
type Error struct {
	File     string
	Document int // 1-based
	Line     int // 0 when unknown
	Msg      string
}

func (e *Error) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc += ":" + strconv.Itoa(e.Line)
	}
	return fmt.Sprintf("%s (document %d): %s", loc, e.Document, e.Msg)
}

// Parse reads a spec file named name (for errors). now anchors ttl:
// records get an absolute expiry. The result is validated.
func Parse(name string, r io.Reader, now time.Time) ([]registry.Item, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%s is over %d MiB: split it into several files", name, MaxFileBytes>>20)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var items []registry.Item
	var data registry.Data
	for n := 1; ; n++ {
		var node yaml.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &Error{File: name, Document: n, Msg: yamlMsg(err)}
		}
		if n > MaxDocuments {
			return nil, &Error{File: name, Document: n, Msg: fmt.Sprintf("more than %d documents: split the file", MaxDocuments)}
		}
		if len(node.Content) == 0 || (node.Content[0].Kind == yaml.ScalarNode && node.Content[0].Tag == "!!null") {
			continue // an empty document, e.g. a leading ---
		}
		if err := checkKeys(node.Content[0], docKeys, ""); err != nil {
			return nil, &Error{File: name, Document: n, Line: err.line, Msg: err.msg}
		}
		var d doc
		if err := node.Decode(&d); err != nil {
			return nil, &Error{File: name, Document: n, Line: node.Line, Msg: yamlMsg(err)}
		}
		it, err := d.item(now)
		if err != nil {
			return nil, &Error{File: name, Document: n, Line: node.Line, Msg: err.Error()}
		}
		if err := registry.ValidateItem(it); err != nil {
			return nil, &Error{File: name, Document: n, Line: node.Line, Msg: err.Error()}
		}
		items = append(items, it)
		data.Add(it)
	}
	if err := registry.Validate(&data); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// An ACL without a sensitivity profile takes its route's.
	profiles := map[registry.RouteKey]registry.Profile{}
	for _, it := range items {
		if it.Route != nil && it.Route.Profile != "" {
			profiles[it.Route.Key()] = it.Route.Profile
		}
	}
	for _, it := range items {
		if a := it.ACL; a != nil && a.Profile == "" {
			a.Profile = profiles[registry.RouteKey{Target: a.Target, Command: a.Command}]
		}
	}
	return items, nil
}

// The keys a document and its fairness block may have (yaml.v3 applies
// KnownFields only to its Decoder, not to Node.Decode).
func docKeys(k string) bool {
	switch k {
	case "kind", "target", "command", "source", "queue", "dlq", "dedupe", "expected_drain", "sensitivity",
		"rate", "burst", "cooldown", "fairness", "prefetch_leases", "ttl", "metadata", "fresh_ttl", "stale_ttl":
		return true
	}
	return false
}

func fairnessKeys(k string) bool {
	switch k {
	case "disabled", "dominant_share", "competing_share", "competing_sources", "window", "ban":
		return true
	}
	return false
}

type keyError struct {
	line int
	msg  string
}

// checkKeys refuses unknown and repeated keys of a mapping, and of its
// fairness block.
func checkKeys(n *yaml.Node, allowed func(string) bool, prefix string) *keyError {
	if n.Kind != yaml.MappingNode {
		return &keyError{line: n.Line, msg: "a document must be a mapping of keys such as kind, target, command"}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if !allowed(k.Value) {
			return &keyError{line: k.Line, msg: fmt.Sprintf("unknown key %s%s: see `snavio route apply --help` for the format", prefix, k.Value)}
		}
		if seen[k.Value] {
			return &keyError{line: k.Line, msg: fmt.Sprintf("key %s%s appears twice: keep one", prefix, k.Value)}
		}
		seen[k.Value] = true
		if k.Value == "fairness" && n.Content[i+1].Kind != yaml.ScalarNode {
			if err := checkKeys(n.Content[i+1], fairnessKeys, "fairness."); err != nil {
				return err
			}
		}
	}
	return nil
}

func yamlMsg(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return strings.Join(te.Errors, "; ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

func (d *doc) item(now time.Time) (registry.Item, error) {
	switch strings.ToLower(d.Kind) {
	case "route":
		return d.route(now)
	case "acl":
		return d.acl(now)
	case "":
		return registry.Item{}, errors.New("missing kind: set kind: route or kind: acl")
	default:
		return registry.Item{}, fmt.Errorf("unknown kind %q: use route or acl", d.Kind)
	}
}

func (d *doc) route(now time.Time) (registry.Item, error) {
	if d.Source != "" || d.FreshTTL != "" || d.StaleTTL != "" {
		return registry.Item{}, errors.New("source, fresh_ttl and stale_ttl belong to kind: acl")
	}
	r := &registry.Route{
		Target: d.Target, Command: d.Command, QueueARN: d.Queue, DLQARN: d.DLQ,
		DedupeMode: registry.DedupeMode(d.Dedupe), Profile: registry.Profile(d.Sensitivity),
		PrefetchLeases: d.PrefetchLeases, Metadata: d.Metadata,
	}
	var err error
	if r.ExpectedDrainSeconds, err = seconds("expected_drain", d.ExpectedDrain); err != nil {
		return registry.Item{}, err
	}
	if d.Rate != "" {
		if r.RateLimit.Max, r.RateLimit.IntervalSeconds, err = ParseRate(d.Rate); err != nil {
			return registry.Item{}, err
		}
	}
	r.RateLimit.Burst = d.Burst
	if r.RateLimit.CooldownSeconds, err = seconds("cooldown", d.Cooldown); err != nil {
		return registry.Item{}, err
	}
	if (d.Burst != 0 || d.Cooldown != "") && d.Rate == "" {
		return registry.Item{}, errors.New("burst and cooldown need a rate: set rate, e.g. rate: 100/s")
	}
	if f := d.Fairness; f != nil {
		r.Fairness = registry.Fairness{Disabled: f.Disabled, DominantShare: f.DominantShare, CompetingShare: f.CompetingShare, CompetingSources: f.CompetingSources}
		if r.Fairness.WindowSeconds, err = seconds("fairness.window", f.Window); err != nil {
			return registry.Item{}, err
		}
		if r.Fairness.BanSeconds, err = seconds("fairness.ban", f.Ban); err != nil {
			return registry.Item{}, err
		}
	}
	if r.ExpiresAt, err = expiry(d.TTL, now); err != nil {
		return registry.Item{}, err
	}
	return registry.Item{Route: r}, nil
}

func (d *doc) acl(now time.Time) (registry.Item, error) {
	if d.Queue != "" || d.DLQ != "" || d.Dedupe != "" || d.Rate != "" || d.Fairness != nil || d.ExpectedDrain != "" || d.PrefetchLeases != 0 || d.Burst != 0 || d.Cooldown != "" || d.Metadata != nil {
		return registry.Item{}, errors.New("queue, dlq, dedupe, expected_drain, rate, burst, cooldown, fairness, prefetch_leases and metadata belong to kind: route")
	}
	a := &registry.ACL{Source: d.Source, Target: d.Target, Command: d.Command, Allow: true, Profile: registry.Profile(d.Sensitivity)}
	var err error
	if a.FreshTTLSeconds, err = seconds("fresh_ttl", d.FreshTTL); err != nil {
		return registry.Item{}, err
	}
	if a.StaleTTLSeconds, err = seconds("stale_ttl", d.StaleTTL); err != nil {
		return registry.Item{}, err
	}
	if a.ExpiresAt, err = expiry(d.TTL, now); err != nil {
		return registry.Item{}, err
	}
	return registry.Item{ACL: a}, nil
}

// seconds parses a duration of whole seconds ("" is 0).
func seconds(field, s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if n, err2 := strconv.ParseInt(s, 10, 64); err2 == nil {
			return 0, fmt.Errorf("%s: %q has no unit: write %ds", field, s, n)
		}
		return 0, fmt.Errorf("%s: %q is not a duration: use e.g. 30s, 5m, 1h", field, s)
	}
	if d <= 0 || d%time.Second != 0 {
		return 0, fmt.Errorf("%s: %q must be a positive whole number of seconds", field, s)
	}
	return int64(d / time.Second), nil
}

func expiry(ttl string, now time.Time) (int64, error) {
	s, err := seconds("ttl", ttl)
	if err != nil || s == 0 {
		return 0, err
	}
	return now.Unix() + s, nil
}

// ParseRate parses N/s, N/m, N/h or N/<duration> (e.g. 100/s, 6000/1m,
// 10/5s) into a maximum and an interval in seconds.
func ParseRate(s string) (max, intervalSeconds int64, err error) {
	n, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, 0, fmt.Errorf("rate %q: write N/s, N/m, N/h or N/<duration>, e.g. 100/s", s)
	}
	max, err = strconv.ParseInt(strings.TrimSpace(n), 10, 64)
	if err != nil || max <= 0 {
		return 0, 0, fmt.Errorf("rate %q: the count must be a positive integer", s)
	}
	switch per = strings.TrimSpace(per); per {
	case "s", "sec", "second":
		return max, 1, nil
	case "m", "min", "minute":
		return max, 60, nil
	case "h", "hour":
		return max, 3600, nil
	}
	iv, err := seconds("rate", per)
	if err != nil {
		return 0, 0, fmt.Errorf("rate %q: the interval must be s, m, h or a duration such as 10s", s)
	}
	return max, iv, nil
}
