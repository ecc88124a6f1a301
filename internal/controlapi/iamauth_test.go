package controlapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/internal/server"
)

// TestIAMAuthMapping is the identity mapping's table: which verified IAM
// callers are the operator, which are a tenant, and what every other one
// is answered. The roles are named by stack.Names, the one naming rule.
func TestIAMAuthMapping(t *testing.T) {
	const acct = "123456789012"
	a := IAMAuth{Account: acct, Roles: stack.Names{Env: "prod"}}
	session := func(role string) string { return "arn:aws:sts::" + acct + ":assumed-role/" + role + "/alice" }
	op, tenant := server.OperatorPrincipal(), server.TenantPrincipal
	for _, c := range []struct {
		name   string
		caller IAMCaller
		want   server.Principal
		status int // 0: mapped to want
	}{
		{"operator session", IAMCaller{UserARN: session("snavio-prod-operator"), AccountID: acct}, op, 0},
		{"operator role ARN with its path", IAMCaller{UserARN: "arn:aws:iam::" + acct + ":role/snavio/prod/operator/snavio-prod-operator"}, op, 0},
		{"operator in another partition", IAMCaller{UserARN: "arn:aws-cn:sts::" + acct + ":assumed-role/snavio-prod-operator/s"}, op, 0},
		{"tenant session", IAMCaller{UserARN: session("snavio-prod-tenant-acme"), AccountID: acct}, tenant("acme"), 0},
		{"tenant with dots and dashes", IAMCaller{UserARN: session("snavio-prod-tenant-acme.eu-1_x")}, tenant("acme.eu-1_x"), 0},
		{"tenant role ARN", IAMCaller{UserARN: "arn:aws:iam::" + acct + ":role/snavio/prod/tenant/snavio-prod-tenant-acme"}, tenant("acme"), 0},
		// A tenant id may itself contain "-tenant-": the rule is a prefix, and the rest is the id.
		{"tenant id containing -tenant-", IAMCaller{UserARN: session("snavio-prod-tenant-a-tenant-b")}, tenant("a-tenant-b"), 0},

		{"the bare tenant prefix", IAMCaller{UserARN: session("snavio-prod-tenant-")}, server.Principal{}, 403},
		{"a tenant id that is not one", IAMCaller{UserARN: session("snavio-prod-tenant--x")}, server.Principal{}, 403},
		{"prefix game: no dash", IAMCaller{UserARN: session("snavio-prod-tenantacme")}, server.Principal{}, 403},
		{"prefix game: operator suffix", IAMCaller{UserARN: session("snavio-prod-operator-x")}, server.Principal{}, 403},
		{"prefix game: operator prefix", IAMCaller{UserARN: session("x-snavio-prod-operator")}, server.Principal{}, 403},
		{"case differs (IAM names are case-insensitive unique; we match exactly)", IAMCaller{UserARN: session("Snavio-Prod-Operator")}, server.Principal{}, 403},
		{"another env's operator", IAMCaller{UserARN: session("snavio-staging-operator")}, server.Principal{}, 403},
		{"another env's tenant", IAMCaller{UserARN: session("snavio-staging-tenant-acme")}, server.Principal{}, 403},
		{"an env whose name extends ours", IAMCaller{UserARN: session("snavio-prod2-operator")}, server.Principal{}, 403},
		{"a function's role", IAMCaller{UserARN: session("snavio-prod-fn-control")}, server.Principal{}, 403},
		{"an emit role", IAMCaller{UserARN: session("snavio-prod-emit-acme")}, server.Principal{}, 403},
		{"another account's operator", IAMCaller{UserARN: "arn:aws:sts::210987654321:assumed-role/snavio-prod-operator/s"}, server.Principal{}, 403},
		{"lookalike account (13 digits)", IAMCaller{UserARN: "arn:aws:sts::1234567890123:assumed-role/snavio-prod-operator/s"}, server.Principal{}, 403},
		{"lookalike account (prefix of ours)", IAMCaller{UserARN: "arn:aws:sts::12345678901:assumed-role/snavio-prod-operator/s"}, server.Principal{}, 403},
		{"accountId disagrees with the ARN", IAMCaller{UserARN: session("snavio-prod-operator"), AccountID: "210987654321"}, server.Principal{}, 403},
		{"IAM user with the operator's name", IAMCaller{UserARN: "arn:aws:iam::" + acct + ":user/snavio-prod-operator"}, server.Principal{}, 403},
		{"root user", IAMCaller{UserARN: "arn:aws:iam::" + acct + ":root"}, server.Principal{}, 403},
		{"federated user", IAMCaller{UserARN: "arn:aws:sts::" + acct + ":federated-user/snavio-prod-operator"}, server.Principal{}, 403},
		{"session without a session name", IAMCaller{UserARN: "arn:aws:sts::" + acct + ":assumed-role/snavio-prod-operator"}, server.Principal{}, 403},
		{"session name with a slash", IAMCaller{UserARN: "arn:aws:sts::" + acct + ":assumed-role/snavio-prod-operator/a/b"}, server.Principal{}, 403},
		{"iam ARN with a region", IAMCaller{UserARN: "arn:aws:iam:us-east-1:" + acct + ":role/snavio-prod-operator"}, server.Principal{}, 403},
		{"not an ARN", IAMCaller{UserARN: "snavio-prod-operator"}, server.Principal{}, 403},
		{"no identity", IAMCaller{}, server.Principal{}, 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := a.Principal(c.caller)
			if c.status == 0 {
				if err != nil || p != c.want {
					t.Fatalf("got %v, %v; want %v", p, err, c.want)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Status != c.status {
				t.Fatalf("got %v, %v; want a %d refusal", p, err, c.status)
			}
			if !strings.Contains(e.Fix, "snavio-prod-operator") || !strings.Contains(e.Fix, "snavio-prod-tenant-<tenant>") {
				t.Errorf("the fix %q does not name the roles to assume", e.Fix)
			}
		})
	}
}

// TestIAMAuthAnswersThroughHandle: an endpoint answers the mapping's own
// refusal (status and fix), and serves the mapped principal.
func TestIAMAuthAnswersThroughHandle(t *testing.T) {
	e := Endpoints{Auth: IAMAuth{Account: "123456789012", Roles: stack.Names{Env: "prod"}}}
	h := e.Handle(AnyPrincipal, func(w http.ResponseWriter, _ *http.Request, p server.Principal) error {
		WriteJSON(w, http.StatusOK, p.String())
		return nil
	})
	for _, c := range []struct {
		caller *IAMCaller
		status int
		body   string
	}{
		{nil, 401, "no IAM identity"},
		{&IAMCaller{UserARN: "arn:aws:sts::123456789012:assumed-role/admin/x"}, 403, "maps to no principal"},
		{&IAMCaller{UserARN: "arn:aws:sts::123456789012:assumed-role/snavio-prod-tenant-acme/x"}, 200, "tenant:acme"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/v1/whoami", nil)
		if c.caller != nil {
			r = r.WithContext(WithIAMCaller(r.Context(), *c.caller))
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.status || !strings.Contains(w.Body.String(), c.body) {
			t.Errorf("%v: %d %s; want %d with %q", c.caller, w.Code, w.Body, c.status, c.body)
		}
		if w.Code >= 400 {
			var env server.APIError
			if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil || !strings.Contains(env.Fix, "snavio-prod-operator") {
				t.Errorf("%v: the fix %q does not name the role to assume (%v)", c.caller, env.Fix, err)
			}
		}
	}
}
