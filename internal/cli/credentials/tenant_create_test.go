package credentials

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/cli/secretcmd"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
)

// halfPlatform issues tokens and fails to create credentials; the other
// Platform methods are never called (the nil interface would panic).
type halfPlatform struct{ platform.Platform }

func (halfPlatform) IssueToken(_ context.Context, r wire.TokenIssueRequest) (wire.TokenIssued, error) {
	var t wire.TokenIssued
	t.ID, t.Tenant, t.Secret = "tok_0123456789ab", r.Tenant, "snvt_secret"
	return t, nil
}

func (halfPlatform) CreateCredential(context.Context, wire.CredentialCreateRequest) (wire.CredentialCreated, error) {
	return wire.CredentialCreated{}, errors.New("store full")
}

// TestTenantCreateKeepsTheTokenWhenTheCredentialFails: the token that was
// issued is shown (or kept in its file) and the error says how to finish;
// the credentials file, which holds nothing, is removed.
func TestTenantCreateKeepsTheTokenWhenTheCredentialFails(t *testing.T) {
	for _, toFile := range []bool{false, true} {
		dir := t.TempDir()
		var out, errOut bytes.Buffer
		d := secretcmd.Deps{
			Platform: func() (platform.Platform, error) { return halfPlatform{}, nil },
			Printer: func() (*output.Printer, error) {
				return output.NewPrinter(&out, output.JSON, output.NewStyles(&out, false)), nil
			},
			ErrOut: &errOut,
		}
		o := &tenantCreate{d: d, section: "default", credentialsFile: filepath.Join(dir, "c")}
		if toFile {
			o.tokenFile = filepath.Join(dir, "t")
		}
		err := o.run(context.Background(), "acme")
		if err == nil || !strings.Contains(err.Error(), "the token tok_0123456789ab was issued (above), but creating acme's ingress credential failed: store full") ||
			!strings.Contains(err.Error(), "snavio tenant credentials create --tenant acme") {
			t.Fatalf("toFile=%v: %v", toFile, err)
		}
		if !strings.Contains(out.String(), `"id": "tok_0123456789ab"`) {
			t.Errorf("toFile=%v: the token is not shown: %s", toFile, out.String())
		}
		if b, err := os.ReadFile(filepath.Join(dir, "t")); toFile && (err != nil || string(b) != "snvt_secret\n") {
			t.Errorf("the token file = %q, %v; want the token kept", b, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "c")); !os.IsNotExist(err) {
			t.Errorf("toFile=%v: the empty credentials file is left: %v", toFile, err)
		}
	}
}
