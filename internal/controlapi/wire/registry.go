package wire

import (
	"time"

	"github.com/snavio/snavio/internal/spec"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// RegistryItems is a list of registry records (GET /v1/registry).
type RegistryItems struct {
	Items []registry.Item `json:"items"`
}

// RegistryPutRequest is the body of PUT /v1/registry/item: the record, with
// the stored version it replaces (0 to create).
type RegistryPutRequest struct {
	Item registry.Item `json:"item"`
}

// RegistryHistory is a record's changelog, newest first.
type RegistryHistory struct {
	Changes []registry.Change `json:"changes"`
}

// ApplyRequest is the body of POST /v1/registry/apply: the routes and ACLs
// a spec file declares.
type ApplyRequest struct {
	Items  []registry.Item `json:"items"`
	Prune  bool            `json:"prune"`
	DryRun bool            `json:"dry_run"`
}

// ApplyResult is the plan and, unless a dry run, the changes made.
type ApplyResult struct {
	Plan    spec.Plan         `json:"plan"`
	Applied []registry.Change `json:"applied"`
}

// ACLRevokeRequest names the ACL grant to revoke.
type ACLRevokeRequest struct {
	Source  string `json:"source"`
	Target  string `json:"target"`
	Command string `json:"command"`
}

// KeyRequest names a producing service.
type KeyRequest struct {
	Source string `json:"source"`
	// ActivateAt, for rotate, is when the new version becomes current
	// (default now).
	ActivateAt time.Time `json:"activate_at,omitzero"`
}

// KeyResult is a new key version; the secret is shown this once.
type KeyResult struct {
	Source    string    `json:"source"`
	VersionID string    `json:"version_id"`
	Secret    []byte    `json:"secret"`
	Activated time.Time `json:"activated_at"`
}

// Whoami is the answer of GET /v1/whoami: who the token is, and the
// server's clock (for `snavio doctor`'s skew check).
type Whoami struct {
	Principal  string    `json:"principal"`
	Operator   bool      `json:"operator"`
	Tenant     string    `json:"tenant,omitempty"`
	ServerTime time.Time `json:"server_time"`
	// ReplayWindowSeconds is the server's replay window, when it reports
	// it (0: not reported).
	ReplayWindowSeconds float64 `json:"replay_window_seconds,omitempty"`
}
