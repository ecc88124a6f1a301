package dashboard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// registryItems is GET /v1/registry's answer.
type registryItems struct {
	Items []registry.Item `json:"items"`
}

// registryKind reads the records of one kind p may read.
func (d *Dashboard) registryKind(ctx context.Context, p server.Principal, kind registry.Kind) ([]registry.Item, error) {
	var out registryItems
	err := d.call(ctx, p, "/v1/registry?"+url.Values{"kind": {string(kind)}}.Encode(), &out)
	return out.Items, err
}

// Grant is one ACL of the tenant, with the route it opens.
type Grant struct {
	Source, Target, Command string
	Allow                   bool
	RevokedAt               time.Time
	// Queue is the route's queue ("" when no route is registered for
	// the target and command: commands would fail route-missing).
	Queue, Dedupe string
}

// grants reads p's ACLs and the routes they name.
func (d *Dashboard) grants(ctx context.Context, p server.Principal) ([]Grant, error) {
	acls, err := d.registryKind(ctx, p, registry.KindACL)
	if err != nil {
		return nil, err
	}
	routes, err := d.registryKind(ctx, p, registry.KindRoute)
	if err != nil {
		return nil, err
	}
	out := make([]Grant, 0, len(acls))
	for _, it := range acls {
		a := it.ACL
		if a == nil {
			continue
		}
		g := Grant{Source: a.Source, Target: a.Target, Command: a.Command, Allow: a.Allow, RevokedAt: a.RevokedAt}
		for _, r := range routes {
			if r.Route != nil && r.Route.Target == a.Target && r.Route.Command == a.Command {
				g.Queue, g.Dedupe = r.Route.QueueARN, string(r.Route.DedupeMode)
			}
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b Grant) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.Target, b.Target), cmp.Compare(a.Command, b.Command))
	})
	return out, nil
}

// keyVersion is a key version of the tenant config, without its secret:
// the dashboard never reads one.
type keyVersion struct {
	VersionID   string     `json:"version_id"`
	ActivatedAt time.Time  `json:"activated_at"`
	ExpiresAt   *time.Time `json:"expires_at"`
}

// tenantKeys is the part of GET /v1/tenants/{tenant}/config the keys
// panel shows (keys.TenantConfig without the secrets).
type tenantKeys struct {
	Services []struct {
		Source         string      `json:"source"`
		Current        *keyVersion `json:"current"`
		Previous       *keyVersion `json:"previous"`
		Next           *keyVersion `json:"next"`
		NextRotationAt time.Time   `json:"next_rotation_at"`
	} `json:"services"`
}

// ServiceKey is one producing service's key timeline, with what needs
// attention.
type ServiceKey struct {
	Source                  string
	Current, Previous, Next string
	// Expires is when the current version stops being accepted (zero
	// while no successor is scheduled).
	Expires, NextRotation time.Time
	Warnings              []string
}

// serviceKeys reads the tenant's key timelines and warns of what ends
// within keys.DefaultExpiryWarning (the shield's own warning horizon).
func (d *Dashboard) serviceKeys(ctx context.Context, p server.Principal, now time.Time) ([]ServiceKey, error) {
	var tk tenantKeys
	err := d.call(ctx, p, "/v1/tenants/"+url.PathEscape(p.Tenant)+"/config", &tk)
	if ae := (*apiError)(nil); errors.As(err, &ae) && ae.status == http.StatusNotFound {
		return nil, nil // no service of the tenant has a key
	}
	if err != nil {
		return nil, err
	}
	soon := now.Add(keys.DefaultExpiryWarning)
	out := make([]ServiceKey, 0, len(tk.Services))
	for _, s := range tk.Services {
		sk := ServiceKey{Source: s.Source, NextRotation: s.NextRotationAt}
		if s.Current == nil {
			sk.Warnings = append(sk.Warnings, "no current key: its producers cannot sign; the operator creates one with snavio key rotate")
		} else {
			sk.Current = s.Current.VersionID
			if s.Current.ExpiresAt != nil {
				sk.Expires = *s.Current.ExpiresAt
				if sk.Expires.Before(soon) {
					sk.Warnings = append(sk.Warnings, fmt.Sprintf("%s stops being accepted %s: producers must switch to the next version (they poll the tenant config)", sk.Current, when(sk.Expires, now)))
				}
			}
			switch {
			case !s.NextRotationAt.IsZero() && s.NextRotationAt.Before(now):
				sk.Warnings = append(sk.Warnings, "rotation overdue since "+s.NextRotationAt.UTC().Format(time.DateTime)+" UTC: rotate the key (snavio key rotate)")
			case !s.NextRotationAt.IsZero() && s.NextRotationAt.Before(soon) && s.Next == nil:
				sk.Warnings = append(sk.Warnings, "rotation due "+when(s.NextRotationAt, now))
			}
		}
		if s.Previous != nil {
			sk.Previous = s.Previous.VersionID
			if s.Previous.ExpiresAt != nil && s.Previous.ExpiresAt.Before(soon) {
				sk.Warnings = append(sk.Warnings, fmt.Sprintf("previous version %s stops being accepted %s: producers still signing with it will be refused key_expired", sk.Previous, when(*s.Previous.ExpiresAt, now)))
			}
		}
		if s.Next != nil {
			sk.Next = s.Next.VersionID + " from " + s.Next.ActivatedAt.UTC().Format(time.DateTime) + " UTC"
		}
		out = append(out, sk)
	}
	return out, nil
}

// when says how far t is from now, in words.
func when(t, now time.Time) string {
	if !t.After(now) {
		return "now"
	}
	return "in " + age(t.Sub(now))
}

// Ban is a registered ban.
type Ban struct {
	Source, Kind, Reason string
	Expires              time.Time
}

func (d *Dashboard) bans(ctx context.Context, p server.Principal) ([]Ban, error) {
	items, err := d.registryKind(ctx, p, registry.KindBan)
	if err != nil {
		return nil, err
	}
	out := make([]Ban, 0, len(items))
	for _, it := range items {
		if b := it.Ban; b != nil {
			row := Ban{Source: b.Source, Kind: string(b.Kind), Reason: b.Reason}
			if b.ExpiresAt > 0 {
				row.Expires = time.Unix(b.ExpiresAt, 0)
			}
			out = append(out, row)
		}
	}
	return out, nil
}

// snapshotList is the part of GET /v1/snapshots the page shows.
type snapshotList struct {
	Documents []struct {
		Kind     string `json:"kind"`
		Latest   string `json:"latest"`
		Bytes    int    `json:"bytes"`
		Versions int    `json:"versions"`
	} `json:"documents"`
}

// Snapshot is one registry snapshot document's newest version.
type Snapshot struct {
	Kind, Latest string
	// Age is how long ago the latest version was generated (0: none).
	Age             time.Duration
	Bytes, Versions int
}

func (d *Dashboard) snapshots(ctx context.Context, p server.Principal, now time.Time) ([]Snapshot, error) {
	var l snapshotList
	if err := d.call(ctx, p, "/v1/snapshots", &l); err != nil {
		return nil, err
	}
	out := make([]Snapshot, 0, len(l.Documents))
	for _, doc := range l.Documents {
		s := Snapshot{Kind: doc.Kind, Latest: doc.Latest, Bytes: doc.Bytes, Versions: doc.Versions}
		if at, ok := snapshot.VersionTime(doc.Latest); ok {
			s.Age = now.Sub(at)
		}
		out = append(out, s)
	}
	return out, nil
}

// replayList is GET /v1/replays's answer.
type replayList struct {
	Replays []wire.ReplayAudit `json:"replays"`
}

// maxReplays bounds the replay audits the page lists, newest first.
const maxReplays = 20

func (d *Dashboard) replays(ctx context.Context, p server.Principal) ([]wire.ReplayAudit, error) {
	var l replayList
	if err := d.call(ctx, p, "/v1/replays", &l); err != nil {
		return nil, err
	}
	slices.SortFunc(l.Replays, func(a, b wire.ReplayAudit) int { return b.StartedAt.Compare(a.StartedAt) })
	if len(l.Replays) > maxReplays {
		l.Replays = l.Replays[:maxReplays]
	}
	return l.Replays, nil
}
