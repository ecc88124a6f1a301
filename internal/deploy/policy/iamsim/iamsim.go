// Package iamsim runs IAM requests through @cloud-copilot/iam-simulate
// (AGPL-3.0), as a separate node program (internal/deploy/policy/testdata/
// simulate.cjs), never linked into snavio. Tests use it to evaluate the
// policies snavio writes, and to hold snavio's own structural policy
// checks against a real evaluator.
package iamsim

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Simulation is one iam-simulate request with its policies; a policy is
// any value that marshals to a policy document.
type Simulation struct {
	Request struct {
		Principal string `json:"principal"`
		Action    string `json:"action"`
		Resource  struct {
			Resource  string `json:"resource"`
			AccountID string `json:"accountId"`
		} `json:"resource"`
		ContextVariables map[string]any `json:"contextVariables"`
	} `json:"request"`
	IdentityPolicies        []NamedPolicy `json:"identityPolicies"`
	ServiceControlPolicies  []any         `json:"serviceControlPolicies"`
	ResourceControlPolicies []any         `json:"resourceControlPolicies"`
	ResourcePolicy          any           `json:"resourcePolicy,omitempty"`
}

// NamedPolicy is an identity policy and its name.
type NamedPolicy struct {
	Name   string `json:"name"`
	Policy any    `json:"policy"`
}

// moduleRoot is the directory of go.mod above the test's directory.
func moduleRoot(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("iamsim: no go.mod above the test's directory")
		}
		dir = parent
	}
}

// Run evaluates the simulations and returns each overall result
// (Allowed, ImplicitlyDenied, ExplicitlyDenied). Without node or the
// package it skips the test, except in CI (CI=true), where it fails.
func Run(t testing.TB, sims []Simulation) []string {
	t.Helper()
	root := moduleRoot(t)
	modules := filepath.Join(root, "tools", "emulators", "node_modules")
	missing := func(msg string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s; CI must run the policy evaluation (.ci/run installs node and runs npm ci in tools/emulators)", msg)
		}
		t.Skipf("%s: skipping the policy evaluation (npm ci --prefix tools/emulators to run it)", msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("no node on PATH")
	}
	if _, err := os.Stat(filepath.Join(modules, "@cloud-copilot", "iam-simulate")); err != nil {
		missing("@cloud-copilot/iam-simulate is not installed in tools/emulators")
	}
	for i := range sims {
		if sims[i].ServiceControlPolicies == nil {
			sims[i].ServiceControlPolicies = []any{}
		}
		if sims[i].ResourceControlPolicies == nil {
			sims[i].ResourceControlPolicies = []any{}
		}
	}
	in, err := json.Marshal(sims)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, filepath.Join(root, "internal", "deploy", "policy", "testdata", "simulate.cjs"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("iam-simulate: %v\n%s", err, stderr.Bytes())
	}
	var res []struct {
		Result string          `json:"result"`
		Errors json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res) != len(sims) {
		t.Fatalf("iam-simulate answered %s (%v)", out, err)
	}
	var results []string
	for i, r := range res {
		if r.Result == "error" {
			t.Fatalf("case %d: iam-simulate refused the request: %s", i, r.Errors)
		}
		results = append(results, r.Result)
	}
	return results
}
