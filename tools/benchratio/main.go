// Command benchratio reads `go test -bench` output on stdin and prints each
// benchmark of pairs.txt beside its floor from the same run, with the ratio
// and the goal. With -count > 1 the median of the runs is used.
//
//	go test -run '^$' -bench . -benchmem -count 5 ./... | go run ./tools/benchratio
//
// It exits 1 when a goal is missed and -strict is set; pairs whose
// benchmarks did not run are listed as "not run". When the floor ran in
// the benchmark's own package as well as elsewhere (the same name in two
// packages), the floor from the benchmark's package is used: the ratio then
// comes from one process, which matters on a noisy machine.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

type result struct {
	ns     []float64
	allocs []float64
	// pkgs holds the same samples by package ("pkg:" line), when known.
	pkgs map[string]*result
}

func (r *result) add(ns, allocs []float64) {
	r.ns = append(r.ns, ns...)
	r.allocs = append(r.allocs, allocs...)
}

// floorFor returns floor's samples from bench's package if bench ran in
// exactly one package and floor ran there too; otherwise all of floor's.
func floorFor(bench, floor *result) *result {
	if len(bench.pkgs) == 1 {
		for pkg := range bench.pkgs {
			if f := floor.pkgs[pkg]; f != nil && len(f.ns) > 0 {
				return f
			}
		}
	}
	return floor
}

type pair struct {
	bench, floor string
	goal         float64 // 0: none
	maxAllocs    float64 // -1: none
	note         string
}

func main() {
	pairsFile := flag.String("pairs", "tools/benchratio/pairs.txt", "pairs file")
	strict := flag.Bool("strict", false, "exit 1 when a goal is missed")
	flag.Parse()
	pairs, err := readPairs(*pairsFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(2)
	}
	results, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(2)
	}
	if !report(os.Stdout, pairs, results) && *strict {
		os.Exit(1)
	}
}

func readPairs(path string) ([]pair, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []pair
	for i, line := range strings.Split(string(b), "\n") {
		note := ""
		if j := strings.Index(line, "#"); j >= 0 {
			note = strings.TrimSpace(line[j+1:])
			line = line[:j]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 4 {
			return nil, fmt.Errorf("%s:%d: want 4 columns, got %d", path, i+1, len(f))
		}
		p := pair{bench: f[0], floor: f[1], maxAllocs: -1, note: note}
		if f[2] != "-" {
			if p.goal, err = strconv.ParseFloat(f[2], 64); err != nil {
				return nil, fmt.Errorf("%s:%d: goal: %w", path, i+1, err)
			}
		}
		if f[3] != "-" {
			if p.maxAllocs, err = strconv.ParseFloat(f[3], 64); err != nil {
				return nil, fmt.Errorf("%s:%d: allocs: %w", path, i+1, err)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// parse reads benchmark lines such as
//
//	BenchmarkShield-2   200000   5321 ns/op   1100 B/op   3 allocs/op
func parse(r io.Reader) (map[string]*result, error) {
	out := map[string]*result{}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "pkg:" {
			pkg = f[1]
			continue
		}
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndex(name, "-"); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		var ns, allocs []float64
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				ns = append(ns, v)
			case "allocs/op":
				allocs = append(allocs, v)
			}
		}
		res := out[name]
		if res == nil {
			res = &result{pkgs: map[string]*result{}}
			out[name] = res
		}
		res.add(ns, allocs)
		if pkg != "" {
			pr := res.pkgs[pkg]
			if pr == nil {
				pr = &result{}
				res.pkgs[pkg] = pr
			}
			pr.add(ns, allocs)
		}
	}
	return out, sc.Err()
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// report prints the table and returns false when a goal was missed.
func report(w io.Writer, pairs []pair, results map[string]*result) bool {
	ok := true
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BENCHMARK\tNS/OP\tALLOCS\tFLOOR\tFLOOR NS/OP\tRATIO\tGOAL\tVERDICT\tWHAT")
	for _, p := range pairs {
		b, f := results[p.bench], results[p.floor]
		if b == nil || f == nil || len(b.ns) == 0 || len(f.ns) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t%s\t-\t-\t%s\tnot run\t%s\n", p.bench, p.floor, goalString(p), p.note)
			continue
		}
		f = floorFor(b, f)
		bn, fn := median(b.ns), median(f.ns)
		ratio := bn / fn
		allocs := median(b.allocs)
		var missed []string
		if p.goal > 0 && ratio > p.goal {
			missed = append(missed, "ratio")
		}
		if p.maxAllocs >= 0 && len(b.allocs) > 0 && allocs > p.maxAllocs {
			missed = append(missed, "allocs")
		}
		verdict := "ok"
		switch {
		case len(missed) > 0:
			verdict, ok = "MISSED ("+strings.Join(missed, ", ")+")", false
		case p.goal == 0 && p.maxAllocs < 0:
			verdict = "report"
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%.0f\t%.2fx\t%s\t%s\t%s\n", p.bench, bn, allocString(b), p.floor, fn, ratio, goalString(p), verdict, p.note)
	}
	tw.Flush()
	return ok
}

func allocString(r *result) string {
	if len(r.allocs) == 0 {
		return "-"
	}
	return strconv.FormatFloat(median(r.allocs), 'f', -1, 64)
}

func goalString(p pair) string {
	var parts []string
	if p.goal > 0 {
		parts = append(parts, fmt.Sprintf("<=%.3gx", p.goal))
	}
	if p.maxAllocs >= 0 {
		parts = append(parts, fmt.Sprintf("<=%g allocs", p.maxAllocs))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
