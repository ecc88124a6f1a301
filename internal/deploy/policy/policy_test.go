package policy

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/deploy/policy/iamsim"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const (
	platform    = "111111111111"
	tenantAcct  = "222222222222"
	billingRole = "arn:aws:iam::" + tenantAcct + ":role/BillingSender"
	accountRole = "arn:aws:iam::" + tenantAcct + ":role/team/AccountSender"
	emitRole    = "arn:aws:iam::" + platform + ":role/snavio/prod/emit/snavio-prod-emit-acme"
	emitPattern = "arn:aws:iam::" + platform + ":role/snavio/prod/emit/*"
	busARN      = "arn:aws:events:us-east-1:" + platform + ":event-bus/snavio-prod-command-bus"
)

func examples(t *testing.T) (trust, perm, bus Document) {
	t.Helper()
	trust, err := EmitTrust([]string{billingRole, accountRole, billingRole})
	if err != nil {
		t.Fatal(err)
	}
	perm, err = EmitPermission(busARN, []EmitBinding{{"acme/billing", billingRole}, {"acme/account", accountRole}})
	if err != nil {
		t.Fatal(err)
	}
	return trust, perm, BusPolicy("arn:aws:iam::"+platform+":root", busARN, emitPattern)
}

// TestGolden keeps each policy's JSON as a golden file (-update rewrites).
func TestGolden(t *testing.T) {
	trust, perm, bus := examples(t)
	for name, d := range map[string]Document{"emit-trust": trust, "emit-permission": perm, "bus-policy": bus} {
		got, err := d.JSON()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		path := filepath.Join("testdata", name+".json")
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test ./internal/deploy/policy -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s:\n%s", name, path, got)
		}
	}
}

func TestBadInput(t *testing.T) {
	for name, err := range map[string]error{
		"no roles":       func() error { _, err := EmitTrust(nil); return err }(),
		"bad role":       func() error { _, err := EmitTrust([]string{"arn:aws:iam::1234:role/x"}); return err }(),
		"user not role":  func() error { _, err := EmitTrust([]string{"arn:aws:iam::123456789012:user/x"}); return err }(),
		"no bindings":    func() error { _, err := EmitPermission(busARN, nil); return err }(),
		"bad source":     func() error { _, err := EmitPermission(busARN, []EmitBinding{{"acme", billingRole}}); return err }(),
		"source slash":   func() error { _, err := EmitPermission(busARN, []EmitBinding{{"acme/a/b", billingRole}}); return err }(),
		"binding's role": func() error { _, err := EmitPermission(busARN, []EmitBinding{{"acme/a", "BillingSender"}}); return err }(),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func FuzzRoleName(f *testing.F) {
	for _, s := range []string{billingRole, accountRole, "arn:aws:iam::123456789012:role/", "arn:aws-cn:iam::123456789012:role/a//b", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arn string) {
		name, err := RoleName(arn)
		if err != nil {
			return
		}
		if name == "" || len(name) > 64 || !strings.HasSuffix(arn, "/"+name) || strings.ContainsAny(name, "/:*?") {
			t.Fatalf("RoleName(%q) = %q", arn, name)
		}
	})
}

func FuzzCheckSource(f *testing.F) {
	for _, s := range []string{"acme/billing", "acme", "a/b/c", "/x", "x/", "é/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckSource(s) != nil {
			return
		}
		tenant, service, _ := strings.Cut(s, "/")
		if tenant == "" || service == "" || strings.ContainsAny(s, "*?\" ") || strings.Count(s, "/") != 1 {
			t.Fatalf("CheckSource accepted %q", s)
		}
	})
}

// simulation is one iam-simulate request with its policies.
type (
	simulation  = iamsim.Simulation
	namedPolicy = iamsim.NamedPolicy
)

func simulate(t *testing.T, sims []simulation) []string { return iamsim.Run(t, sims) }

// TestPolicyEvaluation evaluates the emit role's and the bus's policies
// with iam-simulate: a tenant's own service may put its own commands;
// another tenant's source, a batch mixing own and spoofed sources, a
// missing source, another service's role, a non-emit identity, a role
// not in the trust policy and a borrowed session name are all denied.
func TestPolicyEvaluation(t *testing.T) {
	trust, perm, bus := examples(t)
	putEvents := func(session, roleID string, sources []string) simulation {
		var s simulation
		s.Request.Principal = "arn:aws:sts::" + platform + ":assumed-role/snavio-prod-emit-acme/" + session
		s.Request.Action = "events:PutEvents"
		s.Request.Resource.Resource = busARN
		s.Request.Resource.AccountID = platform
		s.Request.ContextVariables = map[string]any{"aws:userid": roleID + ":" + session, "aws:PrincipalArn": emitRole, "aws:PrincipalAccount": platform}
		if sources != nil {
			s.Request.ContextVariables["events:source"] = sources
		}
		s.IdentityPolicies = []namedPolicy{{Name: "emit", Policy: perm}}
		s.ServiceControlPolicies, s.ResourceControlPolicies = []any{}, []any{}
		s.ResourcePolicy = &bus
		return s
	}
	assume := func(principal, session string) simulation {
		var s simulation
		s.Request.Principal = principal
		s.Request.Action = "sts:AssumeRole"
		s.Request.Resource.Resource = emitRole
		s.Request.Resource.AccountID = platform
		s.Request.ContextVariables = map[string]any{"sts:RoleSessionName": session, "aws:PrincipalArn": principal, "aws:PrincipalAccount": tenantAcct}
		// The tenant's side lets its role assume anything; the trust
		// policy alone must decide.
		s.IdentityPolicies = []namedPolicy{{Name: "tenant", Policy: Document{Version: Version, Statement: []Statement{Allowing("", []string{"sts:AssumeRole"}, "*")}}}}
		s.ServiceControlPolicies, s.ResourceControlPolicies = []any{}, []any{}
		s.ResourcePolicy = &trust
		return s
	}
	admin := putEvents("ops", "AROAADMIN", []string{"acme/billing"})
	admin.Request.Principal = "arn:aws:sts::" + platform + ":assumed-role/PlatformAdmin/ops"
	admin.Request.ContextVariables["aws:PrincipalArn"] = "arn:aws:iam::" + platform + ":role/PlatformAdmin"
	admin.IdentityPolicies = []namedPolicy{{Name: "admin", Policy: Document{Version: Version, Statement: []Statement{Allowing("", []string{"events:*"}, "*")}}}}

	cases := []struct {
		name string
		sim  simulation
		want string
	}{
		{"own service", putEvents("BillingSender", "AROAEMIT", []string{"acme/billing"}), "Allowed"},
		{"own service, batch of three", putEvents("BillingSender", "AROAEMIT", []string{"acme/billing", "acme/billing", "acme/billing"}), "Allowed"},
		{"second binding", putEvents("AccountSender", "AROAEMIT", []string{"acme/account"}), "Allowed"},
		{"another tenant's source", putEvents("BillingSender", "AROAEMIT", []string{"globex/billing"}), "ImplicitlyDenied"},
		{"own and spoofed in one batch", putEvents("BillingSender", "AROAEMIT", []string{"acme/billing", "globex/billing"}), "ImplicitlyDenied"},
		{"missing source", putEvents("BillingSender", "AROAEMIT", nil), "ImplicitlyDenied"},
		{"own tenant, another service's source", putEvents("BillingSender", "AROAEMIT", []string{"acme/account"}), "ImplicitlyDenied"},
		{"an admin outside the emit path", admin, "ExplicitlyDenied"},
		{"assume: listed role, own session name", assume(billingRole, "BillingSender"), "Allowed"},
		{"assume: role not in the trust policy", assume("arn:aws:iam::"+tenantAcct+":role/Stranger", "Stranger"), "ImplicitlyDenied"},
		{"assume: listed role, another role's session name", assume(billingRole, "AccountSender"), "ImplicitlyDenied"},
	}
	// Why the conditions are what they are: the spec's StringEquals on
	// the multi-valued events:source denies even the tenant's own
	// command, and ForAllValues without the Null check lets a request
	// with no source through.
	specStyle := putEvents("BillingSender", "AROAEMIT", []string{"acme/billing"})
	specStyle.IdentityPolicies = []namedPolicy{{Name: "spec", Policy: withCondition(perm, func(c Condition) {
		c["StringEquals"] = c["ForAllValues:StringEquals"]
		delete(c, "ForAllValues:StringEquals")
	})}}
	noNull := putEvents("BillingSender", "AROAEMIT", nil)
	noNull.IdentityPolicies = []namedPolicy{{Name: "nonull", Policy: withCondition(perm, func(c Condition) { delete(c, "Null") })}}
	cases = append(cases,
		struct {
			name string
			sim  simulation
			want string
		}{"the spec's StringEquals, own service", specStyle, "ImplicitlyDenied"},
		struct {
			name string
			sim  simulation
			want string
		}{"ForAllValues without Null, missing source", noNull, "Allowed"},
	)
	var sims []simulation
	for _, c := range cases {
		sims = append(sims, c.sim)
	}
	got := simulate(t, sims)
	for i, c := range cases {
		if got[i] != c.want {
			t.Errorf("%s: %s, want %s", c.name, got[i], c.want)
		}
	}
}

// withCondition copies d with edit applied to every statement's condition.
func withCondition(d Document, edit func(Condition)) Document {
	out := Document{Version: d.Version}
	for _, st := range d.Statement {
		c := Condition{}
		for k, v := range st.Condition {
			c[k] = v
		}
		edit(c)
		st.Condition = c
		out.Statement = append(out.Statement, st)
	}
	return out
}
