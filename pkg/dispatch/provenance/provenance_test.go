package provenance

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

type vector struct {
	Description  string `json:"description"`
	MasterHex    string `json:"master_hex"`
	KeyID        string `json:"key_id"`
	TargetKey    string `json:"target_key_base64url"`
	CommandID    string `json:"command_id"`
	Source       string `json:"source"`
	Target       string `json:"target"`
	CommandName  string `json:"command_name"`
	Body         string `json:"body"`
	CanonicalHex string `json:"canonical_hex"`
	Signature    string `json:"signature"`
}

func (v vector) message() Message {
	return Message{CommandID: v.CommandID, Source: v.Source, Target: v.Target, Command: v.CommandName, Body: []byte(v.Body)}
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	b, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Scheme  string   `json:"scheme"`
		Note    string   `json:"note"`
		Vectors []vector `json:"vectors"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.Scheme != Scheme || len(doc.Vectors) < 5 {
		t.Fatalf("vectors file: scheme %q, %d vectors", doc.Scheme, len(doc.Vectors))
	}
	return doc.Vectors
}

// TestVectors checks this implementation against the vectors an
// independent one made (testdata/genvectors.py): key id, derived key,
// exact signed bytes and signature, and that both verifiers accept them.
func TestVectors(t *testing.T) {
	sigs := map[string]bool{}
	for _, v := range loadVectors(t) {
		t.Run(v.Description, func(t *testing.T) {
			master, _ := hex.DecodeString(v.MasterHex)
			s, err := NewSigner(master)
			if err != nil {
				t.Fatal(err)
			}
			if s.ID() != v.KeyID || KeyID(master) != v.KeyID {
				t.Fatalf("key id %s, want %s", s.ID(), v.KeyID)
			}
			k, err := s.Key(v.Target)
			if err != nil || base64.RawURLEncoding.EncodeToString(k.Secret) != v.TargetKey || k.ID != v.KeyID || k.Target != v.Target {
				t.Fatalf("Key(%s) = %+v, %v; want secret %s", v.Target, k, err, v.TargetKey)
			}
			m := v.message()
			m.KeyID = v.KeyID
			c, err := AppendCanonical(nil, &m)
			if err != nil || hex.EncodeToString(c) != v.CanonicalHex {
				t.Fatalf("canonical\n got %x (%v)\nwant %s", c, err, v.CanonicalHex)
			}
			m = v.message()
			if err := s.Sign(&m); err != nil || m.Signature != v.Signature || m.KeyID != v.KeyID {
				t.Fatalf("Sign = %s %s, %v; want %s %s", m.KeyID, m.Signature, err, v.KeyID, v.Signature)
			}
			if err := Verify(k, &m); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if err := s.Verify(&m); err != nil {
				t.Fatalf("Signer.Verify: %v", err)
			}
			sigs[v.Signature] = true
		})
	}
	if len(sigs) != len(loadVectors(t)) {
		t.Fatal("two vectors share a signature: each must change what is signed")
	}
}

// TestDocumentedVector keeps the worked example of
// docs/security/delivery-signature.md equal to the first vector.
func TestDocumentedVector(t *testing.T) {
	b, err := os.ReadFile("../../../docs/security/delivery-signature.md")
	if err != nil {
		t.Fatal(err)
	}
	v := loadVectors(t)[0]
	for _, want := range []string{v.MasterHex, v.KeyID, v.TargetKey, v.Signature, v.Body} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("delivery-signature.md lacks %q of the first vector", want)
		}
	}
}

var testMaster = bytes.Repeat([]byte{0x42}, 32)

func testSigner(t testing.TB) *Signer {
	t.Helper()
	s, err := NewSigner(testMaster)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testMessage() Message {
	return Message{CommandID: "0f8fad5b-d9cb-469f-a165-70867728950e", Source: "demo/app", Target: "orders", Command: "create",
		Body: []byte(`{"command":{"target":"orders","name":"create","payload":{"qty":2}}}`)}
}

func signed(t *testing.T, s *Signer, m Message) Message {
	t.Helper()
	if err := s.Sign(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestVerifyRefusesEveryChange(t *testing.T) {
	s := testSigner(t)
	k, _ := s.Key("orders")
	good := signed(t, s, testMessage())
	flip := func(v string) string { b := []byte(v); b[len(b)-1] ^= 1; return string(b) }
	mailer := testMessage()
	mailer.Target = "mailer"
	mailer = signed(t, s, mailer)
	other, _ := NewSigner(bytes.Repeat([]byte{0x43}, 32))
	for name, tc := range map[string]struct {
		mut  func(*Message)
		want error
	}{
		"command id":    {func(m *Message) { m.CommandID = flip(m.CommandID) }, ErrBadSignature},
		"source":        {func(m *Message) { m.Source = "evil/app" }, ErrBadSignature},
		"command name":  {func(m *Message) { m.Command = "cancel" }, ErrBadSignature},
		"body":          {func(m *Message) { m.Body = bytes.Replace(m.Body, []byte("2"), []byte("3"), 1) }, ErrBadSignature},
		"body extended": {func(m *Message) { m.Body = append(bytes.Clone(m.Body), ' ') }, ErrBadSignature},
		// Moving bytes between attributes changes the signed bytes.
		"boundary":                   {func(m *Message) { m.Source, m.Command = m.Source+"c", m.Command[1:] }, ErrBadSignature},
		"signature flipped":          {func(m *Message) { m.Signature = flip(m.Signature) }, ErrBadSignature},
		"padded signature":           {func(m *Message) { m.Signature += "=" }, ErrBadSignature},
		"std base64":                 {func(m *Message) { m.Signature = strings.NewReplacer("-", "+", "_", "/").Replace(m.Signature) + "+" }, ErrBadSignature},
		"other version":              {func(m *Message) { m.Signature = "v2=" + m.Signature[3:] }, ErrBadSignature},
		"newline in source":          {func(m *Message) { m.Source = "demo/app\nx" }, ErrBadSignature},
		"unsigned":                   {func(m *Message) { m.Signature, m.KeyID = "", "" }, ErrUnsigned},
		"unknown key id":             {func(m *Message) { m.KeyID = "d1-00000000" }, ErrUnknownKey},
		"no key id":                  {func(m *Message) { m.KeyID = "" }, ErrUnknownKey},
		"another master":             {func(m *Message) { *m = signed(t, other, testMessage()) }, ErrUnknownKey},
		"signature of mailer's copy": {func(m *Message) { m.Signature = mailer.Signature }, ErrBadSignature},
	} {
		m := good
		tc.mut(&m)
		if err := s.Verify(&m); !errors.Is(err, tc.want) || Reason(err) != tc.want.Error() {
			t.Errorf("%s: Signer.Verify = %v, want %v", name, err, tc.want)
		}
		if err := Verify(k, &m); !errors.Is(err, tc.want) {
			t.Errorf("%s: Verify = %v, want %v", name, err, tc.want)
		}
	}
	// A genuine message of another target: valid for its own target, and
	// refused by this target's key.
	if err := s.Verify(&mailer); err != nil {
		t.Fatalf("mailer's own message: %v", err)
	}
	if err := Verify(k, &mailer); !errors.Is(err, ErrForeignTarget) || Reason(err) != ReasonForeignTarget {
		t.Fatalf("orders' key on mailer's message: %v", err)
	}
	// Relabelled as orders, mailer's message does not verify.
	relabelled := mailer
	relabelled.Target = "orders"
	if err := Verify(k, &relabelled); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("mailer's message relabelled for orders: %v", err)
	}
	if err := Verify(Key{Target: "orders", ID: s.ID(), Secret: k.Secret[:16]}, &good); err == nil || Reason(err) != "" {
		t.Fatalf("a short key is a caller error, not a refusal: %v", err)
	}
}

func TestSignRefusesWhatCannotBeSigned(t *testing.T) {
	s := testSigner(t)
	for name, mut := range map[string]func(*Message){
		"newline in target":  func(m *Message) { m.Target = "orders\nmailer" },
		"newline in command": func(m *Message) { m.Command = "create\n" },
		"newline in id":      func(m *Message) { m.CommandID = "\n" },
		"no source":          func(m *Message) { m.Source = "" },
		"no target":          func(m *Message) { m.Target = "" },
	} {
		m := testMessage()
		mut(&m)
		if err := s.Sign(&m); err == nil || m.Signature != "" || m.KeyID != "" {
			t.Errorf("%s: Sign = %v, signature %q", name, err, m.Signature)
		}
	}
	if _, err := NewSigner(testMaster[:31]); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("short master: %v", err)
	}
	if _, err := s.Key("a\nb"); err == nil {
		t.Error("Key accepts a newline")
	}
	if _, err := s.Key(""); err == nil {
		t.Error("Key accepts an empty target")
	}
}

func TestSignerCopiesMaster(t *testing.T) {
	master := bytes.Clone(testMaster)
	s, _ := NewSigner(master)
	before := signed(t, s, testMessage())
	master[0] ^= 0xff
	if after := signed(t, s, testMessage()); after.Signature != before.Signature {
		t.Fatal("NewSigner keeps a reference to the caller's master")
	}
}

func TestAttributesRoundTrip(t *testing.T) {
	s := testSigner(t)
	m := signed(t, s, testMessage())
	attrs := m.Attributes()
	if len(attrs) != 6 || attrs[AttrSignature] != m.Signature || attrs[AttrKeyID] != s.ID() || attrs[AttrTarget] != "orders" {
		t.Fatalf("attributes %v", attrs)
	}
	back := FromAttributes(attrs, m.Body)
	if err := s.Verify(&back); err != nil {
		t.Fatal(err)
	}
	if back := FromAttributes(nil, m.Body); !errors.Is(s.Verify(&back), ErrUnsigned) {
		t.Fatal("a message without attributes must be unsigned")
	}
}

// TestSignerBound: the per-target cache never holds more than its bound,
// and signatures stay right when targets are dropped and made again.
func TestSignerBound(t *testing.T) {
	s := testSigner(t)
	s.max = 3
	want := map[string]string{}
	for round := range 3 {
		for i := range 10 {
			m := testMessage()
			m.Target = fmt.Sprintf("t%d", i)
			m = signed(t, s, m)
			if round == 0 {
				want[m.Target] = m.Signature
			} else if want[m.Target] != m.Signature {
				t.Fatalf("target %s signed differently after eviction", m.Target)
			}
			if n := len(s.targets); n > s.max {
				t.Fatalf("%d targets cached, bound %d", n, s.max)
			}
		}
	}
}

// TestVerifyDoesNotFillTheCache: messages naming targets the signer never
// signed for (planted ones) are checked without taking cache places.
func TestVerifyDoesNotFillTheCache(t *testing.T) {
	s := testSigner(t)
	m := signed(t, s, testMessage())
	other := testSigner(t)
	for i := range 10 {
		p := testMessage()
		p.Target = fmt.Sprintf("planted-%d", i)
		p = signed(t, other, p)
		if err := s.Verify(&p); err != nil {
			t.Fatalf("a genuine message of an uncached target: %v", err)
		}
		p.Body = append(bytes.Clone(p.Body), ' ')
		if err := s.Verify(&p); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("a changed message of an uncached target: %v", err)
		}
	}
	if len(s.targets) != 1 || s.targets["orders"] == nil {
		t.Fatalf("cached targets: %v", s.targets)
	}
	if err := s.Verify(&m); err != nil {
		t.Fatal(err)
	}
}

func TestSignAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	s := testSigner(t)
	m := testMessage()
	_ = s.Sign(&m)
	if n := testing.AllocsPerRun(200, func() { m.Signature = ""; _ = s.Sign(&m) }); n > 1 {
		t.Fatalf("Sign allocates %v times; want only the signature string", n)
	}
	if n := testing.AllocsPerRun(200, func() { _ = s.Verify(&m) }); n != 0 {
		t.Fatalf("Signer.Verify allocates %v times", n)
	}
}

func TestConcurrentUse(t *testing.T) {
	s := testSigner(t)
	s.max = 4
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				m := testMessage()
				m.Target = fmt.Sprintf("t%d", (g+i)%7)
				if err := s.Sign(&m); err != nil {
					t.Error(err)
					return
				}
				if err := s.Verify(&m); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// FuzzVerify: neither verifier panics; each accepts exactly the signature
// Sign makes for the message (so no input forges one), and refuses the
// rest with a refusal reason. Seeds are in testdata/fuzz/FuzzVerify.
func FuzzVerify(f *testing.F) {
	s, _ := NewSigner(testMaster)
	m := testMessage()
	_ = s.Sign(&m)
	f.Add(m.KeyID, m.Signature, m.CommandID, m.Source, m.Target, m.Command, m.Body)
	f.Fuzz(func(t *testing.T, keyID, sig, id, source, target, command string, body []byte) {
		m := Message{KeyID: keyID, Signature: sig, CommandID: id, Source: source, Target: target, Command: command, Body: body}
		err := s.Verify(&m)
		want := m
		want.Signature, want.KeyID = "", ""
		serr := s.Sign(&want)
		switch {
		case err == nil && (serr != nil || sig != want.Signature || keyID != s.ID()):
			t.Fatalf("accepted %q for %+v; Sign gives %q, %v", sig, m, want.Signature, serr)
		case err != nil && Reason(err) == "":
			t.Fatalf("refused without a reason: %v", err)
		case err != nil && serr == nil && sig == want.Signature && keyID == s.ID():
			t.Fatalf("refused the signature Sign makes: %v", err)
		}
		if target == "" || strings.Contains(target, "\n") {
			return
		}
		k, _ := s.Key(target)
		if kerr := Verify(k, &m); (kerr == nil) != (err == nil) {
			t.Fatalf("Verify = %v, Signer.Verify = %v", kerr, err)
		}
	})
}
