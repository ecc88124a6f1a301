package wire

import (
	"fmt"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// SnapshotKinds returns the document kinds in the order a list shows them.
func SnapshotKinds() []snapshot.Kind {
	return []snapshot.Kind{snapshot.KindFull, snapshot.KindACL, snapshot.KindHMAC}
}

// ParseSnapshotKind validates a document kind.
func ParseSnapshotKind(s string) (snapshot.Kind, error) {
	for _, k := range SnapshotKinds() {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("snapshot kind %q: use full, acl or hmac", s)
}

// SnapshotVersionHeader names the version of the document GET
// /v1/snapshots/{kind}/latest returns.
const SnapshotVersionHeader = "X-Snavio-Snapshot-Version"

// SnapshotGenerated is the answer of a generation.
type SnapshotGenerated struct {
	VersionID   string                `json:"version_id"`
	GeneratedAt time.Time             `json:"generated_at"`
	Bytes       map[snapshot.Kind]int `json:"bytes"`
}

// SnapshotDocument describes one document kind's versions.
type SnapshotDocument struct {
	Kind snapshot.Kind `json:"kind"`
	Path string        `json:"path"`
	// Latest is the promoted version ("" before the first generation)
	// and Bytes its signed size.
	Latest string `json:"latest,omitempty"`
	Bytes  int    `json:"bytes,omitempty"`
	// Versions counts the stored versions; Recent names the newest of
	// them, newest first.
	Versions int      `json:"versions"`
	Recent   []string `json:"recent"`
}

// SnapshotList is the answer of GET /v1/snapshots.
type SnapshotList struct {
	KeyID     string             `json:"key_id"`
	Documents []SnapshotDocument `json:"documents"`
}

// SnapshotPublicKey is the answer of GET /v1/snapshots/public-key: the key
// that verifies every snapshot this server signs. PublicKey is the raw
// 32-byte key in standard base64; PEM is the same key as a PKIX "PUBLIC
// KEY" block. Either, or this whole JSON, is a valid --public-key file.
type SnapshotPublicKey struct {
	KeyID     string `json:"key_id"`
	Algorithm string `json:"algorithm"`
	PublicKey string `json:"public_key"`
	PEM       string `json:"pem"`
}
