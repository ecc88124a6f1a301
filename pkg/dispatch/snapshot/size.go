package snapshot

import (
	"unsafe"

	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// Size is the size of a snapshot on the wire and in memory once loaded
// into the dispatcher's caches (the spec's TODO "estimated size of cached
// data").
type Size struct {
	Routes, ACLs, Keys, Bans, Quotas int
	// FileBytes is the signed file's size.
	FileBytes int64
	// MemoryBytes estimates the live heap the loaded caches hold: the
	// decoded records with their strings, and the caches' index maps and
	// entry arrays. The model is calibrated against measured heap
	// (TestSizeEstimate keeps it within 20%; docs/registry/snapshots.md
	// has measured figures).
	MemoryBytes int64
}

// Per-entry costs of the caches (package cache): an entry is the value
// pointer, three deadlines and the last-use word; the index maps a key to
// an int32 in a Swiss table at up to 7/8 load, doubled when it grows, so
// about 1.3 slots per entry on average.
const (
	cacheEntryBytes = 8 + 3*8 + 8
	indexSlotFactor = 1.3
)

// Measure returns the size of doc loaded from a file of fileBytes bytes.
func Measure(doc *Document, fileBytes int) Size {
	d := &doc.Data
	s := Size{Routes: len(d.Routes), ACLs: len(d.ACLs), Keys: len(d.Keys), Bans: len(d.Bans), Quotas: len(d.Quotas), FileBytes: int64(fileBytes)}
	var m float64
	for i := range d.Routes {
		r := &d.Routes[i]
		m += float64(unsafe.Sizeof(*r)) + str(r.Target) + str(r.Command) + str(r.QueueARN) + str(r.DLQARN) + str(string(r.DedupeMode)) + str(string(r.Profile))
		if len(r.Metadata) > 0 {
			m += 48 + 8*(16+16+1) // map header and one group
			for k, v := range r.Metadata {
				m += str(k) + str(v) + 2*16
			}
		}
		m += cacheEntryBytes + indexSlotFactor*float64(unsafe.Sizeof(registry.RouteKey{})+4+1)
	}
	for i := range d.ACLs {
		a := &d.ACLs[i]
		m += float64(unsafe.Sizeof(*a)) + str(a.Source) + str(a.Target) + str(a.Command) + str(string(a.Profile))
		m += cacheEntryBytes + indexSlotFactor*float64(unsafe.Sizeof(registry.ACLKey{})+4+1)
	}
	for i := range d.Keys {
		k := &d.Keys[i]
		m += float64(unsafe.Sizeof(*k)) + str(k.Source)
		for _, v := range k.Versions {
			// The decoded version, the keyring's copy of it, and the
			// signing key (its own copy of the secret and the HMAC state).
			m += 2*float64(unsafe.Sizeof(v)) + 2*str(string(v.Secret)) + str(v.ID) + 384
		}
		m += 256 + cacheEntryBytes + indexSlotFactor*float64(16+4+1) // keyring header and map
	}
	for i := range d.Bans {
		m += float64(unsafe.Sizeof(d.Bans[i])) + str(d.Bans[i].Source) + str(d.Bans[i].Reason) + cacheEntryBytes + indexSlotFactor*float64(16+4+1)
	}
	for i := range d.Quotas {
		q := &d.Quotas[i]
		m += float64(unsafe.Sizeof(*q)) + str(q.Source) + str(q.Target) + str(q.Command)
	}
	s.MemoryBytes = int64(m)
	return s
}

// str is the heap cost of a decoded string: its bytes rounded up to the
// allocator's size class (about 1/8 slack above 256 bytes).
func str(s string) float64 {
	n := len(s)
	if n == 0 {
		return 0
	}
	// The Go allocator's small size classes up to 256 bytes.
	classes := [...]int{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256}
	for _, c := range classes {
		if n <= c {
			return float64(c)
		}
	}
	return float64(n) * 1.125
}
