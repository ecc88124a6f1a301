package main

import (
	"bytes"
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkShield-2          	  200000	      6000 ns/op	    1200 B/op	       3 allocs/op
BenchmarkShield-2          	  200000	      5000 ns/op	    1200 B/op	       3 allocs/op
BenchmarkShield-2          	  200000	      7000 ns/op	    1200 B/op	       3 allocs/op
BenchmarkFloorShield-2     	  200000	      5000 ns/op	       0 B/op	       0 allocs/op
BenchmarkFastLookup        	 1000000	        40 ns/op	       0 B/op	       1 allocs/op
BenchmarkFloorLookup       	 1000000	        10 ns/op
PASS
`

func TestReportRatiosAndGoals(t *testing.T) {
	res, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if got := median(res["Shield"].ns); got != 6000 {
		t.Fatalf("median Shield = %v, want 6000", got)
	}
	pairs := []pair{
		{bench: "Shield", floor: "FloorShield", goal: 1.5, maxAllocs: 4},
		{bench: "FastLookup", floor: "FloorLookup", goal: 3, maxAllocs: 0},
		{bench: "SnapshotLoad", floor: "FloorSnapshotLoad", goal: 1, maxAllocs: -1},
	}
	var out bytes.Buffer
	ok := report(&out, pairs, res)
	if ok {
		t.Error("report passed although FastLookup misses both goals")
	}
	s := out.String()
	for _, want := range []string{"6000", "1.20x", "FastLookup", "4.00x", "MISSED (ratio, allocs)", "SnapshotLoad", "not run"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}

// TestFloorFromTheSamePackage: a floor that ran in two packages is taken
// from the benchmark's own package.
func TestFloorFromTheSamePackage(t *testing.T) {
	in := `pkg: example.com/a
BenchmarkFloorShield-2   100   5000 ns/op
BenchmarkFloorShield-2   100   5000 ns/op
pkg: example.com/b
BenchmarkFastDispatch-2  100   8000 ns/op   1 allocs/op
BenchmarkFloorShield-2   100   10000 ns/op
BenchmarkShield-2        100   7500 ns/op
`
	res, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(res["FloorShield"].ns); got != 3 {
		t.Fatalf("pooled FloorShield has %d samples, want 3", got)
	}
	var out bytes.Buffer
	report(&out, []pair{{bench: "FastDispatch", floor: "FloorShield", goal: 1.7, maxAllocs: 6}}, res)
	if !strings.Contains(out.String(), "0.80x") {
		t.Fatalf("FastDispatch not paired with its own package's floor (8000/10000):\n%s", out.String())
	}
	out.Reset()
	delete(res["FloorShield"].pkgs, "example.com/b")
	report(&out, []pair{{bench: "FastDispatch", floor: "FloorShield", goal: 1.7, maxAllocs: 6}}, res)
	if !strings.Contains(out.String(), "1.60x") {
		t.Fatalf("without a same-package floor the pooled median (5000) is used:\n%s", out.String())
	}
}

func TestReadPairsFile(t *testing.T) {
	pairs, err := readPairs("pairs.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) < 8 || pairs[0].bench != "Shield" || pairs[0].goal != 1.5 || pairs[0].maxAllocs != 4 {
		t.Fatalf("unexpected pairs: %+v", pairs[:1])
	}
}
