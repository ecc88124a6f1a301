package snapshotcmd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// Change is one difference between two snapshots.
type Change struct {
	// Change is added, removed or changed.
	Change string `json:"change"`
	// Kind is the record kind (route, acl, key, ban, quota), or
	// ttl_policy or document.
	Kind string `json:"kind"`
	// ID names the record (registry.ID) or the TTL entry.
	ID string `json:"id"`
	// Fields are the JSON fields that differ, for a change.
	Fields []string `json:"fields,omitempty"`
}

// DocSummary names one side of a diff.
type DocSummary struct {
	File        string        `json:"file"`
	Kind        snapshot.Kind `json:"kind"`
	VersionID   string        `json:"version_id"`
	GeneratedAt time.Time     `json:"generated_at"`
}

// DiffResult is what diff prints. Equal ignores the version and
// generation time: two snapshots of the same registry are equal.
type DiffResult struct {
	A       DocSummary `json:"a"`
	B       DocSummary `json:"b"`
	Equal   bool       `json:"equal"`
	Changes []Change   `json:"changes"`
}

// TableHeader implements output.Tabular.
func (DiffResult) TableHeader() []string { return []string{"change", "kind", "id", "fields"} }

// TableRows implements output.Tabular.
func (r DiffResult) TableRows() [][]string {
	rows := make([][]string, len(r.Changes))
	for i, c := range r.Changes {
		rows[i] = []string{c.Change, c.Kind, c.ID, strings.Join(c.Fields, ",")}
	}
	return rows
}

// fields returns the top-level JSON members of a record with every HMAC
// secret replaced by a fingerprint, so a diff says a secret changed
// without showing it.
func fields(it registry.Item) (map[string]json.RawMessage, error) {
	if it.Key != nil {
		k := it.Clone().Key
		for i := range k.Versions {
			sum := sha256.Sum256(k.Versions[i].Secret)
			k.Versions[i].Secret = []byte("sha256:" + hex.EncodeToString(sum[:8]))
		}
		it = registry.Item{Key: k}
	}
	var rec any
	switch it.Kind() {
	case registry.KindRoute:
		rec = it.Route
	case registry.KindACL:
		rec = it.ACL
	case registry.KindKey:
		rec = it.Key
	case registry.KindBan:
		rec = it.Ban
	case registry.KindQuota:
		rec = it.Quota
	}
	b, err := jsonv2.Marshal(rec, jsonv2.Deterministic(true))
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

func items(d *registry.Data) map[registry.ID]registry.Item {
	m := make(map[registry.ID]registry.Item, d.Len())
	add := func(it registry.Item) { m[it.ID()] = it }
	for i := range d.Routes {
		add(registry.Item{Route: &d.Routes[i]})
	}
	for i := range d.ACLs {
		add(registry.Item{ACL: &d.ACLs[i]})
	}
	for i := range d.Keys {
		add(registry.Item{Key: &d.Keys[i]})
	}
	for i := range d.Bans {
		add(registry.Item{Ban: &d.Bans[i]})
	}
	for i := range d.Quotas {
		add(registry.Item{Quota: &d.Quotas[i]})
	}
	return m
}

func changedFields(a, b map[string]json.RawMessage) []string {
	var out []string
	for k, va := range a {
		if vb, ok := b[k]; !ok || !bytes.Equal(va, vb) {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Diff compares two snapshot documents: the records of each (added,
// removed, changed with the fields that differ) and the TTL policy.
func Diff(a, b *snapshot.Document) ([]Change, error) {
	changes := []Change{}
	if a.Kind != b.Kind {
		changes = append(changes, Change{Change: "changed", Kind: "document", ID: "kind", Fields: []string{string(a.Kind) + " -> " + string(b.Kind)}})
	}
	ia, ib := items(&a.Data), items(&b.Data)
	ids := make([]registry.ID, 0, len(ia)+len(ib))
	for id := range ia {
		ids = append(ids, id)
	}
	for id := range ib {
		if _, ok := ia[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		x, inA := ia[id]
		y, inB := ib[id]
		c := Change{Kind: string(id.Kind()), ID: string(id)}
		switch {
		case !inA:
			c.Change = "added"
		case !inB:
			c.Change = "removed"
		default:
			fa, err := fields(x)
			if err != nil {
				return nil, fmt.Errorf("encode %s: %w", id, err)
			}
			fb, err := fields(y)
			if err != nil {
				return nil, fmt.Errorf("encode %s: %w", id, err)
			}
			if c.Fields = changedFields(fa, fb); len(c.Fields) == 0 {
				continue
			}
			c.Change = "changed"
		}
		changes = append(changes, c)
	}
	ttlChange := func(name string, x, y snapshot.TTL, inA, inB bool) {
		c := Change{Kind: "ttl_policy", ID: name}
		switch {
		case inA && !inB:
			c.Change = "removed"
		case inB && !inA:
			c.Change = "added"
		default:
			if x.FreshSeconds != y.FreshSeconds {
				c.Fields = append(c.Fields, "fresh_seconds")
			}
			if x.StaleSeconds != y.StaleSeconds {
				c.Fields = append(c.Fields, "stale_seconds")
			}
			if len(c.Fields) == 0 {
				return
			}
			c.Change = "changed"
		}
		changes = append(changes, c)
	}
	pa, pb := a.TTLPolicy, b.TTLPolicy
	ttlChange("routing", pa.Routing, pb.Routing, true, true)
	ttlChange("hmac", pa.HMAC, pb.HMAC, true, true)
	ttlChange("bans", pa.Bans, pb.Bans, true, true)
	profiles := make([]registry.Profile, 0, len(pa.Profiles)+len(pb.Profiles))
	for p := range pa.Profiles {
		profiles = append(profiles, p)
	}
	for p := range pb.Profiles {
		if _, ok := pa.Profiles[p]; !ok {
			profiles = append(profiles, p)
		}
	}
	slices.Sort(profiles)
	for _, p := range profiles {
		x, inA := pa.Profiles[p]
		y, inB := pb.Profiles[p]
		ttlChange("acl_profiles."+string(p), x, y, inA, inB)
	}
	return changes, nil
}

// DiffOptions are the inputs of `snavio snapshot diff`.
type DiffOptions struct {
	Deps
	A, B string
}

// NewCmdDiff builds `snavio snapshot diff`.
func NewCmdDiff(d Deps, runF func(context.Context, *DiffOptions) error) *cobra.Command {
	opts := &DiffOptions{Deps: d}
	return &cobra.Command{
		Use:   "diff A B",
		Short: "Show the records and TTLs added, removed or changed between two snapshots",
		Long: `Compare two snapshot files (signed or bare documents): every route, ACL,
key, ban and quota added, removed or changed from A to B, with the fields
that changed, and the TTL policy entries that changed. The version and
generation time are not differences: two snapshots of the same registry
are equal. HMAC secrets are compared by fingerprint and never printed.
Signatures are not checked; use "snavio snapshot verify" for that.

Exit codes: 0 equal; 3 they differ; 1 a file could not be read or decoded;
2 bad arguments.`,
		Example: `  snavio snapshot diff yesterday.json full.json
  snavio snapshot diff a.json b.json -o json`,
		Args: cmdutil.ExactArgs(2, "two snapshot files, A and B"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.A, opts.B = args[0], args[1]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runDiff(cmd.Context(), opts)
		},
	}
}

func summary(path string, f *File) DocSummary {
	return DocSummary{File: path, Kind: f.Doc.Kind, VersionID: f.Doc.VersionID, GeneratedAt: f.Doc.GeneratedAt}
}

func runDiff(_ context.Context, o *DiffOptions) error {
	fa, err := ReadFile(o.A)
	if err != nil {
		return err
	}
	fb, err := ReadFile(o.B)
	if err != nil {
		return err
	}
	changes, err := Diff(fa.Doc, fb.Doc)
	if err != nil {
		return err
	}
	res := DiffResult{A: summary(o.A, fa), B: summary(o.B, fb), Equal: len(changes) == 0, Changes: changes}
	p, err := o.Printer()
	if err != nil {
		return err
	}
	if err := p.Print(res); err != nil {
		return err
	}
	if res.Equal {
		fmt.Fprintf(o.ErrOut, "no differences between %s (%s) and %s (%s)\n", o.A, fa.Doc.VersionID, o.B, fb.Doc.VersionID)
		return nil
	}
	fmt.Fprintf(o.ErrOut, "%d difference(s) from %s (%s) to %s (%s)\n", len(changes), o.A, fa.Doc.VersionID, o.B, fb.Doc.VersionID)
	return &cmdutil.ExitCodeError{Code: cmdutil.ExitChanges}
}
