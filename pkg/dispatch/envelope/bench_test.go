package envelope

import (
	"strings"
	"testing"

	"github.com/snavio/snavio/pkg/dispatch/internal/benchdata"
)

// message1K is a valid envelope with the canonical 1 KiB payload: what a
// producer that signs through package signing sends.
func message1K() []byte {
	return []byte(strings.Replace(good(), `{"user":"u-1","n":1}`, benchdata.Payload1K(), 1))
}

// BenchmarkParse1K: one valid envelope with a canonical 1 KiB payload, the
// shape of the dispatcher's traffic.
func BenchmarkParse1K(b *testing.B) {
	p := NewParser(Limits{})
	benchParse(b, message1K(), func(in []byte) error { _, _, err := p.Parse(in, nil); return err })
}

// benchParse measures parse on in, reporting bytes and allocations.
func benchParse(b *testing.B, in []byte, parse func([]byte) error) {
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if err := parse(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendJSON1K: the delivered form of an accepted 1 KiB message
// (command.source set) into a reused buffer, as the dispatcher writes it.
func BenchmarkAppendJSON1K(b *testing.B) {
	env, _, err := NewParser(Limits{}).Parse(message1K(), nil)
	if err != nil {
		b.Fatal(err)
	}
	env.Command.Source = "tenant-a/billing"
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		if buf, err = env.AppendJSON(buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkParseTokens1K is BenchmarkParse1K through the token parser
// alone, as Parse ran before its fast path: the reference Parse1K is
// measured against in the same run.
func BenchmarkParseTokens1K(b *testing.B) {
	p := NewParser(Limits{})
	benchParse(b, message1K(), func(in []byte) error { _, _, err := p.parse(in, nil, false); return err })
}
