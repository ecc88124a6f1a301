package server

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// processStats is the process's own state at one scrape, read from /proc
// on Linux. ok is false where it cannot be read: the process_* families
// are then left out of that scrape.
type processStats struct {
	ok            bool
	cpuSeconds    float64
	residentBytes float64
	virtualBytes  float64
	startTime     float64 // seconds since the epoch; 0 when unknown
	openFDs       int     // -1 when unknown
	maxFDs        float64 // 0 when unknown
}

// userHZ is the unit of the times in /proc/<pid>/stat: USER_HZ, which the
// kernel fixes at 100 for every Linux user-space ABI.
const userHZ = 100

// procStat is what the process metrics take from /proc/<pid>/stat.
type procStat struct {
	cpuTicks   uint64 // utime + stime
	startTicks uint64 // starttime: ticks after boot
	vsize      uint64 // bytes
	rssPages   int64
}

// parseProcStat parses the content of /proc/<pid>/stat. The command name
// (field 2) is in parentheses and may hold spaces and parentheses itself,
// so the fields are counted from the last ')'.
func parseProcStat(data []byte) (procStat, error) {
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return procStat{}, errors.New("server: /proc/self/stat has no ')' closing the command name")
	}
	f := bytes.Fields(data[end+1:]) // f[0] is field 3 (state)
	const (
		utime     = 14 - 3
		stime     = 15 - 3
		starttime = 22 - 3
		vsize     = 23 - 3
		rss       = 24 - 3
	)
	if len(f) <= rss {
		return procStat{}, fmt.Errorf("server: /proc/self/stat has %d fields after the command name, want at least %d", len(f), rss+1)
	}
	u := func(i int) (uint64, error) {
		v, err := strconv.ParseUint(string(f[i]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("server: /proc/self/stat field %d: %w", i+3, err)
		}
		return v, nil
	}
	var st procStat
	ut, err := u(utime)
	if err != nil {
		return procStat{}, err
	}
	stt, err := u(stime)
	if err != nil {
		return procStat{}, err
	}
	if st.startTicks, err = u(starttime); err != nil {
		return procStat{}, err
	}
	if st.vsize, err = u(vsize); err != nil {
		return procStat{}, err
	}
	if st.rssPages, err = strconv.ParseInt(string(f[rss]), 10, 64); err != nil {
		return procStat{}, fmt.Errorf("server: /proc/self/stat field 24: %w", err)
	}
	if ut > ^uint64(0)-stt {
		return procStat{}, errors.New("server: /proc/self/stat utime + stime overflows")
	}
	st.cpuTicks = ut + stt
	return st, nil
}

// parseBootTime returns the btime line of /proc/stat: the boot time in
// seconds since the epoch.
func parseBootTime(data []byte) (int64, error) {
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte("btime "))
		if !ok {
			continue
		}
		v, err := strconv.ParseInt(string(bytes.TrimSpace(rest)), 10, 64)
		if err != nil || v <= 0 {
			return 0, fmt.Errorf("server: /proc/stat btime %q is not a positive number of seconds", rest)
		}
		return v, nil
	}
	return 0, errors.New("server: /proc/stat has no btime line")
}

// processFromStat turns parsed /proc figures into processStats.
func processFromStat(st procStat, bootTime int64, pageSize int) processStats {
	ps := processStats{
		ok:            true,
		cpuSeconds:    float64(st.cpuTicks) / userHZ,
		residentBytes: float64(st.rssPages) * float64(pageSize),
		virtualBytes:  float64(st.vsize),
		openFDs:       -1,
	}
	if bootTime > 0 {
		ps.startTime = float64(bootTime) + float64(st.startTicks)/userHZ
	}
	return ps
}
