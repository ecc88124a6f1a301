package storecodec

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"
)

// TestReaderRoundTrip reads back what the append functions wrote, and
// the first failure sticks.
func TestReaderRoundTrip(t *testing.T) {
	b := []byte{V1}
	b = binary.BigEndian.AppendUint64(b, 42)
	b = binary.BigEndian.AppendUint32(b, 7)
	b = AppendStr(b, "queue")
	b = append(b, "rest"...)
	r := Reader{B: b}
	r.Version("test")
	if u, w, s := r.U64(), r.U32(), r.Str(16); u != 42 || w != 7 || s != "queue" || string(r.B) != "rest" || r.Err != nil {
		t.Fatalf("read %d %d %q, left %q, %v", u, w, s, r.B, r.Err)
	}
	if r.Bytes(5); !errors.Is(r.Err, ErrShort) {
		t.Fatalf("reading past the end: %v", r.Err)
	}
	if v := r.Byte(); v != 0 || !errors.Is(r.Err, ErrShort) {
		t.Fatalf("a read after a failure: %d, %v", v, r.Err)
	}
	long := Reader{B: AppendStr(nil, "too long")}
	if long.Str(3); long.Err == nil {
		t.Fatal("a string over its limit was read")
	}
	old := Reader{B: []byte{V1 + 1}}
	if old.Version("test"); old.Err == nil {
		t.Fatal("another version was read")
	}
}

// TestNanosClamps: times outside what an int64 holds from the epoch on
// clamp to its ends.
func TestNanosClamps(t *testing.T) {
	for _, c := range []struct {
		t    time.Time
		want int64
	}{
		{time.Time{}, 0},
		{time.Unix(-1, 0), 0},
		{time.Unix(1, 5), 1_000_000_005},
		{time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), math.MaxInt64},
	} {
		if got := Nanos(c.t); got != c.want {
			t.Errorf("Nanos(%v) = %d, want %d", c.t, got, c.want)
		}
	}
}
