package app

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// TestStartupCost checks that `snavio version` starts cheaply: its wall time
// stays under 2x that of a hello-world Go binary built the same way
// (CGO_ENABLED=0, -trimpath, -ldflags=-s -w), both measured in this run,
// interleaved so that machine noise hits both alike. It prints the figures
// and the ratio; `make bench` runs it with -v.
//
// The ratio compares the fastest of many runs of each binary: the minimum is
// the least noisy estimate of what the program itself costs on a machine
// shared with other work. The median is printed beside it.
func TestStartupCost(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries; skipped with -short")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
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
	build(t, gobin, filepath.Join("..", ".."), snavio, "./cmd/snavio")

	home := t.TempDir()
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, "cfg"), "SNAVIO_CONFIG=", "SNAVIO_PROFILE=")
	const runs = 60
	var th, ts []time.Duration
	for range 3 { // warm the page cache
		timeRun(t, env, hello)
		timeRun(t, env, snavio, "version", "-o", "json")
	}
	for range runs {
		th = append(th, timeRun(t, env, hello))
		ts = append(ts, timeRun(t, env, snavio, "version", "-o", "json"))
	}
	minH, minS := minOf(th), minOf(ts)
	medH, medS := medianOf(th), medianOf(ts)
	ratio := float64(minS) / float64(minH)
	t.Logf("startup over %d interleaved runs: hello-world min %v median %v; snavio version min %v median %v; ratio min %.2fx median %.2fx (goal < 2x)",
		runs, minH, medH, minS, medS, ratio, float64(medS)/float64(medH))
	fmt.Printf("BenchmarkStartupHello\t%d\t%d ns/op\n", runs, minH.Nanoseconds())
	fmt.Printf("BenchmarkStartupVersion\t%d\t%d ns/op\n", runs, minS.Nanoseconds())
	if ratio >= 2 {
		t.Errorf("snavio version takes %.2fx the wall time of hello world (min %v vs %v); want < 2x: something initialises eagerly at start-up", ratio, minS, minH)
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
