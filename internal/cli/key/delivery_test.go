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

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/route/routetest"
	"github.com/snavio/snavio/internal/controlapi"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// newDeliveryEnv serves the delivery-key API behind bearer tokens "op"
// (the operator) and "acme" (a tenant), with a route to orders.
func newDeliveryEnv(t *testing.T) (*routetest.Env, *provenance.Signer) {
	sig, err := provenance.NewSigner(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	e := routetest.New(t, nil, func(mux *http.ServeMux, e *routetest.Env) {
		if err := controlapi.MountDelivery(mux, controlapi.DeliveryOptions{Signer: sig, Registry: e.Reg, Clock: e.Clk}); err != nil {
			t.Fatal(err)
		}
	})
	r := dispatchtest.RegistryRoute("orders", "create")
	if _, err := e.Reg.Put(context.Background(), registry.Actor{Who: "test", At: t0}, registry.Item{Route: &r}); err != nil {
		t.Fatal(err)
	}
	return e, sig
}

func TestDeliveryPrintsTheTargetsKey(t *testing.T) {
	e, sig := newDeliveryEnv(t)
	if err := e.Run(t, NewCmdDelivery(e.Deps("op", output.JSON), nil), "--target", "orders"); err != nil {
		t.Fatal(err)
	}
	var k DeliveryKey
	if err := json.Unmarshal(e.Out.Bytes(), &k); err != nil {
		t.Fatalf("output %s: %v", e.Out, err)
	}
	want, _ := sig.Key("orders")
	if k.Target != "orders" || k.KeyID != sig.ID() || k.Key != base64.RawURLEncoding.EncodeToString(want.Secret) || k.Routes != 1 {
		t.Fatalf("printed %+v", k)
	}
	if e.Err.Len() != 0 || len(e.Requests) != 1 || e.Requests[0] != "GET /v1/delivery-keys/orders" {
		t.Fatalf("stderr %q, requests %v", e.Err, e.Requests)
	}
	if err := e.Run(t, NewCmdDelivery(e.Deps("op", output.Table), nil), "--target", "orders"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.Out.String(), k.Key) || !strings.Contains(e.Err.String(), "secrets manager") {
		t.Fatalf("table %q, stderr %q", e.Out, e.Err)
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
		err := e.Run(t, NewCmdDelivery(e.Deps(tc.token, output.JSON), nil), "--target", tc.target)
		var ue *cmdutil.UsageError
		if err == nil || errors.As(err, &ue) != tc.usage || !strings.Contains(err.Error(), tc.msg) || e.Out.Len() != 0 {
			t.Errorf("%s --target %s: %v (stdout %q)", tc.token, tc.target, err, e.Out)
		}
		if tc.usage && len(e.Requests) != 0 {
			t.Errorf("a bad --target reached the server: %v", e.Requests)
		}
	}
}
