package jcs

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

func canon(t testing.TB, in string) (string, error) {
	t.Helper()
	v := jsontext.Value(in)
	err := v.Canonicalize()
	return string(v), err
}

func TestIsCanonical(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`{}`, true},
		{`[]`, true},
		{`{"a":1,"b":[true,false,null],"c":"x"}`, true},
		{`{"b":1,"a":2}`, false},
		{`{"a":1,"a":2}`, false},
		{`{"a": 1}`, false},
		{` {}`, false},
		{`{}x`, false},
		{`1.0`, false},
		{`1.5`, true},
		{`-0`, false},
		{`0`, true},
		{`1e2`, false},
		{`100`, true},
		{`1e+21`, true},
		{`1e21`, false},
		{`1e-7`, true},
		{`0.000001`, true},
		{`123456789012345678`, false},
		{`9007199254740992`, true},
		{`"\u00e9"`, false},
		{`"é"`, true},
		{`"\/"`, false},
		{`"\n"`, true},
		{`"\u000a"`, false},
		{`"\u001f"`, true},
		{`"\u001F"`, false},
		{"\"\x01\"", false},
		{"\"\xff\"", false},
		{`"\ud800"`, false},
		{`{"\n":1}`, false}, // canonical, but escaped names take the exact path
		{`[1,]`, false},
		{`[1 ]`, false},
		{`tru`, false},
		{``, false},
		{`"abc`, false},
		{`1e400`, false},
	} {
		if got := IsCanonical([]byte(tc.in)); got != tc.want {
			t.Errorf("IsCanonical(%q) = %v, want %v", tc.in, got, tc.want)
		}
		if IsCanonical([]byte(tc.in)) {
			if c, err := canon(t, tc.in); err != nil || c != tc.in {
				t.Errorf("IsCanonical(%q) but jsontext gives %q, %v", tc.in, c, err)
			}
		}
	}
}

func TestAppend(t *testing.T) {
	got, err := Append([]byte("x"), []byte(`{ "b" : 1.0, "a" : "\u0041" }`), Limits{MaxDepth: 8})
	if err != nil || string(got) != `x{"a":"A","b":1}` {
		t.Fatalf("Append = %q, %v", got, err)
	}
	if _, err := Append(nil, []byte(`{"a":1,"a":2}`), Limits{MaxDepth: 8}); !errors.Is(err, jsontext.ErrDuplicateName) {
		t.Fatalf("duplicate names: err = %v", err)
	}
	deep := []byte(`[[[[[1]]]]]`)
	if _, err := Append(nil, deep, Limits{MaxDepth: 4}); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("deep canonical: err = %v", err)
	}
	if _, err := Append(nil, []byte(`[[[[[ 1]]]]]`), Limits{MaxDepth: 4}); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("deep non-canonical: err = %v", err)
	}
	if out, err := Append(nil, deep, Limits{MaxDepth: 5}); err != nil || !bytes.Equal(out, deep) {
		t.Fatalf("depth at limit: %q, %v", out, err)
	}
	if _, err := Append(nil, []byte(`{`), Limits{MaxDepth: 4}); err == nil {
		t.Fatal("invalid JSON accepted")
	}
}

func TestAppendNoAllocWhenCanonical(t *testing.T) {
	v := []byte(`{"a":[1,2,3],"b":{"c":"d"},"e":12345}`)
	dst := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { _, _ = Append(dst[:0], v, Limits{MaxDepth: 32, MaxMembers: 10}) }); n != 0 {
		t.Fatalf("Append allocates %v times for canonical input", n)
	}
}

func TestMemberLimit(t *testing.T) {
	lim := Limits{MaxMembers: 3}
	for in, ok := range map[string]bool{
		`{"a":1,"b":{"c":2}}`:             true,
		`{"a":1,"b":{"c":2,"d":3}}`:       false,
		`{ "b":{"c":2,"d":3}, "a":1}`:     false, // non-canonical: checked before canonicalizing
		`[{"a":1},{"a":1},{"a":":"}]`:     true,
		`[{"a":1},{"a":1},{"a":1},{}]`:    true,
		`[{"a":1},{"a":1},{"a":1,"b":1}]`: false,
	} {
		_, err := Append(nil, []byte(in), lim)
		if ok != (err == nil) || !ok && !errors.Is(err, ErrTooManyMembers) {
			t.Errorf("Append(%s) = %v", in, err)
		}
	}
	if d, m := Shape([]byte(`{"a":{"b":"x:y"},"c":[1,{"d":2}]}`)); d != 3 || m != 4 {
		t.Errorf("Shape = %d, %d", d, m)
	}
}

func TestDepth(t *testing.T) {
	for in, want := range map[string]int{`1`: 0, `[]`: 1, `{"a":[{}]}`: 3, `"[[["`: 0, `["\"[",[]]`: 2} {
		if got := Depth([]byte(in)); got != want {
			t.Errorf("Depth(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestAppendNumber(t *testing.T) {
	tenth := 0.1
	for f, want := range map[float64]string{
		0: "0", 1: "1", -1.5: "-1.5", 1e21: "1e+21", 1e20: "100000000000000000000",
		1e-7: "1e-7", 1e-6: "0.000001", 5e-324: "5e-324", math.MaxFloat64: "1.7976931348623157e+308",
		tenth + 2*tenth: "0.30000000000000004",
	} {
		if got := string(AppendNumber(nil, f)); got != want {
			t.Errorf("AppendNumber(%v) = %s, want %s", f, got, want)
		}
	}
}

// FuzzIsCanonical checks the recognizer against jsontext: IsCanonical must
// never claim a value is canonical unless jsontext canonicalizes it to
// itself, and must recognize jsontext's own output when it is simple.
func FuzzIsCanonical(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"b":1,"a":2}`, `[1.5,-0,1e21,"\u001f"]`, `"é"`, `{"a":{"b":[null,true]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ok := IsCanonical(in)
		c := jsontext.Value(bytes.Clone(in))
		err := c.Canonicalize()
		if ok && (err != nil || !bytes.Equal(c, in)) {
			t.Fatalf("IsCanonical(%q) = true, jsontext: %q, %v", in, c, err)
		}
		if err == nil && !bytes.Contains(c, []byte(`\`)) && bytes.Equal(c, in) && Depth(c) <= MaxDepth && !hasHighRune(c) {
			if !IsCanonical(c) {
				t.Fatalf("IsCanonical(%q) = false for jsontext's canonical output", c)
			}
		}
		// CanonicalPrefix proves what IsCanonical proves, on a prefix.
		if n, d, m, pok := CanonicalPrefix(in); pok {
			if !IsCanonical(in[:n]) || ok && n != len(in) {
				t.Fatalf("CanonicalPrefix(%q) = %d, IsCanonical(prefix) = %v", in, n, IsCanonical(in[:n]))
			}
			if wd, wm := Shape(in[:n]); wd != d || wm != m {
				t.Fatalf("CanonicalPrefix(%q): depth %d, members %d; Shape says %d, %d", in, d, m, wd, wm)
			}
		} else if ok {
			t.Fatalf("CanonicalPrefix(%q) fails on a canonical value", in)
		}
		out, aerr := Append(nil, in, Limits{})
		if (aerr == nil) != (err == nil) || (aerr == nil && !bytes.Equal(out, c)) {
			t.Fatalf("Append(%q) = %q, %v; jsontext %q, %v", in, out, aerr, c, err)
		}
	})
}

func hasHighRune(b []byte) bool {
	for _, r := range string(b) {
		if r >= 0xE000 {
			return true
		}
	}
	return false
}

// FuzzAppendQuote: the quoting shortcut writes exactly what
// jsontext.AppendQuote writes, with the same error.
func FuzzAppendQuote(f *testing.F) {
	for _, s := range []string{"", "discord-bot", "2026-11-24T12:00:00.000Z", `a"b`, `a\b`, "a\x7fb", "a\x1fb", "café", "\xff", "</script>&\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, gerr := AppendQuote([]byte("x"), s)
		want, werr := jsontext.AppendQuote([]byte("x"), s)
		if !bytes.Equal(got, want) || (gerr == nil) != (werr == nil) {
			t.Fatalf("AppendQuote(%q) = %q, %v; jsontext.AppendQuote %q, %v", s, got, gerr, want, werr)
		}
	})
}
