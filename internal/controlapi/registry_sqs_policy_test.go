package controlapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/deploy/policy/iamsim"
)

const (
	queueAcct = "222222222222"
	queue     = "arn:aws:sqs:eu-west-1:" + queueAcct + ":orders"
)

func stmt(effect string, principal any, action any, extra map[string]any) map[string]any {
	s := map[string]any{"Effect": effect, "Principal": principal, "Action": action, "Resource": queue}
	for k, v := range extra {
		if v == nil {
			delete(s, k)
		} else {
			s[k] = v
		}
	}
	return s
}

func doc(stmts ...map[string]any) string {
	if len(stmts) == 0 {
		return ""
	}
	b, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": stmts})
	return string(b)
}

// policyCases: whether a queue policy lets ingestRole (account 111...)
// call sqs:SendMessage on a queue of account 222... (cross) or of its own
// account (same). simulate says whether iam-simulate must agree; the
// cases it skips are where the check is deliberately stricter (a Deny it
// cannot evaluate refuses) or that iam-simulate models otherwise.
var policyCases = []struct {
	name     string
	policy   string
	same     bool
	want     string // "" allowed, else a substring of the reason
	simulate bool
}{
	{"no policy, same account", "", true, "", true},
	{"no policy, another account", "", false, "no statement allows it", true},
	{"the role", doc(stmt("Allow", map[string]any{"AWS": ingestRole}, "sqs:SendMessage", nil)), false, "", true},
	{"the role's account root", doc(stmt("Allow", map[string]any{"AWS": "arn:aws:iam::" + dispAcct + ":root"}, "sqs:SendMessage", nil)), false, "", true},
	{"AddPermission style", doc(stmt("Allow", map[string]any{"AWS": "arn:aws:iam::" + dispAcct + ":root"}, "SQS:SendMessage", nil)), false, "", true},
	{"sqs:*", doc(stmt("Allow", map[string]any{"AWS": []string{ingestRole}}, "sqs:*", nil)), false, "", true},
	{"another role", doc(stmt("Allow", map[string]any{"AWS": slowRole}, "sqs:SendMessage", nil)), false, "no statement allows it", true},
	{"another action", doc(stmt("Allow", map[string]any{"AWS": ingestRole}, []string{"sqs:ReceiveMessage"}, nil)), false, "no statement allows it", true},
	{"another queue", doc(stmt("Allow", map[string]any{"AWS": ingestRole}, "sqs:SendMessage", map[string]any{"Resource": "arn:aws:sqs:eu-west-1:" + queueAcct + ":other"})), false, "no statement allows it", true},
	{"anyone from the role's path", doc(stmt("Allow", "*", "sqs:SendMessage", map[string]any{"Condition": map[string]any{"ArnLike": map[string]any{"aws:PrincipalArn": "arn:aws:iam::" + dispAcct + ":role/snavio/test/fn/*"}}})), false, "", true},
	{"anyone from another path", doc(stmt("Allow", "*", "sqs:SendMessage", map[string]any{"Condition": map[string]any{"ArnLike": map[string]any{"aws:PrincipalArn": "arn:aws:iam::" + dispAcct + ":role/ops/*"}}})), false, "no statement allows it", true},
	{"only a topic (SNS style)", doc(stmt("Allow", map[string]any{"AWS": "*"}, "sqs:SendMessage", map[string]any{"Condition": map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": "arn:aws:sns:eu-west-1:" + queueAcct + ":t"}}})), false, "no statement allows it", true},
	{"TLS only", doc(stmt("Allow", map[string]any{"AWS": ingestRole}, "sqs:SendMessage", nil),
		stmt("Deny", "*", "sqs:*", map[string]any{"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}}})), false, "", true},
	{"deny other accounts", doc(stmt("Allow", map[string]any{"AWS": ingestRole}, "sqs:SendMessage", nil),
		stmt("Deny", "*", "sqs:SendMessage", map[string]any{"Condition": map[string]any{"StringNotEquals": map[string]any{"aws:PrincipalAccount": queueAcct}}})), false, "statement \"\" denies it", true},
	{"deny everyone, same account", doc(stmt("Deny", "*", "sqs:SendMessage", nil)), true, "denies it", true},
	{"deny all but the role", doc(stmt("Deny", "*", "sqs:SendMessage", map[string]any{"Condition": map[string]any{"StringNotLike": map[string]any{"aws:PrincipalArn": []string{ingestRole, "arn:aws:iam::" + queueAcct + ":role/*"}}}})), true, "", true},
	{"deny on NotAction", doc(stmt("Deny", "*", nil, map[string]any{"Action": nil, "NotAction": "sqs:ReceiveMessage"})), true, "denies it", true},
	{"deny a condition it cannot evaluate", doc(stmt("Deny", "*", "sqs:SendMessage", map[string]any{"Condition": map[string]any{"StringNotEquals": map[string]any{"aws:PrincipalOrgID": "o-abc"}}})), true, "cannot evaluate", false},
	{"allow under a condition it cannot evaluate", doc(stmt("Allow", "*", "sqs:SendMessage", map[string]any{"Condition": map[string]any{"IpAddress": map[string]any{"aws:SourceIp": "10.0.0.0/8"}}})), false, "no statement allows it", false},
	{"a single statement object", `{"Version":"2012-10-17","Statement":{"Effect":"Allow","Principal":{"AWS":"` + ingestRole + `"},"Action":"sqs:SendMessage","Resource":"` + queue + `"}}`, false, "", true},
}

func TestQueuePolicyEvaluation(t *testing.T) {
	var sims []iamsim.Simulation
	var simCases []int
	for i, c := range policyCases {
		p, err := parseQueuePolicy(c.policy)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		qa, q := queueAcct, queue
		if c.same {
			qa, q = dispAcct, strings.Replace(queue, queueAcct, dispAcct, 1)
			p, _ = parseQueuePolicy(strings.ReplaceAll(c.policy, queueAcct, dispAcct))
		}
		got := p.allows(ingestRole, "sqs:SendMessage", q, qa)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		if !c.simulate {
			continue
		}
		var s iamsim.Simulation
		s.Request.Principal = "arn:aws:sts::" + dispAcct + ":assumed-role/snavio-test-fn-ingest/snavio-test-ingest"
		s.Request.Action = "sqs:SendMessage"
		s.Request.Resource.Resource, s.Request.Resource.AccountID = q, qa
		s.Request.ContextVariables = map[string]any{"aws:PrincipalArn": ingestRole, "aws:PrincipalAccount": dispAcct, "aws:SecureTransport": "true"}
		// The ingest role's own policy, as the stack writes it.
		s.IdentityPolicies = []iamsim.NamedPolicy{{Name: "ingest", Policy: map[string]any{"Version": "2012-10-17", "Statement": []any{
			map[string]any{"Effect": "Allow", "Action": []string{"sqs:SendMessage", "sqs:GetQueueUrl"}, "Resource": "arn:aws:sqs:*:*:*"}}}}}
		if c.policy != "" {
			pol := c.policy
			if c.same {
				pol = strings.ReplaceAll(pol, queueAcct, dispAcct)
			}
			var v any
			_ = json.Unmarshal([]byte(pol), &v)
			s.ResourcePolicy = v
		}
		sims = append(sims, s)
		simCases = append(simCases, i)
	}
	res := iamsim.Run(t, sims)
	for j, i := range simCases {
		c := policyCases[i]
		if (res[j] == "Allowed") != (c.want == "") {
			t.Errorf("%s: iam-simulate says %s, the test routing %q", c.name, res[j], c.want)
		}
	}
}

func TestParseQueuePolicyRefuses(t *testing.T) {
	for _, p := range []string{"{", `{"Statement":[{"Effect":"Maybe"}]}`, `{"Statement":[{"Effect":"Allow","Principal":"someone"}]}`,
		`{"Statement":[{"Effect":"Allow","Action":{"a":1}}]}`, strings.Repeat(" ", 10) + "{" + strings.Repeat(`"x":1,`, 5000) + `"y":1}`} {
		if _, err := parseQueuePolicy(p); err == nil {
			t.Errorf("%.60q: no error", p)
		}
	}
}

// FuzzQueuePolicy: parsing and evaluating never panic, and a policy
// without statements grants a same-account role and refuses another
// account's.
func FuzzQueuePolicy(f *testing.F) {
	for _, c := range policyCases {
		f.Add(c.policy)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseQueuePolicy(s)
		if err != nil {
			return
		}
		for _, acct := range []string{queueAcct, dispAcct} {
			_ = p.allows(ingestRole, "sqs:SendMessage", queue, acct)
		}
		if len(p.statements) == 0 {
			if p.allows(ingestRole, "sqs:SendMessage", queue, dispAcct) != "" || p.allows(ingestRole, "sqs:SendMessage", queue, queueAcct) == "" {
				t.Fatalf("an empty policy %q decided wrongly", s)
			}
		}
	})
}

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{{"*", "", true}, {"a*c", "abbc", true}, {"a?c", "abc", true}, {"a?c", "ac", false}, {"arn:*:fn/*", "arn:aws:fn/x", true}, {"*x", "abc", false}, {"a*b*c", "axxbyyc", true}} {
		if glob(c.p, c.s) != c.want {
			t.Errorf("glob(%q, %q) != %v", c.p, c.s, c.want)
		}
	}
}
