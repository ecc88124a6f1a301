package envelope

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/snavio/snavio/pkg/dispatch/jcs"
	"github.com/snavio/snavio/pkg/dispatch/reason"
)

// Parser parses envelopes under fixed Limits. It is safe for concurrent use;
// it keeps a pool of parse states (buffers and a decoder) so that
// steady-state parsing allocates only the returned strings and payload.
//
// A message goes first through a scanner for the common shape (fast.go)
// and, if that does not accept it, through the token parser below, which
// alone decides and words rejections.
type Parser struct {
	limits Limits
	pool   sync.Pool // *state
}

// NewParser returns a Parser with limits (zero fields mean defaults).
func NewParser(limits Limits) *Parser {
	return &Parser{limits: limits.normalized()}
}

// Limits returns the parser's effective limits.
func (p *Parser) Limits() Limits { return p.limits }

// Parse decodes and validates detail, a producer's envelope. It does not
// retain detail. On success the Envelope owns its memory, Command.Source is
// empty and Command.Payload is canonical (RFC 8785).
//
// If check is not nil, Parse calls it once with the parsed
// metadata.timestamp as soon as the metadata block is complete and valid.
// If check returns an error, Parse stops early: it reads on only as far as
// the command's target and name (for Seen) and returns check's error. The
// shield uses this to apply the replay window before reading the payload.
//
// On failure Parse returns the zero Envelope, the well-formed identifying
// fields seen so far, and an error: check's error, or a *reason.Error whose
// Code names the first violation found in input order.
func (p *Parser) Parse(detail []byte, check func(sentAt time.Time) error) (Envelope, Seen, error) {
	return p.parse(detail, check, true)
}

// parse is Parse; withFast false skips the fast path (fast.go), for the
// tests that hold the two paths to the same results.
func (p *Parser) parse(detail []byte, check func(sentAt time.Time) error, withFast bool) (Envelope, Seen, error) {
	if len(detail) > p.limits.MaxBytes {
		return Envelope{}, Seen{}, reason.New(reason.TooLarge, "",
			"the event detail is "+strconv.Itoa(len(detail))+" bytes; the limit is "+strconv.Itoa(p.limits.MaxBytes)+" bytes: make the payload smaller")
	}
	s, _ := p.pool.Get().(*state)
	if s == nil {
		s = &state{}
	}
	var env Envelope
	var err error
	r := fastNo
	if s.reset(); withFast {
		r = s.fast(detail, p.limits, check)
	}
	switch r {
	case fastAccepted:
		env = s.build()
	case fastChecked:
		err = s.checkErr
	default:
		env, err = s.parse(detail, p.limits, check)
	}
	var seen Seen
	if err != nil {
		seen = s.seen()
		env = Envelope{}
	}
	s.release()
	p.pool.Put(s)
	return env, seen, err
}

// Field indexes into state.start, state.end and the state.have bits.
const (
	fID = iota
	fTimestamp
	fType
	fHMAC
	fVersion
	fTarget
	fName
	fPayload
	fSource // only ever detected, never stored
	fReplay
	fReplayReason
	fReplayID
	numFields
)

// fieldPath names field f for errors.
func fieldPath(f int) string {
	switch f {
	case fID:
		return "metadata.id"
	case fTimestamp:
		return "metadata.timestamp"
	case fType:
		return "metadata.type"
	case fHMAC:
		return "metadata.hmac"
	case fVersion:
		return "metadata.version_id"
	case fTarget:
		return "command.target"
	case fName:
		return "command.name"
	case fPayload:
		return "command.payload"
	case fSource:
		return "command.source"
	case fReplay:
		return "metadata.replay"
	case fReplayReason:
		return "metadata.replay_reason"
	case fReplayID:
		return "metadata.replay_id"
	}
	return ""
}

type state struct {
	buf      bytes.Buffer
	dec      jsontext.Decoder
	decoding bool // buf and dec hold the caller's detail
	scratch  []byte
	blob     []byte // validated string fields, back to back
	payload  []byte // canonical payload
	raw      []byte // the fast path's payload: canonical already, in detail
	size     int    // len(detail), for the canonical size check
	start    [numFields]int
	end      [numFields]int
	have     uint16 // bit per field seen
	sentAt   time.Time
	replay   bool
	// checked: the fast path called check, which returned checkErr; the
	// token parser then replays that result instead of calling it again.
	checked  bool
	checkErr error
}

func (s *state) reset() {
	s.blob = s.blob[:0]
	s.raw = nil
	s.have = 0
	s.replay = false
	s.checked, s.checkErr = false, nil
}

func (s *state) release() {
	if s.decoding { // drop the decoder's references to the caller's detail
		s.buf = bytes.Buffer{}
		s.dec.Reset(&s.buf)
		s.decoding = false
	}
	s.raw, s.checkErr = nil, nil
	if cap(s.payload) > 64<<10 {
		s.payload = nil
	}
}

// seen copies the identifying fields out of blob, into one string.
func (s *state) seen() Seen {
	fields := [4]int{fID, fTimestamp, fTarget, fName}
	var buf [36 + MaxTimestampLen + MaxTargetLen + MaxNameLen]byte
	b := buf[:0]
	var at [5]int
	for i, f := range fields {
		if s.have&(1<<f) != 0 {
			b = append(b, s.blob[s.start[f]:s.end[f]]...)
		}
		at[i+1] = len(b)
	}
	if len(b) == 0 {
		return Seen{}
	}
	all := string(b)
	return Seen{ID: all[at[0]:at[1]], Timestamp: all[at[1]:at[2]], Target: all[at[2]:at[3]], Name: all[at[3]:at[4]]}
}

func (s *state) parse(detail []byte, lim Limits, check func(time.Time) error) (Envelope, error) {
	s.buf = *bytes.NewBuffer(detail)
	s.decoding = true
	// Duplicate names are detected by the field bitmask in the envelope
	// and by canonicalization in the payload; letting the tokenizer skip
	// its own name sets halves its cost on object-heavy payloads.
	s.dec.Reset(&s.buf, jsontext.AllowDuplicateNames(true))
	s.blob = s.blob[:0]
	s.payload = s.payload[:0]
	s.raw = nil
	s.size = len(detail)
	s.have = 0
	s.replay = false

	if err := s.openObject(""); err != nil {
		return Envelope{}, err
	}
	var blocks uint8
	for s.dec.PeekKind() != '}' {
		name, err := s.readName()
		if err != nil {
			return Envelope{}, err
		}
		switch string(name) {
		case "metadata":
			if blocks&1 != 0 {
				return Envelope{}, dup("metadata")
			}
			blocks |= 1
			if err := s.metadata(); err != nil {
				return Envelope{}, err
			}
			if check != nil {
				err := s.checkErr
				if !s.checked {
					err = check(s.sentAt)
				}
				if err != nil {
					if blocks&2 == 0 {
						s.skimCommand()
					}
					return Envelope{}, err
				}
			}
		case "command":
			if blocks&2 != 0 {
				return Envelope{}, dup("command")
			}
			blocks |= 2
			if err := s.command(lim); err != nil {
				return Envelope{}, err
			}
		default:
			return Envelope{}, unknown("", name)
		}
	}
	if _, err := s.dec.ReadToken(); err != nil { // '}'
		return Envelope{}, syntax(err)
	}
	if _, err := s.dec.ReadToken(); err != io.EOF {
		return Envelope{}, reason.New(reason.MalformedJSON, "",
			"unexpected data after the envelope object: send exactly one JSON object")
	}
	if blocks&1 == 0 {
		return Envelope{}, missing("metadata")
	}
	if blocks&2 == 0 {
		return Envelope{}, missing("command")
	}
	return s.build(), nil
}

// build copies the validated fields out of the pooled buffers: one string
// and one byte slice, whatever the number of fields.
func (s *state) build() Envelope {
	all := string(s.blob)
	payload := s.payload
	if s.raw != nil {
		payload = s.raw
	}
	f := func(i int) string {
		if s.have&(1<<i) == 0 {
			return ""
		}
		return all[s.start[i]:s.end[i]]
	}
	return Envelope{
		Metadata: Metadata{
			ID: f(fID), Timestamp: f(fTimestamp), Type: EventType, HMAC: f(fHMAC), VersionID: f(fVersion),
			Replay: s.replay, ReplayReason: f(fReplayReason), ReplayID: f(fReplayID),
		},
		Command: Command{Target: f(fTarget), Name: f(fName), Payload: bytes.Clone(payload)},
		SentAt:  s.sentAt,
	}
}

func (s *state) openObject(path string) error {
	switch k := s.dec.PeekKind(); k {
	case '{':
		_, err := s.dec.ReadToken()
		return syntax(err)
	case 0:
		_, err := s.dec.ReadToken()
		if err == nil || err == io.EOF {
			return reason.New(reason.MalformedJSON, path, "the event detail is empty: send the envelope as a JSON object")
		}
		return syntax(err)
	default:
		what := path
		if what == "" {
			what = "the event detail"
		}
		return reason.New(reason.WrongType, path, what+" is a JSON "+kindName(k)+"; it must be an object")
	}
}

// readName reads an object member name and returns it unescaped. The
// result is valid until the next read.
func (s *state) readName() ([]byte, error) {
	v, err := s.dec.ReadValue()
	if err != nil {
		return nil, syntax(err)
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1], nil
	}
	s.scratch, err = jsontext.AppendUnquote(s.scratch[:0], v)
	if err != nil {
		return nil, syntax(err)
	}
	return s.scratch, nil
}

// valid validates the unescaped value of string field f.
func (s *state) valid(f int, b []byte) bool {
	switch f {
	case fID:
		return ValidID(b)
	case fTimestamp:
		t, ok := ParseTimestamp(b)
		s.sentAt = t
		return ok
	case fType:
		return string(b) == EventType
	case fHMAC:
		return ValidHMAC(b)
	case fVersion:
		return ValidVersionID(b)
	case fTarget:
		return ValidTarget(b)
	case fName:
		return ValidName(b)
	case fReplayReason:
		return ValidReplayReason(b)
	case fReplayID:
		return ValidName(b)
	}
	return false
}

// readString reads string field f into blob after validating it.
func (s *state) readString(f int, max int, code reason.Code, fix string) error {
	if s.have&(1<<f) != 0 {
		return dup(fieldPath(f))
	}
	if k := s.dec.PeekKind(); k != '"' {
		if k == 0 {
			_, err := s.dec.ReadValue()
			return syntax(err)
		}
		return reason.New(reason.WrongType, fieldPath(f), "is a JSON "+kindName(k)+"; it must be a string")
	}
	v, err := s.dec.ReadValue()
	if err != nil {
		return syntax(err)
	}
	if len(v) > 6*max+2 {
		return reason.New(code, fieldPath(f), "is longer than "+strconv.Itoa(max)+" bytes: "+fix)
	}
	raw := v[1 : len(v)-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		s.scratch, err = jsontext.AppendUnquote(s.scratch[:0], v)
		if err != nil {
			return syntax(err)
		}
		raw = s.scratch
	}
	if !s.valid(f, raw) {
		return reason.New(code, fieldPath(f), fix)
	}
	s.start[f] = len(s.blob)
	s.blob = append(s.blob, raw...)
	s.end[f] = len(s.blob)
	s.have |= 1 << f
	return nil
}

func (s *state) metadata() error {
	if err := s.openObject("metadata"); err != nil {
		return err
	}
	for s.dec.PeekKind() != '}' {
		name, err := s.readName()
		if err != nil {
			return err
		}
		switch string(name) {
		case "id":
			err = s.readString(fID, 36, reason.InvalidID,
				"it must be a UUID in lowercase canonical form such as 0f8fad5b-d9cb-469f-a165-70867728950e")
		case "timestamp":
			err = s.readString(fTimestamp, MaxTimestampLen, reason.InvalidTimestamp, "it must be an RFC 3339 date-time such as 2025-04-07T12:58:00.000Z")
		case "type":
			err = s.readString(fType, len(EventType), reason.InvalidEventType, "it must be "+EventType)
		case "hmac":
			err = s.readString(fHMAC, 64, reason.InvalidHMAC,
				"it must be the HMAC-SHA256 signature as 64 lowercase hex digits (see docs/security/signing.md)")
		case "version_id":
			err = s.readString(fVersion, MaxVersionIDLen, reason.InvalidVersionID,
				"it must name the key version, such as hmac-v2, as published in your tenant config")
		case "replay":
			err = s.readReplay()
		case "replay_reason":
			err = s.readString(fReplayReason, MaxReplayReasonLen, reason.InvalidReplay,
				"it must be 1-256 bytes of printable text saying why the command is replayed")
		case "replay_id":
			err = s.readString(fReplayID, MaxNameLen, reason.InvalidReplay,
				"it must identify the replay operation: 1-128 characters A-Z, a-z, 0-9, '.', '_', ':' or '-'")
		default:
			return unknown("metadata", name)
		}
		if err != nil {
			return err
		}
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return syntax(err)
	}
	for _, f := range []int{fID, fTimestamp, fType, fHMAC, fVersion} {
		if s.have&(1<<f) == 0 {
			return missing(fieldPath(f))
		}
	}
	if s.replay {
		for _, f := range []int{fReplayReason, fReplayID} {
			if s.have&(1<<f) == 0 {
				return reason.New(reason.InvalidReplay, fieldPath(f), "is required when metadata.replay is true: the replayer sets it")
			}
		}
	} else if s.have&(1<<fReplayReason|1<<fReplayID) != 0 {
		return reason.New(reason.InvalidReplay, "metadata.replay",
			"replay_reason and replay_id are only allowed with \"replay\": true; remove them from live traffic")
	}
	return nil
}

// readReplay reads metadata.replay, a boolean.
func (s *state) readReplay() error {
	if s.have&(1<<fReplay) != 0 {
		return dup("metadata.replay")
	}
	switch k := s.dec.PeekKind(); k {
	case 't', 'f':
		tok, err := s.dec.ReadToken()
		if err != nil {
			return syntax(err)
		}
		s.replay = tok.Bool()
	case 0:
		_, err := s.dec.ReadValue()
		return syntax(err)
	default:
		return reason.New(reason.WrongType, "metadata.replay", "is a JSON "+kindName(k)+"; it must be true or false")
	}
	s.have |= 1 << fReplay
	return nil
}

func (s *state) command(lim Limits) error {
	if err := s.openObject("command"); err != nil {
		return err
	}
	for s.dec.PeekKind() != '}' {
		name, err := s.readName()
		if err != nil {
			return err
		}
		switch string(name) {
		case "target":
			err = s.readString(fTarget, MaxTargetLen, reason.InvalidTarget,
				"it must be a registered service name: 1-64 characters a-z, 0-9, '.', '_' or '-'")
		case "name":
			err = s.readString(fName, MaxNameLen, reason.InvalidCommandName,
				"it must be a registered command name: 1-128 characters A-Z, a-z, 0-9, '.', '_', ':' or '-'")
		case "payload":
			err = s.readPayload(lim)
		default:
			if strings.EqualFold(string(name), "source") {
				return reason.New(reason.CommandSourcePresent, "command.source",
					"producers must not set command.source (got member "+quote(name)+"); remove it: the dispatcher sets it from your authenticated event source")
			}
			return unknown("command", name)
		}
		if err != nil {
			return err
		}
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return syntax(err)
	}
	for _, f := range []int{fTarget, fName, fPayload} {
		if s.have&(1<<f) == 0 {
			return missing(fieldPath(f))
		}
	}
	return nil
}

func (s *state) readPayload(lim Limits) error {
	if s.have&(1<<fPayload) != 0 {
		return dup("command.payload")
	}
	rest := s.dec.UnreadBuffer()
	v, err := s.dec.ReadValue()
	if err != nil {
		// The tokenizer gives up at 10000 levels with a syntax error;
		// name the real problem.
		if jcs.Depth(rest) > lim.MaxDepth {
			return tooDeep(lim.MaxDepth)
		}
		return syntax(err)
	}
	s.payload, err = jcs.Append(s.payload[:0], v, jcs.Limits{MaxDepth: lim.MaxDepth, MaxMembers: lim.MaxMembers})
	switch {
	case err == nil:
	case errors.Is(err, jcs.ErrTooDeep):
		return tooDeep(lim.MaxDepth)
	case errors.Is(err, jcs.ErrTooManyMembers):
		return reason.New(reason.TooManyMembers, "command.payload",
			"has more than "+strconv.Itoa(lim.MaxMembers)+" object members in total: send bulk data as arrays or split the command")
	case errors.Is(err, jsontext.ErrDuplicateName):
		return reason.New(reason.DuplicateMember, "command.payload",
			"an object in the payload repeats a member name: send each name once")
	default:
		return reason.New(reason.InvalidPayload, "command.payload",
			"cannot be canonicalized (RFC 8785): "+err.Error())
	}
	if n, over := s.canonicalSize(s.size, len(v), lim); over {
		return reason.New(reason.TooLarge, "command.payload",
			"is "+strconv.Itoa(len(s.payload))+" bytes in canonical form (RFC 8785), which makes the detail "+strconv.Itoa(n)+
				" bytes; the limit is "+strconv.Itoa(lim.MaxBytes)+" bytes: make the payload smaller (numbers such as 1e20 or 1e400 grow when canonicalized)")
	}
	s.have |= 1 << fPayload
	return nil
}

// canonicalSize is the size of a detail of detailLen bytes with its
// payload of rawLen bytes (as sent) replaced by s.payload, its canonical
// form, and whether that is over the limit. The canonical payload is what
// is signed and delivered, so it is held to the limit too.
func (s *state) canonicalSize(detailLen, rawLen int, lim Limits) (int, bool) {
	n := detailLen - rawLen + len(s.payload)
	return n, n > lim.MaxBytes
}

// skimCommand reads, after an early rejection, as much of a following
// command block as identifies the message (target and name) and stops at
// anything else. Errors end it silently.
func (s *state) skimCommand() {
	if s.dec.PeekKind() != '"' {
		return
	}
	name, err := s.readName()
	if err != nil || string(name) != "command" || s.dec.PeekKind() != '{' {
		return
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return
	}
	for s.dec.PeekKind() == '"' {
		name, err := s.readName()
		if err != nil {
			return
		}
		switch string(name) {
		case "target":
			err = s.readString(fTarget, MaxTargetLen, reason.InvalidTarget, "")
		case "name":
			err = s.readString(fName, MaxNameLen, reason.InvalidCommandName, "")
		default:
			return
		}
		if err != nil || s.have&(1<<fTarget) != 0 && s.have&(1<<fName) != 0 {
			return
		}
	}
}

func tooDeep(maxDepth int) error {
	return reason.New(reason.TooDeep, "command.payload",
		"nests arrays and objects more than "+strconv.Itoa(maxDepth)+" levels deep: flatten the payload")
}

func syntax(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		msg = "the JSON ends early"
	}
	return reason.New(reason.MalformedJSON, "", msg+": send one valid UTF-8 JSON object")
}

func dup(path string) error {
	return reason.New(reason.DuplicateMember, path, "appears more than once (names are compared after unescaping): send it once")
}

func missing(path string) error {
	return reason.New(reason.MissingField, path, "is required: add it (see docs/security/envelope.md)")
}

func unknown(parent string, name []byte) error {
	where := "the envelope"
	if parent != "" {
		where = parent
	}
	return reason.New(reason.UnknownMember, parent,
		where+" has no member "+quote(name)+" (names are case-sensitive): remove it")
}

func quote(name []byte) string {
	if len(name) > 64 {
		name = append(name[:61:61], "..."...)
	}
	q, _ := jsontext.AppendQuote(nil, name)
	if q == nil {
		return `"?"`
	}
	return string(q)
}

func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "boolean"
	case '"':
		return "string"
	case '0':
		return "number"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value"
}
