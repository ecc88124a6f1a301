package dashboard

import (
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func TestSessionsExpireWhenIdle(t *testing.T) {
	clk := clock.NewFake(t0)
	s := NewSessions(SessionOptions{Idle: 10 * time.Minute, Lifetime: time.Hour}, clk)
	id, created := s.Create("tok")
	clk.Advance(9 * time.Minute)
	got, ok := s.Get(id)
	if !ok || got.Token != "tok" || got.CSRF != created.CSRF {
		t.Fatalf("Get after 9 min = %+v, %v; want the session", got, ok)
	}
	clk.Advance(9 * time.Minute) // 9 min since the last use: still live
	if _, ok := s.Get(id); !ok {
		t.Fatal("a used session expired before its idle time")
	}
	clk.Advance(10 * time.Minute)
	if _, ok := s.Get(id); ok {
		t.Fatal("a session idle for 10 min is still live")
	}
	if s.Len() != 0 {
		t.Fatalf("expired session kept: %d stored", s.Len())
	}
}

func TestSessionsEndAtTheirLifetimeEvenWhenUsed(t *testing.T) {
	clk := clock.NewFake(t0)
	s := NewSessions(SessionOptions{Idle: 10 * time.Minute, Lifetime: 30 * time.Minute}, clk)
	id, _ := s.Create("tok")
	for range 5 {
		clk.Advance(5 * time.Minute)
		if _, ok := s.Get(id); !ok {
			t.Fatalf("session ended early at %v", clk.Now().Sub(t0))
		}
	}
	clk.Advance(5 * time.Minute)
	if _, ok := s.Get(id); ok {
		t.Fatal("a session older than its lifetime is still live")
	}
}

func TestSessionsAreBoundedAndEvictTheLeastRecentlyUsed(t *testing.T) {
	clk := clock.NewFake(t0)
	s := NewSessions(SessionOptions{Max: 3}, clk)
	a, _ := s.Create("a")
	clk.Advance(time.Second)
	b, _ := s.Create("b")
	clk.Advance(time.Second)
	c, _ := s.Create("c")
	clk.Advance(time.Second)
	s.Get(a) // a is now the most recently used; b the least
	clk.Advance(time.Second)
	d, _ := s.Create("d")
	if s.Len() != 3 {
		t.Fatalf("%d sessions stored, want at most 3", s.Len())
	}
	if _, ok := s.Get(b); ok {
		t.Fatal("the least recently used session survived")
	}
	for _, id := range []string{a, c, d} {
		if _, ok := s.Get(id); !ok {
			t.Fatal("a more recently used session was evicted")
		}
	}
}

func TestSessionsCreateSweepsExpired(t *testing.T) {
	clk := clock.NewFake(t0)
	s := NewSessions(SessionOptions{Idle: time.Minute}, clk)
	for range 10 {
		s.Create("x")
	}
	clk.Advance(time.Minute)
	s.Create("y")
	if s.Len() != 1 {
		t.Fatalf("%d sessions after the sweep, want 1", s.Len())
	}
}

func TestSessionsDeleteAndUnknown(t *testing.T) {
	s := NewSessions(SessionOptions{}, clock.NewFake(t0))
	id, sess := s.Create("tok")
	if id == sess.CSRF || len(id) < 40 || len(sess.CSRF) < 40 {
		t.Fatalf("cookie %q and CSRF token %q: want two distinct 256-bit secrets", id, sess.CSRF)
	}
	for _, bad := range []string{"", "nope", id + "x"} {
		if _, ok := s.Get(bad); ok {
			t.Fatalf("Get(%q) found a session", bad)
		}
	}
	s.Delete(id)
	if _, ok := s.Get(id); ok {
		t.Fatal("a deleted session is still live")
	}
}
