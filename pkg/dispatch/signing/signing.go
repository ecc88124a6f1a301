// Package signing is the one message-signature scheme of Snavio, shared by
// every producer (snavio send, the replayer, SDKs in other languages) and by
// the dispatcher's shield.
//
// The signature is HMAC-SHA256, keyed with the producer service's secret,
// over a versioned, length-prefixed framing of the fields that decide what a
// message does: the key version, the command id, the timestamp string as
// sent, the sender (bus source), the target, the command name and the
// RFC 8785 canonical form of the payload. Signing the id and the target as
// well as what the spec lists (payload, timestamp, name) means a captured
// message can be neither re-pointed at another target nor given a fresh id
// to slip past deduplication inside the replay window. The byte format is in
// docs/security/signing.md; testdata/vectors.json holds test vectors.
package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"strconv"
	"sync"

	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/jcs"
	"github.com/snavio/snavio/pkg/dispatch/reason"
)

// Scheme is the version tag that starts the signed content. A future
// incompatible scheme gets a new tag.
const Scheme = "snavio-hmac-sha256-v1"

// MinSecretLen is the shortest accepted secret, in bytes (256 bits).
const MinSecretLen = 32

// Message is what a signature covers. Source is the bus source
// <tenant-id>/<service> the message is sent with. Payload may be any valid
// JSON; it is signed in canonical form.
type Message struct {
	ID        string
	Timestamp string
	Source    string
	Target    string
	Name      string
	// Replay, ReplayID and ReplayReason are the replay metadata; for live
	// traffic they are false and empty.
	Replay       bool
	ReplayID     string
	ReplayReason string
	Payload      []byte
	// PayloadCanonical may be set when Payload is known to be in RFC 8785
	// form already (envelope.Parser guarantees it); the canonical check is
	// then skipped. A false claim cannot make a forgery pass: the bytes are
	// signed as given, so the signature just disagrees with the producer's.
	PayloadCanonical bool
}

// FromEnvelope returns the Message an envelope sent by source carries.
func FromEnvelope(e *envelope.Envelope, source string) Message {
	return Message{
		ID: e.Metadata.ID, Timestamp: e.Metadata.Timestamp, Source: source,
		Target: e.Command.Target, Name: e.Command.Name,
		Replay: e.Metadata.Replay, ReplayID: e.Metadata.ReplayID, ReplayReason: e.Metadata.ReplayReason,
		Payload: e.Command.Payload,
	}
}

// AppendContent appends the exact bytes that are signed for message m
// under key version versionID:
//
//	Scheme, 0x0A, then for each of versionID, ID, Timestamp, Source,
//	Target, Name, replay ("true" or ""), ReplayID, ReplayReason and the
//	canonical payload: its length as a 4-byte big-endian unsigned integer
//	followed by its bytes.
//
// It fails only if the payload is not valid JSON or has duplicate names.
func AppendContent(dst []byte, versionID string, m *Message) ([]byte, error) {
	dst = appendHead(dst, versionID, m)
	if m.PayloadCanonical {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.Payload)))
		return append(dst, m.Payload...), nil
	}
	n := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, 0)
	out, err := jcs.Append(dst, m.Payload, jcs.Limits{})
	if err != nil {
		return dst[:n], reason.New(reason.InvalidPayload, "command.payload",
			"is not valid JSON that can be canonicalized (RFC 8785): "+err.Error())
	}
	binary.BigEndian.PutUint32(out[n:], uint32(len(out)-n-4))
	return out, nil
}

// appendHead appends the signed content up to the payload's length.
func appendHead(dst []byte, versionID string, m *Message) []byte {
	dst = append(dst, Scheme...)
	dst = append(dst, '\n')
	replay := ""
	if m.Replay {
		replay = "true"
	}
	for _, f := range [...]string{versionID, m.ID, m.Timestamp, m.Source, m.Target, m.Name, replay, m.ReplayID, m.ReplayReason} {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(f)))
		dst = append(dst, f...)
	}
	return dst
}

// Key is one version of a service's secret, ready to sign and verify. Its
// methods are safe for concurrent use; it keeps a pool of keyed HMAC states
// so that each signature costs one HMAC and no key setup. The secret is not
// retrievable from a Key.
type Key struct {
	versionID string
	badSig    *reason.Error // shared: reason.Error values are immutable
	pool      sync.Pool     // *macState
}

type macState struct {
	h   hash.Hash
	buf []byte
	sum [sha256.Size]byte
	sig [sha256.Size]byte
}

// NewKey returns a Key for secret under versionID (for example "hmac-v2").
// The secret must be at least MinSecretLen bytes; NewKey copies it.
func NewKey(versionID string, secret []byte) (*Key, error) {
	if !envelope.ValidVersionID(versionID) {
		return nil, errors.New("signing: key version id " + strconv.Quote(versionID) + " is not of the form hmac-v<N>")
	}
	if len(secret) < MinSecretLen {
		return nil, errors.New("signing: secret for " + versionID + " is " + strconv.Itoa(len(secret)) +
			" bytes; use at least " + strconv.Itoa(MinSecretLen) + " random bytes")
	}
	s := append([]byte(nil), secret...)
	k := &Key{versionID: versionID, badSig: reason.New(reason.BadSignature, "metadata.hmac",
		"does not match the message signed with "+versionID+
			": sign version, id, timestamp, source, target, name and the canonical payload as docs/security/signing.md describes, with the secret of that version")}
	k.pool.New = func() any { return &macState{h: hmac.New(sha256.New, s)} }
	return k, nil
}

// VersionID returns the key's version id.
func (k *Key) VersionID() string { return k.versionID }

// mac computes the signature of m into st.sum. It is the only place a
// signature is computed, for signing and verifying alike.
func (k *Key) mac(st *macState, m *Message) error {
	st.h.Reset()
	if m.PayloadCanonical {
		// The payload goes to the hash from where it is, not through a
		// copy in st.buf: the same bytes as AppendContent's.
		st.buf = appendHead(st.buf[:0], k.versionID, m)
		st.buf = binary.BigEndian.AppendUint32(st.buf, uint32(len(m.Payload)))
		st.h.Write(st.buf)
		st.h.Write(m.Payload)
	} else {
		var err error
		st.buf, err = AppendContent(st.buf[:0], k.versionID, m)
		if err != nil {
			return err
		}
		st.h.Write(st.buf)
	}
	st.h.Sum(st.sum[:0])
	return nil
}

func (k *Key) get() *macState { return k.pool.Get().(*macState) }

func (k *Key) put(st *macState) {
	if cap(st.buf) > 64<<10 {
		st.buf = nil // do not pin one huge payload's buffer
	}
	k.pool.Put(st)
}

// Sign returns the signature of m: 64 lowercase hex digits.
func (k *Key) Sign(m *Message) (string, error) {
	st := k.get()
	defer k.put(st)
	if err := k.mac(st, m); err != nil {
		return "", err
	}
	return hex.EncodeToString(st.sum[:]), nil
}

// Verify checks sig, the hex signature sent in metadata.hmac, against m in
// constant time. It returns nil if it matches, a *reason.Error with code
// BadSignature if it does not, InvalidHMAC if sig is not 64 lowercase hex
// digits, or InvalidPayload if the payload cannot be canonicalized.
func (k *Key) Verify(m *Message, sig string) error {
	st := k.get()
	defer k.put(st)
	if !envelope.ValidHMAC(sig) {
		return reason.New(reason.InvalidHMAC, "metadata.hmac", "must be 64 lowercase hex digits")
	}
	for i := range st.sig {
		st.sig[i] = unhex(sig[2*i])<<4 | unhex(sig[2*i+1])
	}
	if err := k.mac(st, m); err != nil {
		return err
	}
	if !hmac.Equal(st.sum[:], st.sig[:]) {
		return k.badSig
	}
	return nil
}

// SignEnvelope signs e as sent by source and sets its metadata.hmac and
// metadata.version_id. Producers call it after filling every other field.
func (k *Key) SignEnvelope(e *envelope.Envelope, source string) error {
	m := FromEnvelope(e, source)
	sig, err := k.Sign(&m)
	if err != nil {
		return err
	}
	e.Metadata.HMAC = sig
	e.Metadata.VersionID = k.versionID
	return nil
}

// VerifyEnvelope verifies e's metadata.hmac for sender source; see Verify.
// It does not look at metadata.version_id: choosing the key by version is
// the caller's job.
func (k *Key) VerifyEnvelope(e *envelope.Envelope, source string) error {
	m := FromEnvelope(e, source)
	return k.Verify(&m, e.Metadata.HMAC)
}

// unhex decodes one lowercase hex digit already validated by ValidHMAC.
func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}
