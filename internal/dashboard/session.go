package dashboard

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// Session is a signed-in browser: the bearer token it signed in with
// (kept only here, never in the cookie, and authenticated again on every
// request so that a revoked token ends the session at once) and the CSRF
// token its forms carry.
type Session struct {
	Token string
	CSRF  string
	// Created and Seen bound the session's life (SessionOptions).
	Created, Seen time.Time
}

// SessionOptions bound the session store. Zero fields take the defaults.
type SessionOptions struct {
	// Max is how many sessions are kept (default 1024); signing in past it
	// ends the least recently used session.
	Max int
	// Idle ends a session unused this long (default 30 min); Lifetime
	// ends any session this old (default 12 h).
	Idle, Lifetime time.Duration
}

// Sessions is the server-side session store: bounded, expiring, keyed by
// the SHA-256 of the cookie value (a lookup compares digests, not the
// secret). Safe for concurrent use.
type Sessions struct {
	o   SessionOptions
	clk clock.Clock
	mu  sync.Mutex
	m   map[[sha256.Size]byte]*Session
}

// NewSessions returns an empty store.
func NewSessions(o SessionOptions, clk clock.Clock) *Sessions {
	if o.Max <= 0 {
		o.Max = 1024
	}
	if o.Idle <= 0 {
		o.Idle = 30 * time.Minute
	}
	if o.Lifetime <= 0 {
		o.Lifetime = 12 * time.Hour
	}
	if clk == nil {
		clk = clock.System()
	}
	return &Sessions{o: o, clk: clk, m: map[[sha256.Size]byte]*Session{}}
}

// newSecret returns 32 random bytes, base64url: a cookie value or a CSRF
// token.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Create starts a session for token and returns its cookie value.
func (s *Sessions) Create(token string) (string, Session) {
	id := newSecret()
	now := s.clk.Now()
	sess := &Session{Token: token, CSRF: newSecret(), Created: now, Seen: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	if len(s.m) >= s.o.Max {
		var oldest [sha256.Size]byte
		first := true
		for k, v := range s.m {
			if first || v.Seen.Before(s.m[oldest].Seen) {
				oldest, first = k, false
			}
		}
		delete(s.m, oldest)
	}
	s.m[sha256.Sum256([]byte(id))] = sess
	return id, *sess
}

// Get returns the live session of cookie value id and marks it used.
func (s *Sessions) Get(id string) (Session, bool) {
	if id == "" {
		return Session{}, false
	}
	k := sha256.Sum256([]byte(id))
	now := s.clk.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[k]
	if !ok {
		return Session{}, false
	}
	if s.expired(sess, now) {
		delete(s.m, k)
		return Session{}, false
	}
	sess.Seen = now
	return *sess, true
}

// Delete ends the session of cookie value id (sign-out).
func (s *Sessions) Delete(id string) {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
}

// Len returns how many sessions are stored (expired ones until the next
// Create sweeps them).
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

func (s *Sessions) expired(sess *Session, now time.Time) bool {
	return now.Sub(sess.Seen) >= s.o.Idle || now.Sub(sess.Created) >= s.o.Lifetime
}

// expireLocked drops the expired sessions; Create calls it, so the store
// never holds more than Max sessions, live or not.
func (s *Sessions) expireLocked(now time.Time) {
	for k, v := range s.m {
		if s.expired(v, now) {
			delete(s.m, k)
		}
	}
}
