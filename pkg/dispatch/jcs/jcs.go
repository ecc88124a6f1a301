// Package jcs produces and recognizes the RFC 8785 JSON Canonicalization
// Scheme (JCS) form of a JSON value.
//
// Canonicalization itself is delegated to jsontext.Value.Canonicalize from
// github.com/go-json-experiment/json. This package adds IsCanonical, a
// single-pass recognizer that proves a value is already canonical without
// re-encoding it, so the common case (a producer that sends canonical JSON)
// costs one linear scan and no allocation. IsCanonical is conservative: it
// may answer false for a canonical value it does not fully analyse (object
// names with escapes or with characters at or above U+E000, nesting deeper
// than MaxDepth); callers then fall back to Canonicalize, which is exact.
// It never answers true for a value that is not canonical: the fuzz test
// FuzzIsCanonical checks that against jsontext.
//
// All functions are safe for concurrent use.
package jcs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// MaxDepth is the deepest nesting IsCanonical analyses; deeper values are
// reported as not canonical (and so take the exact path).
const MaxDepth = 64

// ErrTooDeep reports a value nested deeper than Limits.MaxDepth.
var ErrTooDeep = errors.New("jcs: JSON value nested too deeply")

// ErrTooManyMembers reports a value with more object members in total than
// Limits.MaxMembers.
var ErrTooManyMembers = errors.New("jcs: JSON value has too many object members")

// Limits bound what Append accepts. Zero fields mean no limit of their own.
// They exist because canonicalizing a non-canonical value costs memory per
// object member (sorting and duplicate detection in jsontext: about 400
// bytes each), so an adversarial 256 KiB object of 40 000 tiny members
// would cost ~10 MiB.
type Limits struct {
	// MaxDepth is the deepest nesting of arrays and objects allowed.
	MaxDepth int
	// MaxMembers is the most object members allowed, summed over every
	// object in the value.
	MaxMembers int
}

func (l Limits) check(depth, members int) error {
	if l.MaxDepth > 0 && depth > l.MaxDepth {
		return ErrTooDeep
	}
	if l.MaxMembers > 0 && members > l.MaxMembers {
		return ErrTooManyMembers
	}
	return nil
}

// IsCanonical reports whether v is a valid JSON value already in RFC 8785
// canonical form. A false answer means "not proven canonical".
func IsCanonical(v []byte) bool {
	_, _, ok := check(v)
	return ok
}

// check returns the depth and member count of v and whether it is proven
// canonical; the counts are meaningful only if it is.
func check(v []byte) (depth, members int, ok bool) {
	c := checker{b: v}
	if !c.value(0) || c.i != len(v) {
		return 0, 0, false
	}
	return c.maxDepth, c.members, true
}

// CanonicalPrefix reports whether b starts with a JSON value proven
// canonical (as IsCanonical proves it) and returns the value's length in
// bytes, its nesting depth and its object member count. The bytes after
// the value are not examined; the caller decides whether they may follow a
// value (a number or a literal directly followed by a letter or a digit is
// not a token boundary). It lets a parser that already holds a value's
// surrounding text skip a separate tokenizing pass over the value.
func CanonicalPrefix(b []byte) (n, depth, members int, ok bool) {
	c := checker{b: b}
	if !c.value(0) || c.i > len(b) {
		return 0, 0, 0, false
	}
	return c.i, c.maxDepth, c.members, true
}

// Append appends the canonical form of the JSON value v to dst. It rejects
// values beyond lim (ErrTooDeep, ErrTooManyMembers), checked before any
// canonicalization work, duplicate object names (jsontext.ErrDuplicateName)
// and invalid JSON. On error dst is returned unchanged. Append does not
// allocate when v is already canonical and dst has room.
func Append(dst, v []byte, lim Limits) ([]byte, error) {
	if d, m, ok := check(v); ok {
		if err := lim.check(d, m); err != nil {
			return dst, err
		}
		return append(dst, v...), nil
	}
	if err := lim.check(Shape(v)); err != nil {
		return dst, err
	}
	c := jsontext.Value(bytes.Clone(v))
	if err := c.Canonicalize(); err != nil {
		return dst, err
	}
	return append(dst, c...), nil
}

// Depth returns the maximum nesting depth of arrays and objects in v
// (0 for a scalar). See Shape.
func Depth(v []byte) int {
	d, _ := Shape(v)
	return d
}

// Shape returns the maximum nesting depth of arrays and objects in v (0 for
// a scalar) and the number of object members (name-value pairs) in all its
// objects. It scans bytes only, in linear time without allocating, and is
// exact for valid JSON; for invalid input it returns some numbers without
// failing.
func Shape(v []byte) (depth, members int) {
	d, m := 0, 0
	inStr := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case ':':
			members++
		case '{', '[':
			d++
			if d > m {
				m = d
			}
		case '}', ']':
			d--
		}
	}
	return m, members
}

type checker struct {
	b        []byte
	i        int
	maxDepth int
	members  int
}

func (c *checker) value(depth int) bool {
	if c.i >= len(c.b) {
		return false
	}
	switch c.b[c.i] {
	case '{':
		return c.object(depth + 1)
	case '[':
		return c.array(depth + 1)
	case '"':
		_, _, ok := c.str()
		return ok
	case 't':
		return c.lit("true")
	case 'f':
		return c.lit("false")
	case 'n':
		return c.lit("null")
	default:
		return c.number()
	}
}

func (c *checker) lit(s string) bool {
	if !bytes.HasPrefix(c.b[c.i:], []byte(s)) {
		return false
	}
	c.i += len(s)
	return true
}

func (c *checker) object(depth int) bool {
	if depth > MaxDepth {
		return false
	}
	c.maxDepth = max(c.maxDepth, depth)
	c.i++ // '{'
	if c.i < len(c.b) && c.b[c.i] == '}' {
		c.i++
		return true
	}
	var prev []byte
	for first := true; ; first = false {
		if c.i >= len(c.b) || c.b[c.i] != '"' {
			return false
		}
		name, simple, ok := c.str()
		if !ok || !simple {
			// Escaped names or names whose UTF-8 order could differ from
			// UTF-16 order are left to the exact path.
			return false
		}
		if !first && bytes.Compare(prev, name) >= 0 {
			return false // out of order or duplicate
		}
		prev = name
		c.members++
		if c.i >= len(c.b) || c.b[c.i] != ':' {
			return false
		}
		c.i++
		if !c.value(depth) {
			return false
		}
		if c.i >= len(c.b) {
			return false
		}
		switch c.b[c.i] {
		case ',':
			c.i++
		case '}':
			c.i++
			return true
		default:
			return false
		}
	}
}

func (c *checker) array(depth int) bool {
	if depth > MaxDepth {
		return false
	}
	c.maxDepth = max(c.maxDepth, depth)
	c.i++ // '['
	if c.i < len(c.b) && c.b[c.i] == ']' {
		c.i++
		return true
	}
	for {
		if !c.value(depth) {
			return false
		}
		if c.i >= len(c.b) {
			return false
		}
		switch c.b[c.i] {
		case ',':
			c.i++
		case ']':
			c.i++
			return true
		default:
			return false
		}
	}
}

// str consumes a canonical string starting at the opening quote. It returns
// the raw contents, whether they are "simple" (free of escapes and of code
// points at or above U+E000, so that byte order equals UTF-16 order) and
// whether the string is canonical at all.
func (c *checker) str() (name []byte, simple, ok bool) {
	start := c.i + 1
	i := start
	simple = true
	b := c.b
	for i < len(b) {
		// Skip eight plain ASCII bytes at a time: none below 0x20, none
		// at or above 0x80, no quote, no backslash.
		// The lowest flagged byte is exact (borrows only propagate
		// upwards), so jump straight to the first special byte.
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			if m := (x | hasLess20(x) | hasZero(x^(lsb*'"')) | hasZero(x^(lsb*'\\'))) & msb; m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
		ch := b[i]
		switch {
		case ch == '"':
			c.i = i + 1
			return b[start:i], simple, true
		case ch == '\\':
			if i+1 >= len(b) {
				return c.fail()
			}
			simple = false
			switch b[i+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				// Canonical form uses \u00xx (lowercase hex) only for
				// control characters without a short escape.
				if i+5 >= len(b) || b[i+2] != '0' || b[i+3] != '0' {
					return c.fail()
				}
				h, l := b[i+4], b[i+5]
				if h != '0' && h != '1' {
					return c.fail()
				}
				var lv byte
				switch {
				case l >= '0' && l <= '9':
					lv = l - '0'
				case l >= 'a' && l <= 'f':
					lv = l - 'a' + 10
				default:
					return c.fail()
				}
				cp := (h-'0')<<4 | lv
				switch cp {
				case '\b', '\f', '\n', '\r', '\t':
					return c.fail()
				}
				i += 6
			default:
				return c.fail()
			}
		case ch < 0x20:
			return c.fail()
		case ch < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				return c.fail()
			}
			if r >= 0xE000 {
				simple = false
			}
			i += n
		}
	}
	return c.fail()
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// hasZero sets the high bit of some byte if any byte of x is zero.
func hasZero(x uint64) uint64 { return (x - lsb) & ^x & msb }

// hasLess20 sets the high bit of some byte if any byte of x is below 0x20.
func hasLess20(x uint64) uint64 { return (x - lsb*0x20) & ^x & msb }

func (c *checker) fail() ([]byte, bool, bool) {
	c.i = len(c.b) + 1 // ensures the caller cannot report success
	return nil, false, false
}

// number consumes a number and reports whether it is in the ECMAScript
// Number.prototype.toString form that RFC 8785 prescribes.
func (c *checker) number() bool {
	b := c.b
	start := c.i
	i := start
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return false
	}
	intStart := i
	if b[i] == '0' {
		i++
	} else if b[i] >= '1' && b[i] <= '9' {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	} else {
		return false
	}
	intDigits := i - intStart
	plain := true
	if i < len(b) && b[i] == '.' {
		plain = false
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		plain = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	c.i = i
	tok := b[start:i]
	if plain && intDigits <= 15 {
		// Integers below 10^15 are exact doubles and print as themselves,
		// except negative zero, which prints as 0.
		return !(tok[0] == '-' && tok[1] == '0')
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil || math.IsInf(f, 0) {
		return false
	}
	var buf [32]byte
	return bytes.Equal(AppendNumber(buf[:0], f), tok)
}

// AppendQuote is jsontext.AppendQuote with a shortcut for the usual
// string of an envelope or an event: printable ASCII without quotes or
// backslashes goes between quotes as it is, which is what AppendQuote
// does with it (FuzzAppendQuote).
func AppendQuote(dst []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return jsontext.AppendQuote(dst, s)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"'), nil
}

// AppendNumber appends f in the ECMAScript Number.prototype.toString form
// used by RFC 8785 (section 3.2.2.3). f must be finite.
func AppendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs < 1e-6 || abs >= 1e21 {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// Go prints e-07; ECMAScript prints e-7.
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}
