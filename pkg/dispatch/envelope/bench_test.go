package envelope

import (
	"fmt"
	"strings"
	"testing"
)

// payload1K is a canonical JSON object of exactly 1024 bytes, the payload
// of the shield's and the dispatcher's benchmarks.
func payload1K() string {
	var sb strings.Builder
	sb.WriteString("{")
	for i := 0; ; i++ {
		field := fmt.Sprintf(`"k%03d":"value number %04d",`, i, i)
		if sb.Len()+len(field) > 1024-40 {
			break
		}
		sb.WriteString(field)
	}
	pad := 1024 - sb.Len() - len(`"zz":""}`)
	sb.WriteString(`"zz":"` + strings.Repeat("p", pad) + `"}`)
	return sb.String()
}

// message1K is a valid envelope with the canonical 1 KiB payload: what a
// producer that signs through package signing sends.
func message1K() []byte {
	return []byte(strings.Replace(good(), `{"user":"u-1","n":1}`, payload1K(), 1))
}

// BenchmarkParse1K: one valid envelope with a canonical 1 KiB payload, the
// shape of the dispatcher's traffic.
func BenchmarkParse1K(b *testing.B) {
	p := NewParser(Limits{})
	in := message1K()
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, _, err := p.Parse(in, nil); err != nil {
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
	in := message1K()
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, _, err := p.parse(in, nil, false); err != nil {
			b.Fatal(err)
		}
	}
}
