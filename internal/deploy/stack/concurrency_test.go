package stack

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestProvisionedConcurrency: with N > 0 the template passes the schema
// test, the ingest function has a version and an alias holding N, and the
// command rule, its permission and the failed-invocation destination are
// on the alias; with 0 none of it exists and the rule invokes the
// function.
func TestProvisionedConcurrency(t *testing.T) {
	b := renderWith(t, "test", Options{ProvisionedConcurrency: 3}, "json")
	checkSchema(t, b)
	var doc struct {
		Resources map[string]struct {
			Type       string
			Properties map[string]any
			DependsOn  any
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	r := doc.Resources
	alias := r["IngestAlias"]
	if alias.Type != "AWS::Lambda::Alias" || alias.Properties["Name"] != IngestAlias ||
		alias.Properties["ProvisionedConcurrencyConfig"].(map[string]any)["ProvisionedConcurrentExecutions"] != 3.0 {
		t.Errorf("IngestAlias = %+v", alias)
	}
	if fv, _ := json.Marshal(alias.Properties["FunctionVersion"]); string(fv) != `{"Fn::GetAtt":["IngestVersion","Version"]}` {
		t.Errorf("alias version %s", fv)
	}
	desc, _ := json.Marshal(r["IngestVersion"].Properties["Description"])
	for _, p := range []string{ParamCodeKey, ParamArchitecture, ParamSnapshotPublicKey, ParamDeliveryKeyFingerprint} {
		if !strings.Contains(string(desc), "${"+p+"}") {
			t.Errorf("the version's description %s does not name %s: a change of it would not publish a version", desc, p)
		}
	}
	if strings.Contains(string(desc), ParamDeliveryKey+"}") {
		t.Errorf("the version's description %s holds the delivery key", desc)
	}
	target, _ := json.Marshal(r["CommandRule"].Properties["Targets"].([]any)[0].(map[string]any)["Arn"])
	perm, _ := json.Marshal(r["IngestRulePermission"].Properties["FunctionName"])
	if string(target) != `{"Ref":"IngestAlias"}` || string(perm) != `{"Ref":"IngestAlias"}` {
		t.Errorf("rule target %s, permission %s; want the alias", target, perm)
	}
	ic := r["IngestInvokeConfig"]
	if ic.Properties["Qualifier"] != IngestAlias || ic.DependsOn == nil {
		t.Errorf("IngestInvokeConfig = %+v; want qualifier %s, depending on the alias", ic, IngestAlias)
	}
	if r["IngestSpilloverAlarm"].Properties["MetricName"] != "ProvisionedConcurrencySpilloverInvocations" {
		t.Errorf("no spill-over alarm")
	}

	// The digest follows the function's properties: the same build gives
	// the same description (no version on every deploy), another
	// environment's function (other names, other variables) another.
	again := renderWith(t, "test", Options{ProvisionedConcurrency: 3}, "json")
	digest := string(desc)[strings.LastIndex(string(desc), "config "):]
	digest = strings.TrimSuffix(digest, `"}`)
	if len(digest) != len("config ")+16 || !strings.Contains(string(again), digest) {
		t.Errorf("a second build's version description differs from %s: every deploy would publish a version", desc)
	}
	var od struct {
		Resources map[string]struct{ Properties map[string]any }
	}
	if err := json.Unmarshal(renderWith(t, "other", Options{ProvisionedConcurrency: 3}, "json"), &od); err != nil {
		t.Fatal(err)
	}
	if d2, _ := json.Marshal(od.Resources["IngestVersion"].Properties["Description"]); string(d2) == string(desc) {
		t.Errorf("two environments' ingest functions have the same config digest %s", d2)
	}

	none := string(render(t, "test", "json"))
	for _, id := range []string{`"IngestAlias"`, `"IngestVersion"`, `"IngestSpilloverAlarm"`} {
		if strings.Contains(none, id) {
			t.Errorf("without provisioned concurrency the template has %s", id)
		}
	}
}

func TestProvisionedConcurrencyBounds(t *testing.T) {
	for _, n := range []int{-1, MaxProvisionedConcurrency + 1} {
		if _, err := BuildWith("test", Options{ProvisionedConcurrency: n}); err == nil || !strings.Contains(err.Error(), "provisioned concurrency") {
			t.Errorf("%d: %v", n, err)
		}
	}
	if _, err := BuildWith("test", Options{ProvisionedConcurrency: MaxProvisionedConcurrency}); err != nil {
		t.Error(err)
	}
}

func TestDeliveryKeyFingerprint(t *testing.T) {
	a, b := DeliveryKeyFingerprint("a2V5LWE="), DeliveryKeyFingerprint("a2V5LWI=")
	if len(a) != 16 || a == b || strings.Trim(a, "0123456789abcdef") != "" {
		t.Errorf("fingerprints %q, %q", a, b)
	}
}
