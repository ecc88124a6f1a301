package spec

import (
	"bytes"
	"encoding/json"
	"sort"

	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// Action is what applying a spec does to one record.
type Action string

// Actions.
const (
	Create    Action = "create"
	Update    Action = "update"
	Delete    Action = "delete"
	Unchanged Action = "unchanged"
)

// Change is one planned change.
type Change struct {
	Action Action         `json:"action"`
	ID     registry.ID    `json:"id"`
	Before *registry.Item `json:"before,omitempty"`
	After  *registry.Item `json:"after,omitempty"`
}

// Plan is the set of changes that makes the store match a spec.
type Plan struct {
	Changes []Change `json:"changes"`
}

// Pending reports whether the plan changes anything.
func (p *Plan) Pending() bool {
	for _, c := range p.Changes {
		if c.Action != Unchanged {
			return true
		}
	}
	return false
}

// Count returns how many changes have action a.
func (p *Plan) Count(a Action) int {
	n := 0
	for _, c := range p.Changes {
		if c.Action == a {
			n++
		}
	}
	return n
}

// MakePlan compares desired (from a spec) with current (the stored routes
// and ACLs). A record is updated only if a field the spec sets differs:
// the stored version never counts, and neither does the expiry of an
// ephemeral record that is still live (re-applying a file must not move
// it), so applying the same file twice plans nothing the second time.
// With prune, stored routes and ACLs whose target the spec names but which
// the spec no longer lists are deleted: prune never touches the targets of
// other teams, which their own files manage.
func MakePlan(desired, current []registry.Item, prune bool) Plan {
	cur := map[registry.ID]registry.Item{}
	for _, it := range current {
		if k := it.Kind(); k == registry.KindRoute || k == registry.KindACL {
			cur[it.ID()] = it
		}
	}
	var p Plan
	named := map[registry.ID]bool{}
	targets := map[string]bool{}
	for _, it := range desired {
		id := it.ID()
		named[id] = true
		targets[target(it)] = true
		d := it
		old, ok := cur[id]
		switch {
		case !ok:
			p.Changes = append(p.Changes, Change{Action: Create, ID: id, After: &d})
		case same(d, old):
			o := old
			p.Changes = append(p.Changes, Change{Action: Unchanged, ID: id, Before: &o})
		default:
			o := old
			p.Changes = append(p.Changes, Change{Action: Update, ID: id, Before: &o, After: &d})
		}
	}
	if prune {
		for id, it := range cur {
			if !named[id] && targets[target(it)] && !revoked(it) {
				o := it
				p.Changes = append(p.Changes, Change{Action: Delete, ID: id, Before: &o})
			}
		}
	}
	sort.SliceStable(p.Changes, func(i, j int) bool { return p.Changes[i].ID < p.Changes[j].ID })
	return p
}

func target(it registry.Item) string {
	if it.Route != nil {
		return it.Route.Target
	}
	if it.ACL != nil {
		return it.ACL.Target
	}
	return ""
}

// revoked ACL records are kept for the revocation audit; prune leaves them.
func revoked(it registry.Item) bool { return it.ACL != nil && !it.ACL.Allow }

// same compares what a spec controls.
func same(desired, stored registry.Item) bool {
	d, s := desired.Clone().WithVersion(0), stored.Clone().WithVersion(0)
	if exp := stored.ExpiresAt(); exp != 0 && desired.ExpiresAt() != 0 {
		d = withExpiry(d, exp)
	}
	if d.ACL != nil && s.ACL != nil && s.ACL.Profile != "" && d.ACL.Profile == "" {
		d.ACL.Profile = s.ACL.Profile
	}
	a, _ := json.Marshal(d)
	b, _ := json.Marshal(s)
	return bytes.Equal(a, b)
}

func withExpiry(it registry.Item, exp int64) registry.Item {
	switch {
	case it.Route != nil:
		it.Route.ExpiresAt = exp
	case it.ACL != nil:
		it.ACL.ExpiresAt = exp
	}
	return it
}
