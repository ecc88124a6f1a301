package embedded

import (
	"slices"
	"testing"
)

func TestCompositeKeyRoundTrip(t *testing.T) {
	for _, parts := range [][]string{
		{"a", "b", "c"},
		{"", "", ""},
		{"a\x00b", "c"},
		{"a", "\x00bc"},
	} {
		got, err := splitKey(compositeKey(parts...))
		if err != nil || !slices.Equal(got, parts) {
			t.Errorf("splitKey(compositeKey(%q)) = %q, %v", parts, got, err)
		}
	}
	if slices.Equal(compositeKey("a\x00b", "c"), compositeKey("a", "\x00bc")) {
		t.Fatal("distinct tuples share a key")
	}
}

// FuzzSplitKey: splitKey never panics, and whatever it accepts re-encodes
// to the same bytes.
func FuzzSplitKey(f *testing.F) {
	f.Add(compositeKey("t/s", "tg", "c"))
	f.Add([]byte{0x80})
	f.Add([]byte{5, 'a'})
	f.Fuzz(func(t *testing.T, k []byte) {
		parts, err := splitKey(k)
		if err != nil {
			return
		}
		if got := compositeKey(parts...); !slices.Equal(got, k) && len(k) > 0 {
			// Non-minimal varints decode but re-encode shorter; only
			// minimal encodings must round trip.
			if again, err := splitKey(got); err != nil || !slices.Equal(again, parts) {
				t.Fatalf("%x: parts %q re-encode to %x which splits to %q, %v", k, parts, got, again, err)
			}
		}
	})
}
