package server

import (
	"runtime"
)

// runtimeStats is the Go runtime's state at one scrape.
type runtimeStats struct {
	mem        runtime.MemStats
	goroutines int
	threads    int
}

// readScrape fills the state the read-at-scrape families report.
func readScrape(st *scrape) {
	runtime.ReadMemStats(&st.rt.mem)
	st.rt.goroutines = runtime.NumGoroutine()
	st.rt.threads, _ = runtime.ThreadCreateProfile(nil)
	st.proc = readProcess()
}

// runtimeFamilies are the Go runtime and process metrics, under the names
// Prometheus's own Go and process collectors use, so dashboards built for
// them keep working. Process metrics are read from /proc on Linux and are
// absent elsewhere.
func runtimeFamilies() []*family {
	g := func(name, help string, typ famType, fn func(*scrape) float64) *family {
		f := newFamily(name, help, typ, nil)
		f.fn = func(st *scrape) (float64, bool) { return fn(st), true }
		return f
	}
	p := func(name, help string, typ famType, fn func(*processStats) (float64, bool)) *family {
		f := newFamily(name, help, typ, nil)
		f.fn = func(st *scrape) (float64, bool) {
			if !st.proc.ok {
				return 0, false
			}
			return fn(&st.proc)
		}
		return f
	}
	info := newFamily("go_info", "Information about the Go environment.", typeGauge, nil, "version")
	info.fn = func(*scrape) (float64, bool) { return 1, true }
	info.fnValues = []string{runtime.Version()}
	return []*family{
		info,
		g("go_goroutines", "Number of goroutines that currently exist.", typeGauge,
			func(st *scrape) float64 { return float64(st.rt.goroutines) }),
		g("go_threads", "Number of OS threads created.", typeGauge,
			func(st *scrape) float64 { return float64(st.rt.threads) }),
		g("go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting.", typeGauge,
			func(*scrape) float64 { return float64(runtime.GOMAXPROCS(0)) }),
		g("go_memstats_alloc_bytes", "Number of heap bytes allocated and currently in use.", typeGauge,
			func(st *scrape) float64 { return float64(st.rt.mem.HeapAlloc) }),
		g("go_memstats_alloc_bytes_total", "Total number of heap bytes allocated, even if freed.", typeCounter,
			func(st *scrape) float64 { return float64(st.rt.mem.TotalAlloc) }),
		g("go_memstats_sys_bytes", "Number of bytes obtained from the OS.", typeGauge,
			func(st *scrape) float64 { return float64(st.rt.mem.Sys) }),
		g("go_memstats_heap_inuse_bytes", "Number of heap bytes in in-use spans.", typeGauge,
			func(st *scrape) float64 { return float64(st.rt.mem.HeapInuse) }),
		g("go_memstats_heap_objects", "Number of currently allocated heap objects.", typeGauge,
			func(st *scrape) float64 { return float64(st.rt.mem.HeapObjects) }),
		g("go_memstats_mallocs_total", "Total number of heap objects allocated.", typeCounter,
			func(st *scrape) float64 { return float64(st.rt.mem.Mallocs) }),
		g("go_memstats_frees_total", "Total number of heap objects frees.", typeCounter,
			func(st *scrape) float64 { return float64(st.rt.mem.Frees) }),
		g("go_memstats_next_gc_bytes", "Heap size at which the next garbage collection cycle ends.", typeGauge,
			func(st *scrape) float64 { return float64(st.rt.mem.NextGC) }),
		g("go_memstats_last_gc_time_seconds", "Time the last garbage collection finished, in seconds since the epoch.", typeGauge,
			func(st *scrape) float64 { return float64(st.rt.mem.LastGC) / 1e9 }),
		g("go_gc_cycles_total", "Completed garbage collection cycles.", typeCounter,
			func(st *scrape) float64 { return float64(st.rt.mem.NumGC) }),
		p("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", typeCounter,
			func(ps *processStats) (float64, bool) { return ps.cpuSeconds, true }),
		p("process_resident_memory_bytes", "Resident memory size in bytes.", typeGauge,
			func(ps *processStats) (float64, bool) { return ps.residentBytes, true }),
		p("process_virtual_memory_bytes", "Virtual memory size in bytes.", typeGauge,
			func(ps *processStats) (float64, bool) { return ps.virtualBytes, true }),
		p("process_start_time_seconds", "Start time of the process since the epoch in seconds.", typeGauge,
			func(ps *processStats) (float64, bool) { return ps.startTime, ps.startTime > 0 }),
		p("process_open_fds", "Number of open file descriptors.", typeGauge,
			func(ps *processStats) (float64, bool) { return float64(ps.openFDs), ps.openFDs >= 0 }),
		p("process_max_fds", "Maximum number of open file descriptors.", typeGauge,
			func(ps *processStats) (float64, bool) { return ps.maxFDs, ps.maxFDs > 0 }),
	}
}
