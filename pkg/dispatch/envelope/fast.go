package envelope

import (
	"bytes"
	"encoding/binary"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/snavio/snavio/pkg/dispatch/jcs"
)

// The fast path of Parse: a scanner over the raw bytes for the shape
// producers send (plain ASCII member names and string values without
// escapes, a payload already in canonical form). It decides acceptance
// only: on anything it does not handle, and on every violation, it
// reports fastNo and Parse runs the token parser (parse.go) from the
// start, whose verdict, error and Seen are the contract. What the fast
// path accepts the token parser accepts with the same Envelope; the
// differential fuzz target FuzzParseFastPath holds it to that.
//
// The gain is one pass over the payload instead of two (the tokenizer's
// and the canonical check's), and no tokenizer state on the way.

type fastResult uint8

const (
	// fastNo: not decided here; run the token parser. If check was
	// called (s.checked), the token parser replays its result.
	fastNo fastResult = iota
	// fastAccepted: the envelope is valid; build it from s.
	fastAccepted
	// fastChecked: check rejected the message (s.checkErr) and s holds
	// what the token parser's early stop would have seen.
	fastChecked
)

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// hasZero sets the high bit of the zero bytes of x (and possibly of bytes
// above a zero byte, which only makes the caller look closer).
func hasZero(x uint64) uint64 { return (x - lsb) & ^x & msb }

// isWS reports JSON whitespace (RFC 8259).
func isWS(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func skipWS(d []byte, i int) int {
	for i < len(d) && isWS(d[i]) {
		i++
	}
	return i
}

// plainString scans a string starting at the quote at d[i] whose bytes are
// printable ASCII other than backslash, and returns its contents and the
// index after the closing quote. ok is false for anything else: an escape,
// a control or non-ASCII byte, a missing quote.
func plainString(d []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(d) || d[i] != '"' {
		return nil, i, false
	}
	j := i + 1
	// Eight bytes at a time while none is special: below 0x20, at or
	// above 0x7f, a quote or a backslash (x-0x20 borrows, x+1 carries
	// into the high bit, x^q is zero in a matching byte).
	for ; j+8 <= len(d); j += 8 {
		x := binary.LittleEndian.Uint64(d[j:])
		if ((x-lsb*0x20)|(x+lsb)|x|hasZero(x^(lsb*'"'))|hasZero(x^(lsb*'\\')))&msb != 0 {
			break
		}
	}
	for ; j < len(d); j++ {
		switch c := d[j]; {
		case c == '"':
			return d[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return nil, i, false
		}
	}
	return nil, i, false
}

// member reads a plain member name at d[i] and the colon after it, and
// returns the name and the index of the value.
func member(d []byte, i int) (name []byte, next int, ok bool) {
	name, i, ok = plainString(d, i)
	if !ok {
		return nil, i, false
	}
	i = skipWS(d, i)
	if i >= len(d) || d[i] != ':' {
		return nil, i, false
	}
	return name, skipWS(d, i+1), true
}

// after reads what follows a member value: ',' then the next name (more),
// or the object's closing '}' (done). Anything else is not handled.
func after(d []byte, i int) (next int, more, ok bool) {
	i = skipWS(d, i)
	if i >= len(d) {
		return i, false, false
	}
	switch d[i] {
	case ',':
		return skipWS(d, i+1), true, true
	case '}':
		return i + 1, false, true
	}
	return i, false, false
}

// fast runs the fast path on d (see fastResult).
func (s *state) fast(d []byte, lim Limits, check func(time.Time) error) fastResult {
	i := skipWS(d, 0)
	if i >= len(d) || d[i] != '{' {
		return fastNo
	}
	i = skipWS(d, i+1)
	var blocks uint8
	for more := true; more; {
		name, j, ok := member(d, i)
		if !ok {
			return fastNo
		}
		switch string(name) {
		case "metadata":
			if blocks&1 != 0 {
				return fastNo
			}
			blocks |= 1
			if j, ok = s.fastMetadata(d, j); !ok {
				return fastNo
			}
			if check != nil {
				s.checked, s.checkErr = true, check(s.sentAt)
				if s.checkErr != nil {
					if blocks&2 == 0 && !s.fastSkim(d, j) {
						return fastNo
					}
					return fastChecked
				}
			}
		case "command":
			if blocks&2 != 0 {
				return fastNo
			}
			blocks |= 2
			if j, ok = s.fastCommand(d, j, lim); !ok {
				return fastNo
			}
		default:
			return fastNo
		}
		if i, more, ok = after(d, j); !ok {
			return fastNo
		}
	}
	if skipWS(d, i) != len(d) || blocks != 3 {
		return fastNo
	}
	return fastAccepted
}

// fastField reads string field f at d[i] into blob if it is plain, not a
// duplicate and valid.
func (s *state) fastField(d []byte, i, f int) (int, bool) {
	if s.have&(1<<f) != 0 {
		return i, false
	}
	v, i, ok := plainString(d, i)
	if !ok || !s.valid(f, v) {
		return i, false
	}
	s.start[f] = len(s.blob)
	s.blob = append(s.blob, v...)
	s.end[f] = len(s.blob)
	s.have |= 1 << f
	return i, true
}

// fastObject reads the object at d[i], handing each member's name and the
// position of its value to field, which reads the value and returns the
// position after it.
func fastObject(d []byte, i int, field func(name []byte, j int) (int, bool)) (int, bool) {
	if i >= len(d) || d[i] != '{' {
		return i, false
	}
	i = skipWS(d, i+1)
	for more := true; more; {
		name, j, ok := member(d, i)
		if !ok {
			return i, false
		}
		if j, ok = field(name, j); !ok {
			return i, false
		}
		if i, more, ok = after(d, j); !ok {
			return i, false
		}
	}
	return i, true
}

func (s *state) fastMetadata(d []byte, i int) (int, bool) {
	i, ok := fastObject(d, i, func(name []byte, j int) (int, bool) {
		switch string(name) {
		case "id":
			return s.fastField(d, j, fID)
		case "timestamp":
			return s.fastField(d, j, fTimestamp)
		case "type":
			return s.fastField(d, j, fType)
		case "hmac":
			return s.fastField(d, j, fHMAC)
		case "version_id":
			return s.fastField(d, j, fVersion)
		case "replay":
			return s.fastReplay(d, j)
		case "replay_reason":
			return s.fastField(d, j, fReplayReason)
		case "replay_id":
			return s.fastField(d, j, fReplayID)
		}
		return j, false
	})
	if !ok {
		return i, false
	}
	const required = 1<<fID | 1<<fTimestamp | 1<<fType | 1<<fHMAC | 1<<fVersion
	const replayFields = 1<<fReplayReason | 1<<fReplayID
	if s.have&required != required {
		return i, false
	}
	if s.replay && s.have&replayFields != replayFields || !s.replay && s.have&replayFields != 0 {
		return i, false
	}
	return i, true
}

// fastReplay reads metadata.replay, a literal true or false.
func (s *state) fastReplay(d []byte, i int) (int, bool) {
	if s.have&(1<<fReplay) != 0 {
		return i, false
	}
	switch {
	case len(d)-i >= 4 && string(d[i:i+4]) == "true":
		s.replay, i = true, i+4
	case len(d)-i >= 5 && string(d[i:i+5]) == "false":
		s.replay, i = false, i+5
	default:
		return i, false
	}
	s.have |= 1 << fReplay
	return i, true // after() rejects "truex" and the like
}

func (s *state) fastCommand(d []byte, i int, lim Limits) (int, bool) {
	i, ok := fastObject(d, i, func(name []byte, j int) (int, bool) {
		switch string(name) {
		case "target":
			return s.fastField(d, j, fTarget)
		case "name":
			return s.fastField(d, j, fName)
		case "payload":
			return s.fastPayload(d, j, lim)
		}
		return j, false
	})
	const required = 1<<fTarget | 1<<fName | 1<<fPayload
	return i, ok && s.have&required == required
}

// fastPayload reads the payload. One already canonical and within the
// limits is taken in place, checked in one pass and copied once, by build.
// Any other is tokenized and canonicalized as the token parser does it,
// and any failure there is left to the token parser to report.
func (s *state) fastPayload(d []byte, i int, lim Limits) (int, bool) {
	if s.have&(1<<fPayload) != 0 {
		return i, false
	}
	n, depth, members, ok := jcs.CanonicalPrefix(d[i:])
	if ok && depth <= lim.MaxDepth && members <= lim.MaxMembers {
		s.raw = d[i : i+n]
		s.have |= 1 << fPayload
		return i + n, true
	}
	s.buf = *bytes.NewBuffer(d[i:])
	s.decoding = true
	s.dec.Reset(&s.buf, jsontext.AllowDuplicateNames(true))
	v, err := s.dec.ReadValue()
	if err != nil {
		return i, false
	}
	if s.payload, err = jcs.Append(s.payload[:0], v, jcs.Limits{MaxDepth: lim.MaxDepth, MaxMembers: lim.MaxMembers}); err != nil {
		return i, false
	}
	if _, over := s.canonicalSize(len(d), len(v), lim); over {
		return i, false
	}
	s.have |= 1 << fPayload
	return i + int(s.dec.InputOffset()), true
}

// fastSkim is skimCommand on the fast path: after check rejected the
// message, it records command.target and command.name from a command block
// that directly follows the metadata, as far as the token parser's skim
// would read them. It returns false if it met something it does not
// handle, and then the token parser skims instead.
func (s *state) fastSkim(d []byte, i int) bool {
	i = skipWS(d, i)
	if i >= len(d) || d[i] != ',' {
		return true
	}
	i = skipWS(d, i+1)
	if i >= len(d) || d[i] != '"' {
		return true
	}
	name, i, ok := plainString(d, i)
	if !ok {
		return false
	}
	if string(name) != "command" {
		return true
	}
	i = skipWS(d, i)
	if i >= len(d) || d[i] != ':' {
		return true
	}
	i = skipWS(d, i+1)
	if i >= len(d) || d[i] != '{' {
		return true
	}
	i = skipWS(d, i+1)
	for i < len(d) && d[i] == '"' {
		name, j, ok := plainString(d, i)
		if !ok {
			return false
		}
		f := fTarget
		switch string(name) {
		case "target":
		case "name":
			f = fName
		default:
			return true
		}
		j = skipWS(d, j)
		if j >= len(d) || d[j] != ':' {
			return true
		}
		j = skipWS(d, j+1)
		if s.have&(1<<f) != 0 || j >= len(d) || d[j] != '"' {
			return true // a duplicate or a non-string ends the skim
		}
		v, j, ok := plainString(d, j)
		if !ok {
			return false
		}
		if !s.valid(f, v) {
			return true
		}
		s.start[f] = len(s.blob)
		s.blob = append(s.blob, v...)
		s.end[f] = len(s.blob)
		s.have |= 1 << f
		if s.have&(1<<fTarget) != 0 && s.have&(1<<fName) != 0 {
			return true
		}
		j = skipWS(d, j)
		if j >= len(d) || d[j] != ',' {
			return true
		}
		i = skipWS(d, j+1)
	}
	return true
}
