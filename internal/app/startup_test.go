package app

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// modulePath is snavio's module; its own packages are what the start-up
// guard measures, everything else is the floor.
const modulePath = "github.com/snavio/snavio"

// maxOverFloor is the guard: `snavio version` may take at most this much of
// the floor's wall time (the floor links every dependency and does nothing).
const maxOverFloor = 1.25

// TestStartupCost guards what snavio controls of its start-up: `snavio
// version` must run in at most 1.25x the wall time of the floor, a binary
// that links exactly the packages snavio imports from outside the module
// (third-party and standard library, blank-imported so that their package
// init runs) and whose main does nothing. All three binaries are built the
// same way (CGO_ENABLED=0, -trimpath, -ldflags=-s -w) and run interleaved,
// so machine noise hits them alike; the ratio compares the fastest of many
// runs, the least noisy estimate of what a program itself costs.
//
// The plain ratio against a hello world is logged beside it, not enforced:
// the AWS SDK that `snavio send` needs (and the server libraries of
// `dispatch serve`) cost what they cost at package init, whatever snavio
// does; docs/startup.md has the figures and the decision. What this test
// catches is eager work of snavio's own: a package-level regexp, a client
// built before a command asks for it, a config file read by `version`.
// `make bench` runs it with -v.
func TestStartupCost(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three binaries; skipped with -short")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()

	hello := filepath.Join(dir, "hello")
	src := filepath.Join(dir, "hellosrc")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(src, "go.mod"), "module hello\n\ngo 1.22\n")
	writeFile(t, filepath.Join(src, "main.go"), "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello, world\") }\n")
	build(t, gobin, src, hello, ".")

	snavio := filepath.Join(dir, "snavio")
	build(t, gobin, root, snavio, "./cmd/snavio")

	imports := externalImports(t, gobin, root)
	floor := filepath.Join(dir, "floor")
	buildFloor(t, gobin, root, dir, floor, imports)

	home := t.TempDir()
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, "cfg"), "SNAVIO_CONFIG=", "SNAVIO_PROFILE=")
	const runs = 60
	var th, tf, ts []time.Duration
	for range 3 { // warm the page cache
		timeRun(t, env, hello)
		timeRun(t, env, floor)
		timeRun(t, env, snavio, "version", "-o", "json")
	}
	for range runs {
		th = append(th, timeRun(t, env, hello))
		tf = append(tf, timeRun(t, env, floor))
		ts = append(ts, timeRun(t, env, snavio, "version", "-o", "json"))
	}
	minH, minF, minS := minOf(th), minOf(tf), minOf(ts)
	overFloor := float64(minS) / float64(minF)
	overHello := float64(minS) / float64(minH)
	t.Logf("startup over %d interleaved runs (min / median):", runs)
	t.Logf("  hello world          %8v / %8v", minH, medianOf(th))
	t.Logf("  floor (%3d imports)  %8v / %8v  = %.2fx hello world", len(imports), minF, medianOf(tf), float64(minF)/float64(minH))
	t.Logf("  snavio version       %8v / %8v  = %.2fx the floor (guard <= %.2fx), %.2fx hello world (reported, not enforced)",
		minS, medianOf(ts), overFloor, maxOverFloor, overHello)
	fmt.Printf("BenchmarkStartupHello\t%d\t%d ns/op\n", runs, minH.Nanoseconds())
	fmt.Printf("BenchmarkStartupFloor\t%d\t%d ns/op\n", runs, minF.Nanoseconds())
	fmt.Printf("BenchmarkStartupVersion\t%d\t%d ns/op\n", runs, minS.Nanoseconds())
	if overFloor > maxOverFloor {
		t.Errorf("snavio version takes %.2fx the wall time of its dependency floor (min %v vs %v); want <= %.2fx: something of snavio's own initialises eagerly at start-up (run with GODEBUG=inittrace=1 to see package init times)",
			overFloor, minS, minF, maxOverFloor)
	}
}

// externalImports returns every package that a package of snavio's module
// linked into cmd/snavio imports from outside the module, sorted: linking
// them links everything snavio's dependencies bring.
func externalImports(t *testing.T, gobin, root string) []string {
	t.Helper()
	cmd := exec.Command(gobin, "list", "-deps", "-json=ImportPath,Module,Imports", "./cmd/snavio")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/snavio: %v", err)
	}
	seen := map[string]bool{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Module     *struct{ Path string }
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Module == nil || p.Module.Path != modulePath {
			continue
		}
		for _, imp := range p.Imports {
			if imp != modulePath && !strings.HasPrefix(imp, modulePath+"/") && imp != "C" && imp != "unsafe" {
				seen[imp] = true
			}
		}
	}
	list := make([]string, 0, len(seen))
	for p := range seen {
		list = append(list, p)
	}
	sort.Strings(list)
	if len(list) == 0 {
		t.Fatal("go list found no external imports of cmd/snavio; the floor would be a hello world")
	}
	return list
}

// buildFloor builds a main package, placed in the module through a build
// overlay (nothing is written into the source tree), that blank-imports
// imports and does nothing: the same module versions as snavio, the same
// package inits, none of snavio's own code.
func buildFloor(t *testing.T, gobin, root, dir, out string, imports []string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("package main\n\nimport (\n")
	for _, p := range imports {
		fmt.Fprintf(&b, "\t_ %q\n", p)
	}
	b.WriteString(")\n\nfunc main() {}\n")
	src := filepath.Join(dir, "floor.go")
	writeFile(t, src, b.String())
	pkgDir := filepath.Join(root, "internal", "app", "zz_startupfloor")
	ov, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(pkgDir, "main.go"): src}})
	if err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(dir, "overlay.json")
	writeFile(t, overlay, string(ov))
	cmd := exec.Command(gobin, "build", "-overlay", overlay, "-trimpath", "-ldflags=-s -w", "-o", out, "./internal/app/zz_startupfloor")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the start-up floor: %v\n%s", err, b)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func build(t *testing.T, gobin, dir, out, pkg string) {
	t.Helper()
	cmd := exec.Command(gobin, "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
}

func timeRun(t *testing.T, env []string, bin string, args ...string) time.Duration {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	start := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, b)
	}
	return time.Since(start)
}

func minOf(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds[1:] {
		m = min(m, d)
	}
	return m
}

func medianOf(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
