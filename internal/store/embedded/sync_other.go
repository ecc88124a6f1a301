//go:build !linux

package embedded

import "os"

// fdatasync makes f's written data durable. Without fdatasync it is a
// full fsync (F_FULLFSYNC on macOS, as os.File.Sync does there).
func fdatasync(f *os.File) error { return f.Sync() }
