package controlapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

var deliveryT0 = time.Date(2026, 11, 25, 21, 0, 0, 0, time.UTC)

func deliverySetup(t *testing.T) (*http.ServeMux, *provenance.Signer) {
	t.Helper()
	reg := memstore.NewRegistry()
	by := registry.Actor{Who: "test", At: deliveryT0.Add(-time.Hour)}
	for _, cmd := range []string{"create", "cancel"} {
		r := dispatchtest.RegistryRoute("orders", cmd)
		if _, err := reg.Put(context.Background(), by, registry.Item{Route: &r}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := provenance.NewSigner(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	if err := MountDelivery(mux, DeliveryOptions{Signer: s, Registry: reg, Clock: clock.NewFake(deliveryT0)}); err != nil {
		t.Fatal(err)
	}
	return mux, s
}

func deliveryGet(mux *http.ServeMux, p *server.Principal, target string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", "/v1/delivery-keys/"+target, nil)
	if p != nil {
		req = req.WithContext(server.WithPrincipal(req.Context(), *p))
	}
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	return w
}

// TestKeyVerifiesTheTargetsMessages: the key the operator gets verifies a
// message signed for the target, and refuses one for another target.
func TestKeyVerifiesTheTargetsMessages(t *testing.T) {
	mux, s := deliverySetup(t)
	op := server.OperatorPrincipal()
	w := deliveryGet(mux, &op, "orders")
	if w.Code != http.StatusOK || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("answer %d %v %s", w.Code, w.Header(), w.Body)
	}
	var k wire.DeliveryKey
	if err := json.Unmarshal(w.Body.Bytes(), &k); err != nil {
		t.Fatal(err)
	}
	if k.Target != "orders" || k.KeyID != s.ID() || k.Scheme != provenance.Scheme || k.Routes != 2 {
		t.Fatalf("key %+v", k)
	}
	secret, err := base64.RawURLEncoding.DecodeString(k.Key)
	if err != nil || len(secret) != provenance.KeyLen {
		t.Fatalf("key %q: %v", k.Key, err)
	}
	key := provenance.Key{Target: k.Target, ID: k.KeyID, Secret: secret}
	m := provenance.Message{CommandID: "0f8fad5b-d9cb-469f-a165-70867728950e", Source: "demo/app", Target: "orders", Command: "create", Body: []byte(`{}`)}
	if err := s.Sign(&m); err != nil {
		t.Fatal(err)
	}
	if err := provenance.Verify(key, &m); err != nil {
		t.Fatalf("the served key does not verify the target's message: %v", err)
	}
	m.Target, m.Signature = "mailer", ""
	if err := s.Sign(&m); err != nil {
		t.Fatal(err)
	}
	if err := provenance.Verify(key, &m); provenance.Reason(err) != provenance.ReasonForeignTarget {
		t.Fatalf("another target's message: %v", err)
	}
}

func TestDeliveryRefusals(t *testing.T) {
	mux, _ := deliverySetup(t)
	op, tenant := server.OperatorPrincipal(), server.TenantPrincipal("demo")
	for _, tc := range []struct {
		name   string
		p      *server.Principal
		target string
		code   int
		fix    string
	}{
		{"no principal", nil, "orders", http.StatusUnauthorized, "operator token"},
		{"tenant", &tenant, "orders", http.StatusForbidden, "operator"},
		{"bad name", &op, "Orders", http.StatusBadRequest, "[a-z0-9._-]"},
		{"long name", &op, strings.Repeat("a", 65), http.StatusBadRequest, "1-64"},
		{"no route", &op, "mailer", http.StatusNotFound, "snavio route list"},
	} {
		w := deliveryGet(mux, tc.p, tc.target)
		var e server.APIError
		_ = json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != tc.code || !strings.Contains(e.Fix+e.Error, tc.fix) || strings.Contains(w.Body.String(), `"key"`) {
			t.Errorf("%s: %d %s", tc.name, w.Code, w.Body)
		}
	}
}
