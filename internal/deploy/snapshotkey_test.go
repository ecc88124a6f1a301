package deploy

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/deploy/stack"
)

// FuzzParseSnapshotSeed: an accepted seed is 32 bytes whatever the
// surrounding space, both values are canonical base64 that the stack's
// AllowedPatterns accept, and the public key is the seed's; anything
// else is refused with the fix.
func FuzzParseSnapshotSeed(f *testing.F) {
	for _, s := range []string{snapshotSeed, snapshotSeed + "\n", " " + snapshotSeed + " \r\n", "c2hvcnQ=", "", "not base64!",
		strings.Repeat("A", 43) + "=", strings.Repeat("A", 43) + "B", base64.StdEncoding.EncodeToString(make([]byte, 33))} {
		f.Add(s)
	}
	tpl, err := stack.Build("test")
	if err != nil {
		f.Fatal(err)
	}
	pattern := func(name string) *regexp.Regexp { return regexp.MustCompile(*tpl.Parameters[name].AllowedPattern) }
	seedPat, pubPat := pattern(stack.ParamSnapshotSigningKey), pattern(stack.ParamSnapshotPublicKey)
	f.Fuzz(func(t *testing.T, in string) {
		k, err := ParseSnapshotSeed(in)
		seed, decErr := base64.StdEncoding.DecodeString(strings.TrimSpace(in))
		valid := decErr == nil && len(seed) == ed25519.SeedSize
		if (err == nil) != valid {
			t.Fatalf("ParseSnapshotSeed(%q) = %v; the input decodes to %d bytes (%v)", in, err, len(seed), decErr)
		}
		if err != nil {
			if !strings.Contains(err.Error(), "head -c 32 /dev/urandom | base64") {
				t.Fatalf("error %q does not say how to make a key", err)
			}
			return
		}
		if !seedPat.MatchString(k.Seed) || !pubPat.MatchString(k.Public) {
			t.Fatalf("%q gives %q and %q, which the stack's AllowedPatterns refuse", in, k.Seed, k.Public)
		}
		got, _ := base64.StdEncoding.DecodeString(k.Seed)
		pub, _ := base64.StdEncoding.DecodeString(k.Public)
		if !bytes.Equal(got, seed) || !bytes.Equal(pub, ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)) {
			t.Fatalf("%q: seed %q, public %q are not the input's", in, k.Seed, k.Public)
		}
	})
}
