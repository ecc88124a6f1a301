//go:build linux

package embedded

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync makes f's written data durable (and its size, not its other
// metadata): what a log append needs.
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
