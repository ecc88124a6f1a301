// Package snapshotbin is the compact encoding of a full registry
// snapshot, published beside the JSON one (package snapshot) so that a
// Lambda cold start decodes it in a fraction of the JSON's time
// (docs/lambda.md, "Cold start"). It carries the same document (format
// marker, kind, version_id, generated_at, registry data; not ttl_policy,
// which loaders do not use), sealed and signed with snapshot.Seal, and is
// checked the same way: size cap, signature (nothing decoded is used
// before it verifies), age, and registry.Validate. Any defect is a *snapshot.LoadError and the loader
// falls back to the JSON document, then to the registry.
//
// Layout after the magic "SNAVBIN1": every integer is a varint (signed)
// or uvarint (lengths, counts); a string is its uvarint length and bytes;
// a time is a bool (set) then, if set, a varint of Unix nanoseconds (the
// encoding is for times between 1678 and 2262); a float64
// its 8 IEEE bytes, little-endian; a bool one byte 0 or 1.
package snapshotbin

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
	"unsafe"

	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

const magic = "SNAVBIN1"

// DefaultPath is where the compact full document is published, beside
// snapshot.DefaultPaths().Full.
const DefaultPath = "/snavio/registry/snapshot/latest.bin"

// Encode returns the compact encoding of a full document.
func Encode(doc *snapshot.Document) ([]byte, error) {
	if doc.Kind != snapshot.KindFull || doc.Format != snapshot.Format {
		return nil, fmt.Errorf("snapshotbin: only full %s documents are encoded, not %q kind %q", snapshot.Format, doc.Format, doc.Kind)
	}
	w := writer{b: make([]byte, 0, 1<<20)}
	w.b = append(w.b, magic...)
	w.str(string(doc.Kind))
	w.str(doc.VersionID)
	w.time(doc.GeneratedAt)
	d := &doc.Data
	w.uint(uint64(len(d.Routes)))
	for i := range d.Routes {
		r := &d.Routes[i]
		w.str(r.Target)
		w.str(r.Command)
		w.str(r.QueueARN)
		w.str(r.DLQARN)
		w.str(string(r.DedupeMode))
		w.int(r.ExpectedDrainSeconds)
		w.str(string(r.Profile))
		w.rate(r.RateLimit)
		w.bool(r.Fairness.Disabled)
		w.float(r.Fairness.DominantShare)
		w.float(r.Fairness.CompetingShare)
		w.int(int64(r.Fairness.CompetingSources))
		w.int(r.Fairness.WindowSeconds)
		w.int(r.Fairness.BanSeconds)
		w.int(int64(r.PrefetchLeases))
		w.uint(uint64(len(r.Metadata)))
		for _, k := range slices.Sorted(maps.Keys(r.Metadata)) {
			w.str(k)
			w.str(r.Metadata[k])
		}
		w.int(r.ExpiresAt)
		w.int(r.Version)
	}
	w.uint(uint64(len(d.ACLs)))
	for i := range d.ACLs {
		a := &d.ACLs[i]
		w.str(a.Source)
		w.str(a.Target)
		w.str(a.Command)
		w.bool(a.Allow)
		w.time(a.RevokedAt)
		w.str(string(a.Profile))
		w.int(a.FreshTTLSeconds)
		w.int(a.StaleTTLSeconds)
		w.int(a.ExpiresAt)
		w.int(a.Version)
	}
	w.uint(uint64(len(d.Keys)))
	for i := range d.Keys {
		k := &d.Keys[i]
		w.str(k.Source)
		w.uint(uint64(len(k.Versions)))
		for j := range k.Versions {
			v := &k.Versions[j]
			w.str(v.ID)
			w.str(string(v.Secret))
			w.time(v.ActivatedAt)
			w.time(v.NotAfter)
		}
		w.int(k.ExpiresAt)
		w.int(k.Version)
	}
	w.uint(uint64(len(d.Bans)))
	for i := range d.Bans {
		b := &d.Bans[i]
		w.str(b.Source)
		w.str(string(b.Kind))
		w.str(b.Reason)
		w.int(b.ExpiresAt)
		w.int(b.Version)
	}
	w.uint(uint64(len(d.Quotas)))
	for i := range d.Quotas {
		q := &d.Quotas[i]
		w.str(q.Source)
		w.str(q.Target)
		w.str(q.Command)
		w.rate(q.Limit)
		w.int(q.ExpiresAt)
		w.int(q.Version)
	}
	if w.err != nil {
		return nil, w.err
	}
	return w.b, nil
}

// Seal encodes doc and signs it with s (snapshot.Seal's framing).
func Seal(ctx context.Context, s snapshot.Signer, doc *snapshot.Document) ([]byte, error) {
	b, err := Encode(doc)
	if err != nil {
		return nil, err
	}
	return snapshot.Seal(ctx, s, b)
}

// Publish puts the sealed compact encoding of doc at path as doc's
// version and promotes it: the snapshot generator calls it after
// publishing the JSON documents.
func Publish(ctx context.Context, st snapshot.Store, s snapshot.Signer, path string, doc *snapshot.Document) error {
	b, err := Seal(ctx, s, doc)
	if err != nil {
		return err
	}
	if err := st.Put(ctx, path, doc.VersionID, b); err != nil {
		return fmt.Errorf("snapshotbin: put %s: %w", path, err)
	}
	if err := st.Promote(ctx, path, doc.VersionID); err != nil {
		return fmt.Errorf("snapshotbin: promote %s: %w", path, err)
	}
	return nil
}

// Parse checks a sealed compact file as snapshot.Parse checks a JSON one
// (o.Kind must be snapshot.KindFull) and returns its document: Decode,
// then Validate.
func Parse(b []byte, o snapshot.ParseOptions) (*snapshot.Document, error) {
	doc, err := Decode(b, o)
	if err != nil {
		return nil, err
	}
	if err := Validate(doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// Decode is Parse without registry.Validate: size cap, signature,
// decoding, kind and age. Strings of the document share one copy of the
// file's bytes. A cold start seeds the caches from it and runs Validate
// beside the first commands (docs/lambda.md, "Cold start").
func Decode(b []byte, o snapshot.ParseOptions) (doc *snapshot.Document, err error) {
	defer func() {
		if r := recover(); r != nil {
			doc, err = nil, &snapshot.LoadError{Reason: snapshot.ReasonMalformed, Detail: fmt.Sprintf("compact decoder panic: %v", r)}
		}
	}()
	max := o.MaxBytes
	if max <= 0 {
		max = snapshot.DefaultMaxBytes
	}
	if int64(len(b)) > max {
		return nil, &snapshot.LoadError{Reason: snapshot.ReasonTooLarge, Detail: fmt.Sprintf("%d bytes, cap %d", len(b), max)}
	}
	if o.Kind != snapshot.KindFull {
		return nil, &snapshot.LoadError{Reason: snapshot.ReasonWrongKind, Detail: "the compact encoding holds full documents only"}
	}
	// The signature's SHA-512 and the decoding each take about half of
	// Decode; they run side by side. The decoder reads the document where
	// the framing puts it (after the header, before the final '}'); its
	// result is used only if the signature verifies over exactly those
	// bytes, else the verified bytes are decoded again. Decoding unverified
	// bytes is safe: the decoder bounds every read and is fuzzed.
	type decoded struct {
		at  []byte
		doc *snapshot.Document
		err error
	}
	early := make(chan decoded, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				early <- decoded{err: fmt.Errorf("compact decoder panic: %v", r)}
			}
		}()
		i := bytes.Index(b[:min(len(b), 1024)], []byte(`"document":`+magic))
		if i < 0 || len(b) < 1 || b[len(b)-1] != '}' {
			early <- decoded{}
			return
		}
		at := b[i+len(`"document":`) : len(b)-1]
		d, err := decode(at)
		early <- decoded{at: at, doc: d, err: err}
	}()
	raw, err := snapshot.Open(b, o.Trusted)
	e := <-early
	if err != nil {
		return nil, err
	}
	d, derr := e.doc, e.err
	if len(e.at) != len(raw) || len(raw) == 0 || &e.at[0] != &raw[0] {
		d, derr = decode(raw)
	}
	if derr != nil {
		return nil, &snapshot.LoadError{Reason: snapshot.ReasonMalformed, Detail: "compact document", Err: derr}
	}
	if d.VersionID == "" || d.GeneratedAt.IsZero() {
		return nil, &snapshot.LoadError{Reason: snapshot.ReasonMalformed, Detail: "version_id and generated_at are required"}
	}
	if !o.Now.IsZero() {
		if o.MaxAge > 0 && o.Now.Sub(d.GeneratedAt) > o.MaxAge {
			return nil, &snapshot.LoadError{Reason: snapshot.ReasonExpired, Detail: fmt.Sprintf("generated at %s, more than %v before %s", d.GeneratedAt.Format(time.RFC3339), o.MaxAge, o.Now.Format(time.RFC3339))}
		}
		if d.GeneratedAt.Sub(o.Now) > snapshot.MaxFutureSkew {
			return nil, &snapshot.LoadError{Reason: snapshot.ReasonFuture, Detail: "generated_at " + d.GeneratedAt.Format(time.RFC3339) + " is in the future"}
		}
	}
	return d, nil
}

// Validate runs registry.Validate on doc's data; a failure is a
// *snapshot.LoadError with ReasonInvalid.
func Validate(doc *snapshot.Document) error {
	if err := validate(&doc.Data); err != nil {
		return &snapshot.LoadError{Reason: snapshot.ReasonInvalid, Detail: "registry data", Err: err}
	}
	return nil
}

// validate is registry.Validate with the routes checked beside the other
// records: Validate checks each kind on its own (no record refers to
// another kind), so the split finds the same problems, and on two or
// more cores the routes' queue ARNs cost no wall time of their own.
func validate(d *registry.Data) error {
	routes := make(chan error, 1)
	go func() { routes <- registry.Validate(&registry.Data{Routes: d.Routes}) }()
	rest := registry.Validate(&registry.Data{ACLs: d.ACLs, Keys: d.Keys, Bans: d.Bans, Quotas: d.Quotas})
	return errors.Join(<-routes, rest)
}

// decode reads the document bytes (after the signature was checked).
func decode(raw []byte) (*snapshot.Document, error) {
	if len(raw) < len(magic) || string(raw[:len(magic)]) != magic {
		return nil, fmt.Errorf("not a compact snapshot (no %s marker)", magic)
	}
	// One copy of the bytes as a string: every decoded string is a slice
	// of it, so decoding allocates per record, not per field.
	all := string(raw[len(magic):])
	r := reader{s: all}
	d := &snapshot.Document{Format: snapshot.Format}
	d.Kind = snapshot.Kind(r.str())
	if d.Kind != snapshot.KindFull {
		return nil, fmt.Errorf("kind %q, want %q", clip(string(d.Kind)), snapshot.KindFull)
	}
	d.VersionID = r.str()
	d.GeneratedAt = r.time()
	data := &d.Data
	if n := r.count(20); n > 0 {
		data.Routes = make([]registry.Route, n)
		for i := range data.Routes {
			x := &data.Routes[i]
			x.Target, x.Command, x.QueueARN, x.DLQARN = r.str(), r.str(), r.str(), r.str()
			x.DedupeMode = registry.DedupeMode(r.str())
			x.ExpectedDrainSeconds = r.int()
			x.Profile = registry.Profile(r.str())
			x.RateLimit = r.rate()
			x.Fairness.Disabled = r.bool()
			x.Fairness.DominantShare, x.Fairness.CompetingShare = r.float(), r.float()
			x.Fairness.CompetingSources = int(r.int())
			x.Fairness.WindowSeconds, x.Fairness.BanSeconds = r.int(), r.int()
			x.PrefetchLeases = int(r.int())
			if m := r.count(2); m > 0 {
				x.Metadata = make(map[string]string, m)
				for range m {
					k := r.str()
					x.Metadata[k] = r.str()
				}
			}
			x.ExpiresAt, x.Version = r.int(), r.int()
		}
	}
	if n := r.count(10); n > 0 {
		data.ACLs = make([]registry.ACL, n)
		for i := range data.ACLs {
			x := &data.ACLs[i]
			x.Source, x.Target, x.Command = r.str(), r.str(), r.str()
			x.Allow = r.bool()
			x.RevokedAt = r.time()
			x.Profile = registry.Profile(r.str())
			x.FreshTTLSeconds, x.StaleTTLSeconds = r.int(), r.int()
			x.ExpiresAt, x.Version = r.int(), r.int()
		}
	}
	if n := r.count(4); n > 0 {
		data.Keys = make([]registry.ServiceKey, n)
		for i := range data.Keys {
			x := &data.Keys[i]
			x.Source = r.str()
			if m := r.count(4); m > 0 {
				x.Versions = make([]registry.KeyVersion, m)
				for j := range x.Versions {
					v := &x.Versions[j]
					v.ID = r.str()
					v.Secret = []byte(r.str())
					v.ActivatedAt, v.NotAfter = r.time(), r.time()
				}
			}
			x.ExpiresAt, x.Version = r.int(), r.int()
		}
	}
	if n := r.count(5); n > 0 {
		data.Bans = make([]registry.Ban, n)
		for i := range data.Bans {
			x := &data.Bans[i]
			x.Source = r.str()
			x.Kind = registry.BanKind(r.str())
			x.Reason = r.str()
			x.ExpiresAt, x.Version = r.int(), r.int()
		}
	}
	if n := r.count(10); n > 0 {
		data.Quotas = make([]registry.Quota, n)
		for i := range data.Quotas {
			x := &data.Quotas[i]
			x.Source, x.Target, x.Command = r.str(), r.str(), r.str()
			x.Limit = r.rate()
			x.ExpiresAt, x.Version = r.int(), r.int()
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.s) != 0 {
		return nil, fmt.Errorf("%d bytes after the document", len(r.s))
	}
	return d, nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

type writer struct {
	b   []byte
	err error
}

func (w *writer) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *writer) int(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *writer) str(s string) {
	w.uint(uint64(len(s)))
	w.b = append(w.b, s...)
}
func (w *writer) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}
func (w *writer) float(f float64) { w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(f)) }
func (w *writer) time(t time.Time) {
	if !t.IsZero() && (t.Year() < 1678 || t.Year() > 2261) && w.err == nil {
		w.err = fmt.Errorf("snapshotbin: time %s is outside the encoding's years 1678 to 2261", t.Format(time.RFC3339))
	}
	w.bool(!t.IsZero())
	if !t.IsZero() {
		w.int(t.UnixNano())
	}
}
func (w *writer) rate(r registry.RateLimit) {
	w.int(r.Max)
	w.int(r.IntervalSeconds)
	w.int(r.Burst)
	w.int(r.CooldownSeconds)
}

// reader decodes from s; the first error sticks and every later read
// returns zero values, so decode checks once at the end.
type reader struct {
	s   string
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("truncated or corrupt at %s", what)
	}
	r.s = ""
}

func (r *reader) uint() uint64 {
	// binary.Uvarint on the string's bytes without copying them.
	v, n := binary.Uvarint(unsafe.Slice(unsafe.StringData(r.s), len(r.s)))
	if n <= 0 {
		r.fail("an unsigned integer")
		return 0
	}
	r.s = r.s[n:]
	return v
}

func (r *reader) int() int64 {
	v, n := binary.Varint(unsafe.Slice(unsafe.StringData(r.s), len(r.s)))
	if n <= 0 {
		r.fail("an integer")
		return 0
	}
	r.s = r.s[n:]
	return v
}

// count reads a record count, refusing one that the remaining bytes
// cannot hold at minBytes a record (a corrupt count must not allocate).
func (r *reader) count(minBytes int) int {
	n := r.uint()
	if n > uint64(len(r.s)/minBytes) {
		r.fail("a count")
		return 0
	}
	return int(n)
}

func (r *reader) str() string {
	n := r.uint()
	if n > uint64(len(r.s)) {
		r.fail("a string")
		return ""
	}
	s := r.s[:n]
	r.s = r.s[n:]
	return s
}

func (r *reader) bool() bool {
	if len(r.s) < 1 || r.s[0] > 1 {
		r.fail("a bool")
		return false
	}
	v := r.s[0] == 1
	r.s = r.s[1:]
	return v
}

func (r *reader) float() float64 {
	if len(r.s) < 8 {
		r.fail("a number")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64([]byte(r.s[:8])))
	r.s = r.s[8:]
	return v
}

func (r *reader) time() time.Time {
	if !r.bool() {
		return time.Time{}
	}
	return time.Unix(0, r.int()).UTC()
}

func (r *reader) rate() registry.RateLimit {
	return registry.RateLimit{Max: r.int(), IntervalSeconds: r.int(), Burst: r.int(), CooldownSeconds: r.int()}
}
