package controlapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
)

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// FuzzDecodeIssueRequest: whatever body a client sends, the decoder never
// panics; every request it accepts names a tenant the token store issues
// a token for, and the token authenticates as exactly that tenant.
func FuzzDecodeIssueRequest(f *testing.F) {
	for _, s := range []string{
		`{"tenant":"acme"}`,
		`{"tenant":"a.b_c-9"}`,
		`{"tenant":"acme/billing"}`,
		`{"tenant":""}`,
		`{"tenant":"acme","x":1}`,
		`{"tenant":"acme"} {}`,
		`{"Tenant":"ACME"}`,
		`{"tenant":"\u0000"}`,
		``,
		`null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := DecodeIssueRequest(b)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error message")
			}
			return
		}
		if !envelope.ValidTenant(req.Tenant) {
			t.Fatalf("accepted tenant %q is not a tenant id", req.Tenant)
		}
		// Accepted requests round-trip.
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := DecodeIssueRequest(again); err != nil || back != req {
			t.Fatalf("round trip of %+v: %+v, %v", req, back, err)
		}
		st, err := server.OpenFileTokenStore(filepath.Join(t.TempDir(), server.TenantTokensFile), clock.NewFake(t0))
		if err != nil {
			t.Fatal(err)
		}
		tok, info, err := st.Issue(req.Tenant)
		if err != nil {
			t.Fatalf("the store refused tenant %q that the decoder accepted: %v", req.Tenant, err)
		}
		if wire.CheckTokenID("id", info.ID) != nil {
			t.Fatalf("the store's id %q fails CheckID", info.ID)
		}
		if p, err := st.Authenticate(t.Context(), tok); err != nil || p != server.TenantPrincipal(req.Tenant) {
			t.Fatalf("token of %q authenticates as %v, %v", req.Tenant, p, err)
		}
	})
}
