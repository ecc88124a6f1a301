package reason

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestCodes(t *testing.T) {
	seen := map[Code]bool{}
	valid := regexp.MustCompile(`^[a-z]+(_[a-z0-9]+)*$`)
	for _, c := range All() {
		if seen[c] {
			t.Errorf("duplicate code %s", c)
		}
		seen[c] = true
		if !valid.MatchString(string(c)) || len(c) > 32 {
			t.Errorf("code %q is not short snake_case", c)
		}
		if !Known(c) {
			t.Errorf("Known(%s) = false", c)
		}
	}
	if Known("nope") || Known("") {
		t.Error("Known accepts an unknown code")
	}
}

// TestDocumented keeps docs/security/reason-codes.md and All in step.
func TestDocumented(t *testing.T) {
	b, err := os.ReadFile("../../../docs/security/reason-codes.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	documented := regexp.MustCompile("(?m)^\\| `([a-z0-9_]+)` \\|").FindAllStringSubmatch(doc, -1)
	var got []string
	for _, m := range documented {
		got = append(got, m[1])
	}
	var want []string
	for _, c := range All() {
		want = append(want, string(c))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("reason-codes.md lists\n%v\nthe code has\n%v", got, want)
	}
}

func TestError(t *testing.T) {
	e := New(MissingField, "metadata.id", "is required")
	if e.Error() != "missing_field: metadata.id: is required" {
		t.Fatal(e.Error())
	}
	if New(TooLarge, "", "").Error() != "too_large" {
		t.Fatal("bare code")
	}
	if Of(fmt.Errorf("wrapped: %w", e)) != MissingField {
		t.Fatal("Of through a wrap")
	}
	if Of(nil) != "" || Of(fmt.Errorf("x")) != "" {
		t.Fatal("Of of a non-rejection")
	}
}

// TestHints: every code has a hint, and it is the reason-codes table's
// last column (without its backticks).
func TestHints(t *testing.T) {
	b, err := os.ReadFile("../../../docs/security/reason-codes.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `([a-z0-9_]+)` \\|.* \\| ([^|]+) \\|$").FindAllStringSubmatch(string(b), -1)
	documented := map[Code]string{}
	for _, m := range rows {
		documented[Code(m[1])] = strings.ReplaceAll(m[2], "`", "")
	}
	for _, c := range All() {
		if Hint(c) == "" || Hint(c) != documented[c] {
			t.Errorf("Hint(%s) = %q; reason-codes.md says %q", c, Hint(c), documented[c])
		}
	}
	if Hint("nope") != "" {
		t.Error("Hint of an unknown code is not empty")
	}
}
