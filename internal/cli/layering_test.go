// Package cli_test holds the layering rule of the CLI: commands talk to a
// platform (internal/platform, with the types of internal/controlapi/wire)
// and link no server, store or API-handler package.
package cli_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/snavio/snavio/"

// forbidden are the server side: the control API's handlers, the server
// and its facade, the stores, the pipeline and the replay engine it runs,
// the dashboard, the Lambda host. A prefix ending in "/" covers the
// packages below it; otherwise the package and those below it.
var forbidden = []string{
	"internal/controlapi", // the control API's handlers, except its wire types (allowed below)
	"internal/server",
	"internal/devserver",
	"internal/store",
	"internal/pipeline",
	"internal/replay",
	"internal/sqsapi",
	"internal/dashboard",
	"internal/alerts",
	"internal/monitor",
	"internal/lambda",
}

// allowed are exceptions inside a forbidden tree.
var allowed = []string{"internal/controlapi/wire"}

// platformOnly may be linked through internal/platform and nothing else:
// on an aws profile the platform replays in the CLI with the operator's
// credentials, on the replay engine (docs/replay.md, "On AWS"); its
// audits and signatures come from the control API, so the AWS store stays
// forbidden. A command importing the engine itself is still a violation.
var platformOnly = []string{"internal/replay"}

// throughPlatform reports whether the import of imp by p is one the
// platform may make.
func throughPlatform(p, imp string) bool {
	from, _ := strings.CutPrefix(p, module)
	to, _ := strings.CutPrefix(imp, module)
	return from == "internal/platform" && slices.Contains(platformOnly, to)
}

// hosts are the CLI packages that may link the server: internal/cli/dispatchcmd
// hosts `snavio dispatch serve` (and `dispatch deploy`), the one command
// that runs a server instead of talking to one. Nothing reached only
// through it counts against the packages that import it (the root
// command).
var hosts = []string{"internal/cli/dispatchcmd"}

func isForbidden(pkg string) bool {
	p, ok := strings.CutPrefix(pkg, module)
	if !ok {
		return false
	}
	under := func(root string) bool { return p == root || strings.HasPrefix(p, root+"/") }
	for _, a := range allowed {
		if under(a) {
			return false
		}
	}
	for _, f := range forbidden {
		if under(f) {
			return true
		}
	}
	return false
}

func isHost(pkg string) bool {
	p, _ := strings.CutPrefix(pkg, module)
	return slices.Contains(hosts, p)
}

// isTestSupport: a CLI package named *test (routetest) is test support,
// linked only into tests; it may run a real server. It is checked like
// any other package when a non-test package imports it.
func isTestSupport(pkg string) bool {
	return strings.HasSuffix(pkg, "test")
}

// violations walks the import graph from every CLI package (except the
// hosts and test support) without entering a host, and returns each
// forbidden package reached, with the import chain that reaches it.
func violations(graph map[string][]string, cli []string) []string {
	var out []string
	for _, start := range cli {
		if isHost(start) || isTestSupport(start) {
			continue
		}
		from := map[string]string{start: ""}
		queue := []string{start}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if isForbidden(p) {
				chain := []string{p}
				for q := from[p]; q != ""; q = from[q] {
					chain = append([]string{q}, chain...)
				}
				out = append(out, strings.Join(chain, " -> "))
				continue
			}
			for _, imp := range graph[p] {
				if _, seen := from[imp]; seen || isHost(imp) || throughPlatform(p, imp) {
					continue
				}
				from[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return out
}

// TestCLILayering enforces the rule on the real import graph (non-test
// imports, transitively).
func TestCLILayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	graph := map[string][]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		pkg, imps, _ := strings.Cut(line, "|")
		graph[pkg] = strings.Fields(imps)
	}
	listed, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	cli := strings.Fields(string(listed))
	if len(cli) < 15 {
		t.Fatalf("found only %d CLI packages; is the test running in internal/cli?", len(cli))
	}
	for _, v := range violations(graph, cli) {
		t.Errorf("%s: a CLI package links a server, store or API-handler package; call it through internal/platform (types in internal/controlapi/wire)", v)
	}
}

// TestLayeringRuleFails: the checker reports a direct and a transitive
// import of a forbidden package, and lets through the wire types, a
// host's dependencies and test support.
func TestLayeringRuleFails(t *testing.T) {
	m := func(p string) string { return module + p }
	graph := map[string][]string{
		m("internal/cli/route"):       {m("internal/platform"), m("internal/controlapi")},
		m("internal/cli/queue"):       {m("internal/cli/cmdutil")},
		m("internal/cli/cmdutil"):     {m("internal/store/embedded")},
		m("internal/cli/token"):       {m("internal/controlapi/wire"), "net/http"},
		m("internal/cli/root"):        {m("internal/cli/dispatchcmd"), m("internal/cli/token")},
		m("internal/cli/dispatchcmd"): {m("internal/devserver")},
		m("internal/cli/routetest"):   {m("internal/server")},
		m("internal/platform"):        {m("internal/controlapi/wire"), m("internal/replay"), m("internal/store/awsstore")},
		m("internal/cli/key"):         {m("internal/platform"), m("internal/replay")},
	}
	cli := []string{m("internal/cli/route"), m("internal/cli/queue"), m("internal/cli/token"), m("internal/cli/root"), m("internal/cli/dispatchcmd"), m("internal/cli/routetest"), m("internal/cli/key")}
	got := violations(graph, cli)
	want := []string{
		m("internal/cli/route") + " -> " + m("internal/controlapi"),
		// The platform may link the replay engine, not the AWS store.
		m("internal/cli/route") + " -> " + m("internal/platform") + " -> " + m("internal/store/awsstore"),
		m("internal/cli/queue") + " -> " + m("internal/cli/cmdutil") + " -> " + m("internal/store/embedded"),
		m("internal/cli/key") + " -> " + m("internal/replay"),
		m("internal/cli/key") + " -> " + m("internal/platform") + " -> " + m("internal/store/awsstore"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n got %q\nwant %q", got, want)
	}
}
