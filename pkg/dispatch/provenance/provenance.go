// Package provenance signs what the dispatcher delivers to a target's
// queue, so that the target's consumer, and a replay from a dead-letter
// queue, can tell a message the dispatcher delivered from one that anybody
// else allowed to send to the queue put there. docs/security/delivery-signature.md
// describes the scheme and carries its test vectors.
//
// Scheme v1 is HMAC-SHA256 under a key per target, derived from one
// platform-held master secret: a target's key verifies that target's
// messages and cannot sign another target's.
package provenance

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
	"sync"
)

// Scheme names the signed bytes' format; it starts every canonical form.
const Scheme = "snavio-delivery-v1"

// Message attributes of a delivered message: the four the sender has
// always set, and the two that carry the signature.
const (
	AttrCommandID = "snavio.command_id"
	AttrSource    = "snavio.source"
	AttrTarget    = "snavio.target"
	AttrCommand   = "snavio.command_name"
	// AttrSignature is "v1=" + base64url (no padding) of the HMAC.
	AttrSignature = "snavio.signature"
	// AttrKeyID names the master secret the target's key was derived from.
	AttrKeyID = "snavio.signature_key"
)

// Sizes.
const (
	// MinMasterLen is the shortest master secret accepted (bytes).
	MinMasterLen = 32
	// KeyLen is a target's verification key's length (bytes).
	KeyLen = sha256.Size
	// DefaultMaxTargets bounds the targets whose keyed HMAC state a
	// Signer keeps (NewSigner).
	DefaultMaxTargets = 4096
)

const (
	sigPrefix     = "v1="
	keyIDPrefix   = "d1-"
	derivePrefix  = Scheme + "/target/"
	encodedSigLen = len(sigPrefix) + 43 // base64url of 32 bytes, no padding
)

// Refusal reasons: why a message is not one the dispatcher delivered (or
// not to this target). A replay from a dead-letter queue lists a refused
// message with its reason and never sends it.
const (
	// ReasonUnsigned: the message carries no signature.
	ReasonUnsigned = "unsigned"
	// ReasonBadSignature: the signature does not match the message, or is
	// malformed.
	ReasonBadSignature = "bad_delivery_signature"
	// ReasonUnknownKey: the signature names a key this verifier does not
	// hold.
	ReasonUnknownKey = "unknown_delivery_key"
	// ReasonForeignTarget: a genuine signature, made for another target
	// than the one verifying (a message copied from another target's
	// queue).
	ReasonForeignTarget = "foreign_delivery_target"
)

// Verification errors; each error Verify returns wraps one of these.
var (
	ErrUnsigned      = errors.New(ReasonUnsigned)
	ErrBadSignature  = errors.New(ReasonBadSignature)
	ErrUnknownKey    = errors.New(ReasonUnknownKey)
	ErrForeignTarget = errors.New(ReasonForeignTarget)
)

// Reason returns the refusal reason of an error Verify returned ("" for
// nil and for errors that are not a verification failure).
func Reason(err error) string {
	for _, e := range []error{ErrUnsigned, ErrBadSignature, ErrUnknownKey, ErrForeignTarget} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return ""
}

// Message is a delivered message as far as its signature goes: its body
// and the attributes the signature covers or carries.
type Message struct {
	// KeyID and Signature carry the signature (AttrKeyID, AttrSignature).
	KeyID, Signature string
	// The signed attributes; none may contain a newline.
	CommandID, Source, Target, Command string
	// Body is the message body exactly as delivered.
	Body []byte
}

// FromAttributes is the message of a delivered body and its attributes
// (absent ones are empty).
func FromAttributes(attrs map[string]string, body []byte) Message {
	return Message{
		KeyID: attrs[AttrKeyID], Signature: attrs[AttrSignature],
		CommandID: attrs[AttrCommandID], Source: attrs[AttrSource], Target: attrs[AttrTarget], Command: attrs[AttrCommand],
		Body: body,
	}
}

// Attributes returns m's six attributes, as the sender sets them.
func (m *Message) Attributes() map[string]string {
	return map[string]string{
		AttrCommandID: m.CommandID, AttrSource: m.Source, AttrTarget: m.Target, AttrCommand: m.Command,
		AttrSignature: m.Signature, AttrKeyID: m.KeyID,
	}
}

// AppendCanonical appends the bytes m's signature covers:
//
//	"snavio-delivery-v1\n" key_id "\n" command_id "\n" source "\n" target "\n" command_name "\n" body
//
// The attributes are separated by newlines and the body comes last, so no
// two messages share a canonical form; an attribute containing a newline
// is an error.
func AppendCanonical(dst []byte, m *Message) ([]byte, error) {
	for _, f := range [...]struct{ name, v string }{
		{AttrKeyID, m.KeyID}, {AttrCommandID, m.CommandID}, {AttrSource, m.Source}, {AttrTarget, m.Target}, {AttrCommand, m.Command},
	} {
		if strings.IndexByte(f.v, '\n') >= 0 {
			return dst, fmt.Errorf("provenance: attribute %s contains a newline, which the signed form cannot hold", f.name)
		}
	}
	dst = append(dst, Scheme...)
	for _, v := range [...]string{m.KeyID, m.CommandID, m.Source, m.Target, m.Command} {
		dst = append(dst, '\n')
		dst = append(dst, v...)
	}
	dst = append(dst, '\n')
	return append(dst, m.Body...), nil
}

// KeyID names a master secret: "d1-" and the first 8 hex digits of its
// SHA-256. It tells a verifier which master a target's key must come from
// (after a rotation, the old and the new differ).
func KeyID(master []byte) string {
	sum := sha256.Sum256(master)
	return keyIDPrefix + hex.EncodeToString(sum[:4])
}

// DeriveKey returns target's verification key:
// HMAC-SHA256(master, "snavio-delivery-v1/target/" + target).
func DeriveKey(master []byte, target string) [KeyLen]byte {
	h := hmac.New(sha256.New, master)
	h.Write([]byte(derivePrefix))
	h.Write([]byte(target))
	var k [KeyLen]byte
	h.Sum(k[:0])
	return k
}

// Key is a target's verification key as the platform hands it to the
// target's team.
type Key struct {
	// Target is the one target whose messages the key verifies.
	Target string
	// ID is the key id the target's messages carry in AttrKeyID.
	ID string
	// Secret is the HMAC key (KeyLen bytes).
	Secret []byte
}

// Verify checks that m was delivered by the dispatcher to k's target:
// signed, with k's key id, by k's secret, for k's target. Every error
// wraps ErrUnsigned, ErrUnknownKey, ErrForeignTarget or ErrBadSignature.
// It computes one HMAC-SHA256 and compares in constant time.
func Verify(k Key, m *Message) error {
	if err := precheck(k.ID, m); err != nil {
		return err
	}
	if m.Target != k.Target {
		return fmt.Errorf("%w: the message was signed for target %q, this key verifies %q", ErrForeignTarget, m.Target, k.Target)
	}
	if len(k.Secret) != KeyLen {
		return fmt.Errorf("provenance: a verification key is %d bytes, got %d", KeyLen, len(k.Secret))
	}
	_, err := check(hmac.New(sha256.New, k.Secret), nil, new([sha256.Size]byte), m)
	return err
}

// precheck refuses an unsigned message and one signed with another key id.
func precheck(keyID string, m *Message) error {
	if m.Signature == "" {
		return fmt.Errorf("%w: the message has no %s attribute", ErrUnsigned, AttrSignature)
	}
	if m.KeyID != keyID {
		return fmt.Errorf("%w: the message names key %q in %s; this verifier holds %q", ErrUnknownKey, m.KeyID, AttrKeyID, keyID)
	}
	return nil
}

// check computes m's HMAC with h (keyed, reset) into want and compares it
// with m.Signature. buf is scratch space, returned (grown) for reuse.
func check(h hash.Hash, buf []byte, want *[sha256.Size]byte, m *Message) ([]byte, error) {
	enc, ok := strings.CutPrefix(m.Signature, sigPrefix)
	if !ok || len(m.Signature) != encodedSigLen {
		return buf, fmt.Errorf("%w: %s must be %q followed by 43 base64url characters", ErrBadSignature, AttrSignature, sigPrefix)
	}
	var got [sha256.Size]byte
	var text [encodedSigLen - len(sigPrefix)]byte
	copy(text[:], enc)
	// One signature has one spelling: the text must be what encoding the
	// decoded bytes gives back (no stray padding bits in the last
	// character).
	var again [len(text)]byte
	if n, err := base64.RawURLEncoding.Decode(got[:], text[:]); err != nil || n != len(got) {
		return buf, fmt.Errorf("%w: %s is not base64url without padding", ErrBadSignature, AttrSignature)
	}
	if base64.RawURLEncoding.Encode(again[:], got[:]); again != text {
		return buf, fmt.Errorf("%w: %s is not base64url without padding", ErrBadSignature, AttrSignature)
	}
	buf, err := sum(h, buf, m, want[:0])
	if err != nil {
		return buf, fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	if !hmac.Equal(got[:], want[:]) {
		return buf, fmt.Errorf("%w: the signature does not match the message's body and attributes", ErrBadSignature)
	}
	return buf, nil
}

// sum appends m's HMAC under h to dst; buf is scratch space for the
// canonical form's attributes (the body is written as it is), returned
// for reuse.
func sum(h hash.Hash, buf []byte, m *Message, dst []byte) ([]byte, error) {
	head := *m
	head.Body = nil
	buf, err := AppendCanonical(buf[:0], &head)
	if err != nil {
		return buf, err
	}
	h.Reset()
	h.Write(buf)
	h.Write(m.Body)
	h.Sum(dst)
	return buf, nil
}

// Signer signs delivered messages and verifies them on the platform's
// side (a replay from a dead-letter queue) with keys derived from one
// master secret. It keeps each target's keyed HMAC state, for at most
// DefaultMaxTargets targets, so that signing allocates only the signature
// string. Safe for concurrent use.
type Signer struct {
	id     string
	master []byte
	max    int

	mu      sync.RWMutex
	targets map[string]*targetState
}

// targetState is one target's key and a pool of HMAC states keyed with it.
type targetState struct {
	key  [KeyLen]byte
	pool sync.Pool // *state
}

type state struct {
	h   hash.Hash
	buf []byte
	sum [sha256.Size]byte
	out [encodedSigLen]byte
}

// NewSigner returns a Signer for master (at least MinMasterLen bytes,
// copied).
func NewSigner(master []byte) (*Signer, error) {
	if len(master) < MinMasterLen {
		return nil, fmt.Errorf("provenance: the master secret is %d bytes; it needs at least %d random bytes", len(master), MinMasterLen)
	}
	return &Signer{id: KeyID(master), master: append([]byte(nil), master...), max: DefaultMaxTargets, targets: map[string]*targetState{}}, nil
}

// ID is the key id of the signer's master (AttrKeyID).
func (s *Signer) ID() string { return s.id }

// Key returns target's verification key, for its team's consumer.
func (s *Signer) Key(target string) (Key, error) {
	if target == "" || strings.IndexByte(target, '\n') >= 0 {
		return Key{}, fmt.Errorf("provenance: target %q: a target is a non-empty name without newlines", target)
	}
	k := DeriveKey(s.master, target)
	return Key{Target: target, ID: s.id, Secret: k[:]}, nil
}

// Sign signs m for its target: it sets m.KeyID to the signer's key id and
// m.Signature to the signature. An attribute that contains a newline, or
// an empty one, is an error and leaves m unsigned.
func (s *Signer) Sign(m *Message) error {
	if m.CommandID == "" || m.Source == "" || m.Target == "" || m.Command == "" {
		return errors.New("provenance: a delivered message needs its command id, source, target and command name to be signed")
	}
	if strings.IndexByte(m.Target, '\n') >= 0 {
		return fmt.Errorf("provenance: attribute %s contains a newline, which the signed form cannot hold", AttrTarget)
	}
	st, ts := s.get(m.Target)
	defer ts.pool.Put(st)
	signed := *m
	signed.KeyID = s.id
	var err error
	if st.buf, err = sum(st.h, st.buf, &signed, st.sum[:0]); err != nil {
		return err
	}
	copy(st.out[:], sigPrefix)
	base64.RawURLEncoding.Encode(st.out[len(sigPrefix):], st.sum[:])
	m.KeyID, m.Signature = s.id, string(st.out[:])
	return nil
}

// Verify checks that m was signed by this signer's master for m's own
// target. It does not say whether m belongs where it was found: a caller
// that knows which targets a queue serves checks m.Target (see
// ErrForeignTarget). Errors as the package's Verify.
func (s *Signer) Verify(m *Message) error {
	if err := precheck(s.id, m); err != nil {
		return err
	}
	// A target the signer has not signed for lately (such as one a planted
	// message names) gets a state of its own, so that it does not take a
	// place in the cache.
	s.mu.RLock()
	ts := s.targets[m.Target]
	s.mu.RUnlock()
	if ts == nil {
		k := DeriveKey(s.master, m.Target)
		_, err := check(hmac.New(sha256.New, k[:]), nil, new([sha256.Size]byte), m)
		return err
	}
	st := ts.state()
	defer ts.pool.Put(st)
	var err error
	st.buf, err = check(st.h, st.buf, &st.sum, m)
	return err
}

// get returns a keyed HMAC state for target from its pool, making the
// target's entry on first use. When s.max targets are kept, one is dropped
// to make room.
func (s *Signer) get(target string) (*state, *targetState) {
	s.mu.RLock()
	ts := s.targets[target]
	s.mu.RUnlock()
	if ts == nil {
		ts = &targetState{key: DeriveKey(s.master, target)}
		s.mu.Lock()
		if cur := s.targets[target]; cur != nil {
			ts = cur
		} else {
			if len(s.targets) >= s.max {
				for t := range s.targets {
					delete(s.targets, t)
					break
				}
			}
			s.targets[strings.Clone(target)] = ts
		}
		s.mu.Unlock()
	}
	return ts.state(), ts
}

// state returns a keyed HMAC state from the pool, or a new one.
func (ts *targetState) state() *state {
	if st, ok := ts.pool.Get().(*state); ok {
		return st
	}
	return &state{h: hmac.New(sha256.New, ts.key[:]), buf: make([]byte, 0, 512)}
}
