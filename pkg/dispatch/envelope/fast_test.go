package envelope

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/reason"
)

// The token parser (parse.go, reached with withFast false) is the
// reference: it is the parser as it was before the fast path, kept as the
// fallback for everything the fast path does not accept. These tests hold
// Parse (fast path first) to exactly its results.

var errOutside = errors.New("outside the window")

// checkCalls records the calls of a check function.
type checkCalls struct {
	at []time.Time
}

func (c *checkCalls) fn(mode uint8) func(time.Time) error {
	switch mode % 3 {
	case 0:
		return nil
	case 1:
		return func(t time.Time) error { c.at = append(c.at, t); return nil }
	}
	return func(t time.Time) error { c.at = append(c.at, t); return errOutside }
}

// sameTime: equal instants in equal zones (offset and name).
func sameTime(a, b time.Time) bool {
	an, ao := a.Zone()
	bn, bo := b.Zone()
	return a.Equal(b) && an == bn && ao == bo && a.IsZero() == b.IsZero()
}

// diffParse parses in with and without the fast path and reports how the
// results differ ("" if they do not).
func diffParse(p *Parser, in []byte, mode uint8) string {
	var refCalls, gotCalls checkCalls
	refEnv, refSeen, refErr := p.parse(bytes.Clone(in), refCalls.fn(mode), false)
	buf := bytes.Clone(in)
	gotEnv, gotSeen, gotErr := p.parse(buf, gotCalls.fn(mode), true)
	for i := range buf { // Parse must not retain its input
		buf[i] = 'X'
	}
	switch {
	case (refErr == nil) != (gotErr == nil):
		return "verdicts differ: token parser " + errString(refErr) + ", fast path " + errString(gotErr)
	case refErr != nil && (errString(refErr) != errString(gotErr) || errors.Is(refErr, errOutside) != errors.Is(gotErr, errOutside)):
		return "errors differ: token parser " + errString(refErr) + ", fast path " + errString(gotErr)
	case refErr != nil && reasonOf(refErr) != reasonOf(gotErr):
		return "error kinds differ"
	case refSeen != gotSeen:
		return "Seen differs: token parser " + strconv.Quote(refSeen.ID+"|"+refSeen.Timestamp+"|"+refSeen.Target+"|"+refSeen.Name) +
			", fast path " + strconv.Quote(gotSeen.ID+"|"+gotSeen.Timestamp+"|"+gotSeen.Target+"|"+gotSeen.Name)
	case refEnv.Metadata != gotEnv.Metadata || refEnv.Command.Source != gotEnv.Command.Source ||
		refEnv.Command.Target != gotEnv.Command.Target || refEnv.Command.Name != gotEnv.Command.Name:
		return "envelopes differ"
	case !bytes.Equal(refEnv.Command.Payload, gotEnv.Command.Payload) || (refEnv.Command.Payload == nil) != (gotEnv.Command.Payload == nil):
		return "payloads differ: token parser " + strconv.Quote(string(refEnv.Command.Payload)) + ", fast path " + strconv.Quote(string(gotEnv.Command.Payload))
	case !sameTime(refEnv.SentAt, gotEnv.SentAt):
		return "SentAt differs: " + refEnv.SentAt.String() + " vs " + gotEnv.SentAt.String()
	case len(refCalls.at) != len(gotCalls.at):
		return "check called " + strconv.Itoa(len(refCalls.at)) + " times by the token parser, " + strconv.Itoa(len(gotCalls.at)) + " by the fast path"
	}
	for i := range refCalls.at {
		if !sameTime(refCalls.at[i], gotCalls.at[i]) {
			return "check called with " + gotCalls.at[i].String() + ", want " + refCalls.at[i].String()
		}
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// reasonOf is the code, field and message of a *reason.Error.
func reasonOf(err error) reason.Error {
	var re *reason.Error
	if errors.As(err, &re) {
		return *re
	}
	return reason.Error{}
}

// fastSeeds are inputs near every branch of the fast path: accepted shapes
// and, for each, a way to fall back.
func fastSeeds() []string {
	g := good()
	canon := strings.Replace(g, `{"user":"u-1","n":1}`, `{"n":1,"user":"u-1"}`, 1)
	metaFirst := `{"metadata":` + meta("") + `,"command":`
	return []string{
		g, canon, string(message1K()),
		" \t\r\n" + strings.ReplaceAll(canon, ",", " ,\n\t") + " \n",
		strings.ReplaceAll(canon, ":", " : "),
		`{"command":{"target":"discord-bot","name":"notify-user","payload":{"n":1}},"metadata":` + meta("") + `}`,
		metaFirst + `{"target":"discord-bot","name":"notify-user","payload":1}}`,
		metaFirst + `{"target":"discord-bot","name":"notify-user","payload":1 }}`,
		metaFirst + `{"target":"discord-bot","name":"notify-user","payload":1x}}`,
		metaFirst + `{"target":"discord-bot","name":"notify-user","payload":true}}`,
		metaFirst + `{"target":"discord-bot","name":"notify-user","payload":truex}}`,
		metaFirst + `{"target":"discord-bot","name":"notify-user","payload":"s\u00e9\n"}}`,
		metaFirst + `{"target":"discord-bot","name":"notify-user","payload":[[[[[[[[[1]]]]]]]]]}}`,
		metaFirst + `{"target":"discord-bot","name":"notify-user","payload":{"a":{"b":{"c":{"d":1}}},"e":[1,2,{"f":null}]}}}`,
		metaFirst + `{"payload":{},"target":"discord-bot","name":"notify-user"}}`,
		metaFirst + `{"name":"notify-user","target":"discord-bot","payload":{}}}`,
		metaFirst + `{"target":"discord-bot","payload":{},"name":"notify-user"}}`,
		metaFirst + `{"target":"discord-bot","target":"x","name":"notify-user","payload":{}}}`,
		metaFirst + `{"target":"disc\u006frd-bot","name":"notify-user","payload":{}}}`,
		metaFirst + `{"t\u0061rget":"discord-bot","name":"notify-user","payload":{}}}`,
		metaFirst + `{"target":"Discord","name":"notify-user","payload":{}}}`,
		metaFirst + `{"target":"discord-bot","name":"notify-user","payload":{},"source":"a/b"}}`,
		metaFirst + `{"target":"discord-bot","name":"notify-user","payload":{"a":}}}`,
		metaFirst + `{"target":"discord-bot","name":"notify-user","payload":{"b":1,"a":1}}}`,
		metaFirst + `{"target":"discord-bot","name":"notify-user","payload":{"a":1,"a":1}}}`,
		metaFirst + `{"target":1,"name":"notify-user","payload":{}}}`,
		metaFirst + `{"target":"discord-bot" "name":"notify-user","payload":{}}}`,
		metaFirst + `{"target":"discord-bot","name":"notify-user","payload":{}}}x`,
		metaFirst + `{"target":"discord-bot","name":"notify-user","payload":{}}}{}`,
		metaFirst + `{"target":"discord-bot","name":"notify-user","payload":{}},"command":{}}`,
		metaFirst + `{"target":"discord-bot","name":"notify-user","payload":{}},"metadata":{}}`,
		`{"metadata":` + meta("") + `}`,
		`{"metadata":` + meta("") + ` , "command" : { "target" : "discord-bot" , "name": "notify-user"`,
		`{"metadata":` + meta("") + `,"x":1}`,
		`{"metadata":` + meta(`,"replay":true,"replay_reason":"DLQ drain","replay_id":"rp-1"`) + `,"command":` + cmd("") + `}`,
		`{"metadata":` + meta(`,"replay":false`) + `,"command":` + cmd("") + `}`,
		`{"metadata":` + meta(`,"replay":false,"replay_id":"r"`) + `,"command":` + cmd("") + `}`,
		`{"metadata":` + meta(`,"replay":true,"replay_reason":"caf\u00e9","replay_id":"rp-1"`) + `,"command":` + cmd("") + `}`,
		`{"metadata":` + meta(`,"replay":true,"replay_reason":"café","replay_id":"rp-1"`) + `,"command":` + cmd("") + `}`,
		`{"metadata":` + meta(`,"replay":truex`) + `,"command":` + cmd("") + `}`,
		`{"metadata":` + meta(`,"replay":null`) + `,"command":` + cmd("") + `}`,
		strings.Replace(g, goodTS, "2025-04-07T12:58:00+02:00", 1),
		strings.Replace(g, goodTS, "2025-04-07T12:58:00.123456789-00:30", 1),
		strings.Replace(g, goodTS, "2025-02-30T12:58:00Z", 1),
		strings.Replace(g, `"id"`, `"\u0069d"`, 1),
		strings.Replace(g, `"id"`, `"id","id"`, 1),
		strings.Replace(g, `{"metadata"`, `{"metadata":{},"metadata"`, 1),
		strings.Replace(g, `"type":"snavio.command-sent"`, `"type":"snavio.command-sent","type":"snavio.command-sent"`, 1),
		`{}`, ``, ` `, `[]`, `{"metadata"`, `{"metadata":`, `{"metadata":{`,
	}
}

// corpusSeeds are the []byte inputs of FuzzParse's checked-in corpus.
func corpusSeeds(tb testing.TB) [][]byte {
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzParse", "*"))
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if q, ok := strings.CutPrefix(line, "[]byte("); ok {
				s, err := strconv.Unquote(strings.TrimSuffix(q, ")"))
				if err != nil {
					tb.Fatalf("%s: %v", f, err)
				}
				out = append(out, []byte(s))
			}
		}
	}
	return out
}

func TestParseFastPathSeeds(t *testing.T) {
	inputs := corpusSeeds(t)
	for _, s := range fastSeeds() {
		inputs = append(inputs, []byte(s))
	}
	lims := []Limits{{}, {MaxBytes: 4096, MaxDepth: 2, MaxMembers: 2}, {MaxDepth: 8, MaxMembers: 1}}
	fastAccepts := 0
	for i, in := range inputs {
		for _, lim := range lims {
			p := NewParser(lim)
			for mode := uint8(0); mode < 3; mode++ {
				if d := diffParse(p, in, mode); d != "" {
					t.Errorf("input %d %q, limits %+v, check mode %d: %s", i, in, lim, mode, d)
				}
			}
			var s state
			s.reset()
			if s.fast(in, p.limits, nil) == fastAccepted {
				fastAccepts++
			}
		}
	}
	if fastAccepts < 20 {
		t.Errorf("the fast path accepted only %d of the seeds", fastAccepts)
	}
}

// TestParseFastPathTaken: the traffic the fast path is for does not fall
// back to the token parser.
func TestParseFastPathTaken(t *testing.T) {
	for _, in := range []string{
		string(message1K()),
		good(), // a payload to canonicalize
		strings.Replace(good(), `{"user":"u-1","n":1}`, `{ "user" : "u-1" , "n" : 1.0e0 }`, 1),
		`{"metadata":` + meta(`,"replay":true,"replay_reason":"DLQ drain","replay_id":"rp-1"`) + `,"command":{"target":"a","name":"b","payload":[1,"x",{"a":null}]}}`,
		" {\n \"command\" : {\"payload\":{} , \"name\":\"b\",\"target\":\"a\"}\t,\r\"metadata\":" + meta("") + "}\n",
	} {
		var s state
		s.reset()
		if r := s.fast([]byte(in), NewParser(Limits{}).limits, nil); r != fastAccepted {
			t.Errorf("fast path result %d for %s", r, in)
		}
	}
}

// FuzzParseFastPath: on any input, under any check outcome and limits,
// Parse returns exactly what the token parser alone returns (verdict,
// error text and kind, Seen, Envelope, check calls), and keeps nothing of
// its input.
func FuzzParseFastPath(f *testing.F) {
	for _, in := range corpusSeeds(f) {
		f.Add(in, uint8(0), uint8(0))
	}
	for i, s := range fastSeeds() {
		f.Add([]byte(s), uint8(i), uint8(i/3))
	}
	// A payload whose canonical form is larger, under a limit of exactly
	// the input's size (mode's high bit): the canonical size check.
	f.Add([]byte(strings.Replace(good(), `{"user":"u-1","n":1}`, `[1e20,1e400,"x"]`, 1)), uint8(0x80), uint8(40))
	f.Fuzz(func(t *testing.T, in []byte, mode, lim uint8) {
		maxBytes := 8192
		if mode&0x80 != 0 {
			maxBytes = max(1, len(in))
		}
		p := NewParser(Limits{MaxBytes: maxBytes, MaxDepth: 1 + int(lim%80), MaxMembers: 1 + int(lim/80)*8})
		if d := diffParse(p, in, mode); d != "" {
			t.Fatalf("%q (check mode %d, limits %+v): %s", in, mode%3, p.limits, d)
		}
	})
}

// FuzzPlainString: the eight-bytes-at-a-time scan finds what a byte loop
// finds.
func FuzzPlainString(f *testing.F) {
	for _, s := range []string{`"0123456789abcdef0123"`, `"0123456\"89"`, "\"0123456\x7f89\"", "\"01234567\x1f\"", `"abcdefg\`, "\"ab\xc3\xa9cdefghij\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, next, ok := plainString(in, 0)
		var want []byte
		wnext, wok := 0, false
		if len(in) > 0 && in[0] == '"' {
			for j := 1; j < len(in); j++ {
				if c := in[j]; c == '"' {
					want, wnext, wok = in[1:j], j+1, true
					break
				} else if c == '\\' || c < 0x20 || c >= 0x7f {
					break
				}
			}
		}
		if ok != wok || !bytes.Equal(got, want) || ok && next != wnext {
			t.Fatalf("plainString(%q) = %q, %d, %v; want %q, %d, %v", in, got, next, ok, want, wnext, wok)
		}
	})
}
