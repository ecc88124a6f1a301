package key

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/api/deliveryapi"
	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/server/servertest"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// newDeliveryEnv serves the delivery-key API behind bearer tokens "op"
// (the operator) and "acme" (a tenant), with a route to orders.
func newDeliveryEnv(t *testing.T) (*env, *provenance.Signer) {
	e := newEnv(t)
	r := dispatchtest.RegistryRoute("orders", "create")
	if _, err := e.reg.Put(context.Background(), registry.Actor{Who: "test", At: t0}, registry.Item{Route: &r}); err != nil {
		t.Fatal(err)
	}
	sig, err := provenance.NewSigner(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	if err := deliveryapi.Mount(mux, deliveryapi.Options{Signer: sig, Registry: e.reg, Clock: e.clk}); err != nil {
		t.Fatal(err)
	}
	authed := servertest.OperatorAndAcme().Handler(mux)
	e.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.requests = append(e.requests, r.Method+" "+r.URL.RequestURI())
		authed.ServeHTTP(w, r)
	})
	return e, sig
}

func TestDeliveryPrintsTheTargetsKey(t *testing.T) {
	e, sig := newDeliveryEnv(t)
	if err := e.run(t, NewCmdDelivery(e.deps("op", output.JSON), nil), "--target", "orders"); err != nil {
		t.Fatal(err)
	}
	var k DeliveryKey
	if err := json.Unmarshal(e.out.Bytes(), &k); err != nil {
		t.Fatalf("output %s: %v", e.out, err)
	}
	want, _ := sig.Key("orders")
	if k.Target != "orders" || k.KeyID != sig.ID() || k.Key != base64.RawURLEncoding.EncodeToString(want.Secret) || k.Routes != 1 {
		t.Fatalf("printed %+v", k)
	}
	if e.err.Len() != 0 || len(e.requests) != 1 || e.requests[0] != "GET /v1/delivery-keys/orders" {
		t.Fatalf("stderr %q, requests %v", e.err, e.requests)
	}
	if err := e.run(t, NewCmdDelivery(e.deps("op", output.Table), nil), "--target", "orders"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.out.String(), k.Key) || !strings.Contains(e.err.String(), "secrets manager") {
		t.Fatalf("table %q, stderr %q", e.out, e.err)
	}
}

func TestDeliveryRefusals(t *testing.T) {
	e, _ := newDeliveryEnv(t)
	for _, tc := range []struct {
		token, target string
		usage         bool
		msg           string
	}{
		{"op", "Orders", true, `invalid --target "Orders"`},
		{"op", "mailer", false, "no route delivers to target mailer (HTTP 404)"},
		{"acme", "orders", false, "HTTP 403"},
	} {
		err := e.run(t, NewCmdDelivery(e.deps(tc.token, output.JSON), nil), "--target", tc.target)
		var ue *cmdutil.UsageError
		if err == nil || errors.As(err, &ue) != tc.usage || !strings.Contains(err.Error(), tc.msg) || e.out.Len() != 0 {
			t.Errorf("%s --target %s: %v (stdout %q)", tc.token, tc.target, err, e.out)
		}
		if tc.usage && len(e.requests) != 0 {
			t.Errorf("a bad --target reached the server: %v", e.requests)
		}
	}
}
