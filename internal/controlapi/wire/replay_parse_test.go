package wire

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func TestParseReplayOrigin(t *testing.T) {
	for in, want := range map[string]string{"archive": "archive", "dlq:mailer-dlq": "dlq:mailer-dlq", "dlq:A_1": "dlq:A_1"} {
		o, err := ParseReplayOrigin(in)
		if err != nil || o.String() != want {
			t.Errorf("ParseReplayOrigin(%q) = %v, %v", in, o, err)
		}
	}
	for in, msg := range map[string]string{
		"s3:bucket": "unknown --from", "dlq:": "1 to 80", "dlq:a/b": "not allowed", "Archive": "unknown --from",
		"dlq:" + strings.Repeat("q", 81): "1 to 80", "": "unknown --from", "dlq:x.fifo": "not allowed",
	} {
		if _, err := ParseReplayOrigin(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseReplayOrigin(%q) = %v, want %q", in, err, msg)
		}
	}
}

func TestParseReplayRate(t *testing.T) {
	for in, want := range map[string]float64{"50/s": 50, "600/m": 10, "3600/h": 1, "0.5/s": 0.5, "10000/s": 10000} {
		r, err := ParseReplayRate(in)
		if err != nil || r != want {
			t.Errorf("ParseReplayRate(%q) = %v, %v, want %v", in, r, err, want)
		}
	}
	for _, in := range []string{"50", "0/s", "-1/s", "fast/s", "5/d", "10001/s", "NaN/s", "Inf/s", "0x10/s", "1e9/s", "0.1/h", "/s", ""} {
		if _, err := ParseReplayRate(in); err == nil || !strings.Contains(err.Error(), "--rate") {
			t.Errorf("ParseReplayRate(%q) accepted or unclear: %v", in, err)
		}
	}
}

func TestParseReplayRange(t *testing.T) {
	now := t0
	s, e, err := ParseReplayRange("2h", "2026-11-21T11:30:00Z", now)
	if err != nil || !s.Equal(now.Add(-2*time.Hour)) || !e.Equal(time.Date(2026, 11, 21, 11, 30, 0, 0, time.UTC)) {
		t.Fatalf("ParseReplayRange = %v %v %v", s, e, err)
	}
	if s, _, err := ParseReplayRange("3d", "", now); err != nil || !s.Equal(now.Add(-72*time.Hour)) {
		t.Fatalf("3d = %v %v", s, err)
	}
	for _, c := range [][2]string{{"1h", "2h"}, {"yesterday", ""}, {"", "-5m"}, {"2026-13-01T00:00:00Z", ""}, {"1999-01-01T00:00:00Z", ""}, {"2030-01-01T00:00:00Z", ""}, {"0s", ""}, {"99999d", ""}} {
		if _, _, err := ParseReplayRange(c[0], c[1], now); err == nil {
			t.Errorf("ParseReplayRange(%q, %q) accepted", c[0], c[1])
		}
	}
	if _, _, err := ParseReplayRange("1h", "2h", now); err == nil || !strings.Contains(err.Error(), "bad time range") {
		t.Errorf("reversed range: %v", err)
	}
}

func FuzzParseReplayOrigin(f *testing.F) {
	for _, s := range []string{"archive", "dlq:mailer-dlq", "dlq:", "dlq:\xff", "s3:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseReplayOrigin(s)
		if err != nil {
			if !utf8.ValidString(err.Error()) && utf8.ValidString(s) {
				t.Fatalf("error is not UTF-8: %q", err)
			}
			return
		}
		// What parses prints back the same and parses to the same.
		if o.String() != s {
			t.Fatalf("ParseReplayOrigin(%q).String() = %q", s, o.String())
		}
		if o2, err := ParseReplayOrigin(o.String()); err != nil || o2 != o {
			t.Fatalf("round trip of %q: %v %v", s, o2, err)
		}
	})
}

func FuzzParseReplayRate(f *testing.F) {
	for _, s := range []string{"50/s", "600/m", "1/h", "0/s", "1e4/s", "NaN/s", "-0/s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseReplayRate(s)
		if err != nil {
			return
		}
		if r <= 0 || r > ReplayMaxRate || r != r {
			t.Fatalf("ParseReplayRate(%q) = %v: outside (0, %d]", s, r, ReplayMaxRate)
		}
	})
}

func FuzzParseReplayRange(f *testing.F) {
	for _, c := range [][2]string{{"2h", ""}, {"2026-11-21T10:00:00Z", "2026-11-21T11:00:00Z"}, {"3d", "1h"}, {"1h", "2h"}, {"", ""}} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, start, end string) {
		s, e, err := ParseReplayRange(start, end, t0)
		if err != nil {
			return
		}
		if !s.IsZero() && !e.IsZero() && !s.Before(e) {
			t.Fatalf("ParseReplayRange(%q, %q) = %v, %v: start not before end", start, end, s, e)
		}
		for _, x := range []time.Time{s, e} {
			if !x.IsZero() && (x.Year() < 2000 || x.After(t0.Add(24*time.Hour))) {
				t.Fatalf("ParseReplayRange(%q, %q) gave %v: out of range", start, end, x)
			}
		}
	})
}
