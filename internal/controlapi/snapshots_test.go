package controlapi

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server/servertest"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

type snapshotFixture struct {
	clk   *clock.Fake
	store *embedded.Store
	sig   *snapshot.Ed25519Signer
	gen   Generator
	srv   *httptest.Server
}

func newSnapshotFixture(t *testing.T, gen func(*snapshotFixture) Generator) *snapshotFixture {
	t.Helper()
	fx := &snapshotFixture{clk: clock.NewFake(t0)}
	st, err := embedded.Open(embedded.Options{Ephemeral: true, Clock: fx.clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	fx.store = st
	fx.sig, err = snapshot.NewEd25519Signer("local-1", ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := dispatchtest.RegistryRoute("billing", "charge")
	a := dispatchtest.RegistryACL("shop/web", "billing", "charge")
	for _, it := range []registry.Item{{Route: &r}, {ACL: &a}} {
		if _, err := st.Registry().Put(ctx, registry.Actor{Who: "test", At: t0}, it); err != nil {
			t.Fatal(err)
		}
	}
	g, err := snapshot.NewGenerator(snapshot.GeneratorConfig{}, snapshot.GeneratorDeps{Reader: st.Registry(), Store: st.Snapshots(), Signer: fx.sig, Clock: fx.clk})
	if err != nil {
		t.Fatal(err)
	}
	fx.gen = g
	if gen != nil {
		fx.gen = gen(fx)
	}
	api, err := NewSnapshotAPI(SnapshotOptions{Store: st.Snapshots(), Generator: fx.gen, KeyID: fx.sig.KeyID(), PublicKey: fx.sig.PublicKey()})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	fx.srv = httptest.NewServer(servertest.Authenticated(mux, servertest.Headers))
	t.Cleanup(fx.srv.Close)
	return fx
}

func (fx *snapshotFixture) call(t *testing.T, method, path, tenant string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, fx.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tenant != "" {
		req.Header.Set("X-Test-Tenant", tenant)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b, resp.Header
}

func TestGenerateListFetchVerify(t *testing.T) {
	fx := newSnapshotFixture(t, nil)
	// Nothing published yet.
	status, b, _ := fx.call(t, "GET", "/v1/snapshots/full/latest", "")
	wantError(t, status, b, http.StatusNotFound, "no snapshot has been published")
	var l wire.SnapshotList
	if status, b, _ = fx.call(t, "GET", "/v1/snapshots", ""); status != 200 || json.Unmarshal(b, &l) != nil {
		t.Fatalf("list = %d %s", status, b)
	}
	if len(l.Documents) != 3 || l.Documents[0].Latest != "" || l.Documents[0].Versions != 0 || l.KeyID != "local-1" {
		t.Fatalf("empty list = %+v", l)
	}

	status, b, _ = fx.call(t, "POST", "/v1/snapshots/generate", "")
	var g wire.SnapshotGenerated
	if status != 200 || json.Unmarshal(b, &g) != nil || g.VersionID != snapshot.VersionIDAt(t0) || g.Bytes[snapshot.KindFull] == 0 {
		t.Fatalf("generate = %d %s", status, b)
	}
	fx.clk.Advance(time.Second)
	if status, b, _ = fx.call(t, "POST", "/v1/snapshots/generate", ""); status != 200 {
		t.Fatalf("second generate = %d %s", status, b)
	}

	l = wire.SnapshotList{}
	if status, b, _ = fx.call(t, "GET", "/v1/snapshots", "acme"); status != 200 || json.Unmarshal(b, &l) != nil {
		t.Fatalf("tenant list = %d %s", status, b)
	}
	full := l.Documents[0]
	v2 := snapshot.VersionIDAt(t0.Add(time.Second))
	if full.Kind != snapshot.KindFull || full.Latest != v2 || full.Versions != 2 || len(full.Recent) != 2 || full.Recent[0] != v2 || full.Path != snapshot.DefaultPaths().Full {
		t.Fatalf("full = %+v", full)
	}

	status, body, hdr := fx.call(t, "GET", "/v1/snapshots/full/latest", "")
	if status != 200 || hdr.Get(wire.SnapshotVersionHeader) != v2 || len(body) != full.Bytes {
		t.Fatalf("latest = %d %q %d bytes (want %d)", status, hdr.Get(wire.SnapshotVersionHeader), len(body), full.Bytes)
	}

	// The public key the API serves verifies the document, in both of its
	// encodings.
	var pk wire.SnapshotPublicKey
	if status, b, _ = fx.call(t, "GET", "/v1/snapshots/public-key", "acme"); status != 200 || json.Unmarshal(b, &pk) != nil {
		t.Fatalf("public key = %d %s", status, b)
	}
	raw, err := base64.StdEncoding.DecodeString(pk.PublicKey)
	if err != nil || pk.KeyID != "local-1" || pk.Algorithm != "Ed25519ph" {
		t.Fatalf("public key = %+v (%v)", pk, err)
	}
	blk, _ := pem.Decode([]byte(pk.PEM))
	if blk == nil {
		t.Fatalf("no PEM in %q", pk.PEM)
	}
	parsed, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil || !bytes.Equal(parsed.(ed25519.PublicKey), raw) {
		t.Fatalf("PEM key differs: %v", err)
	}
	doc, err := snapshot.Parse(body, snapshot.ParseOptions{Kind: snapshot.KindFull, Trusted: snapshot.TrustedKeys{pk.KeyID: raw}})
	if err != nil || doc.VersionID != v2 || len(doc.Routes) != 1 || len(doc.ACLs) != 1 {
		t.Fatalf("parse = %+v, %v", doc, err)
	}
}

func TestAccessAndBadInput(t *testing.T) {
	fx := newSnapshotFixture(t, nil)
	for _, tc := range []struct{ method, path string }{
		{"POST", "/v1/snapshots/generate"},
		{"GET", "/v1/snapshots/full/latest"},
		{"GET", "/v1/snapshots/hmac/latest"},
	} {
		status, b, _ := fx.call(t, tc.method, tc.path, "acme")
		wantError(t, status, b, http.StatusForbidden, "needs the operator")
	}
	status, b, _ := fx.call(t, "GET", "/v1/snapshots/bogus/latest", "")
	wantError(t, status, b, http.StatusBadRequest, `kind "bogus"`)
}

type failingGen struct{ err error }

func (f failingGen) Generate(context.Context) (snapshot.Published, error) {
	return snapshot.Published{}, f.err
}

func TestGenerateFailures(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		want   string
	}{
		{snapshot.ErrTooLargeToPublish, http.StatusUnprocessableEntity, "size cap"},
		{fmt.Errorf("snapshot: validate: %w", &registry.ValidationError{Problems: []registry.Problem{{ID: registry.RouteID("billing", "charge"), Field: "queue_arn", Msg: "queue is FIFO"}}}), http.StatusUnprocessableEntity, "FIFO"},
		{errors.New("disk on fire"), http.StatusInternalServerError, "disk on fire"},
	} {
		fx := newSnapshotFixture(t, func(*snapshotFixture) Generator { return failingGen{tc.err} })
		status, b, _ := fx.call(t, "POST", "/v1/snapshots/generate", "")
		wantError(t, status, b, tc.status, tc.want)
	}
}

func TestNewRefusesMissingOptions(t *testing.T) {
	pub := make(ed25519.PublicKey, ed25519.PublicKeySize)
	st := snapshotStoreStub{}
	for _, tc := range []struct {
		o    SnapshotOptions
		want string
	}{
		{SnapshotOptions{}, "Store"},
		{SnapshotOptions{Store: st}, "Generator"},
		{SnapshotOptions{Store: st, Generator: failingGen{}}, "PublicKey"},
		{SnapshotOptions{Store: st, Generator: failingGen{}, PublicKey: pub}, "KeyID"},
	} {
		if _, err := NewSnapshotAPI(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want %q", tc.o, err, tc.want)
		}
	}
}

type snapshotStoreStub struct{ snapshot.Store }

func TestParseKind(t *testing.T) {
	for _, k := range []string{"full", "acl", "hmac"} {
		if got, err := wire.ParseSnapshotKind(k); err != nil || string(got) != k {
			t.Errorf("wire.ParseSnapshotKind(%q) = %q, %v", k, got, err)
		}
	}
	if _, err := wire.ParseSnapshotKind("FULL"); err == nil {
		t.Error("wire.ParseSnapshotKind(FULL) accepted")
	}
}
