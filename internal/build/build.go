// Package build holds what the linker stamps into the binary. The Makefile
// and .goreleaser.yaml set the same variables with -ldflags -X:
//
//	-X github.com/snavio/snavio/internal/build.Version=v1.2.3
//	-X github.com/snavio/snavio/internal/build.Commit=abc1234
//	-X github.com/snavio/snavio/internal/build.Date=2026-11-21T00:00:00Z
package build

import (
	"runtime"
	"runtime/debug"
)

// Stamped by -ldflags. These are the only package-level variables the
// program writes, and only the linker writes them.
var (
	Version = ""
	Commit  = ""
	Date    = ""
)

// Info describes the running binary.
type Info struct {
	Version   string `json:"version" yaml:"version"`
	Commit    string `json:"commit" yaml:"commit"`
	Date      string `json:"date" yaml:"date"`
	GoVersion string `json:"go_version" yaml:"go_version"`
	Platform  string `json:"platform" yaml:"platform"`
}

// Current returns the stamped build information. Unstamped builds (go run,
// go install) fall back to the module version and VCS data that the Go
// toolchain records, and to "dev"/"unknown" when there is none.
func Current() Info {
	info := Info{
		Version:   Version,
		Commit:    Commit,
		Date:      Date,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if info.Commit == "" {
					info.Commit = s.Value
				}
			case "vcs.time":
				if info.Date == "" {
					info.Date = s.Value
				}
			}
		}
	}
	if info.Version == "" {
		info.Version = "dev"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	if info.Date == "" {
		info.Date = "unknown"
	}
	return info
}
