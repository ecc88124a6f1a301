package shield

import (
	"crypto/hmac"
	"crypto/sha256"
	stdjson "encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/internal/benchdata"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

type benchEnv struct {
	sh      *Shield
	detail  []byte
	content []byte // the signed content of detail
	mac     []byte // the secret of hmac-v2
}

func newBench(b *testing.B, sentAt time.Time, mut func([]byte) []byte) *benchEnv {
	b.Helper()
	k := key(b, "hmac-v2", 2)
	p := []byte(benchdata.Payload1K())
	if len(p) != 1024 {
		b.Fatalf("payload is %d bytes", len(p))
	}
	detail := message(b, sentAt, k, func(e *envelope.Envelope) { e.Command.Payload = p })
	env, _, err := envelope.NewParser(envelope.Limits{}).Parse(detail, nil)
	if err != nil {
		b.Fatal(err)
	}
	m := signing.FromEnvelope(&env, src)
	content, err := signing.AppendContent(nil, "hmac-v2", &m)
	if err != nil {
		b.Fatal(err)
	}
	if mut != nil {
		detail = mut(detail)
	}
	sh, err := New(Config{}, Deps{Clock: clock.NewFake(T), Keys: testRing(b), Bans: bans{}})
	if err != nil {
		b.Fatal(err)
	}
	return &benchEnv{sh: sh, detail: detail, content: content, mac: secret(2)}
}

// BenchmarkShield: a valid message with a 1 KiB payload, end to end through
// the shield, keys warm. Default configuration (1% skew sampling into a
// discarding sink).
func BenchmarkShield(b *testing.B) {
	be := newBench(b, T, nil)
	if _, err := be.sh.Check(src, be.detail); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(be.detail)))
	for b.Loop() {
		if _, err := be.sh.Check(src, be.detail); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFloorShield is the floor on the same bytes: json.Valid over the
// envelope and one HMAC-SHA256 over the signed content, with a keyed HMAC
// reused across iterations.
func BenchmarkFloorShield(b *testing.B) {
	be := newBench(b, T, nil)
	h := hmac.New(sha256.New, be.mac)
	var sum [sha256.Size]byte
	b.ReportAllocs()
	b.SetBytes(int64(len(be.detail)))
	for b.Loop() {
		if !stdjson.Valid(be.detail) {
			b.Fatal("invalid")
		}
		h.Reset()
		h.Write(be.content)
		h.Sum(sum[:0])
	}
}

// BenchmarkShieldRejectWindow: the same message 2 minutes old, rejected by
// the replay window before the payload is read and before any HMAC.
func BenchmarkShieldRejectWindow(b *testing.B) {
	be := newBench(b, T.Add(-2*time.Minute), nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(be.detail)))
	for b.Loop() {
		if _, err := be.sh.Check(src, be.detail); err == nil {
			b.Fatal("accepted")
		}
	}
}

// BenchmarkShieldBadSignature: the same message with one signature digit
// changed; it costs the whole accepted path and is rejected at the compare.
func BenchmarkShieldBadSignature(b *testing.B) {
	be := newBench(b, T, func(d []byte) []byte {
		i := strings.Index(string(d), `"hmac":"`) + len(`"hmac":"`)
		if d[i] == '0' {
			d[i] = '1'
		} else {
			d[i] = '0'
		}
		return d
	})
	b.ReportAllocs()
	b.SetBytes(int64(len(be.detail)))
	for b.Loop() {
		if _, err := be.sh.Check(src, be.detail); err == nil {
			b.Fatal("accepted")
		}
	}
}

func TestShieldAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	res := testing.Benchmark(BenchmarkShield)
	if a := res.AllocsPerOp(); a > 4 {
		t.Fatalf("accepted message: %d allocs/op, the budget is 4", a)
	}
}
