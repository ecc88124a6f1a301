//go:build !linux

package wal

import "os"

// fdatasync makes f's written data durable. Without fdatasync it is a
// full fsync (F_FULLFSYNC on macOS, as os.File.Sync does there).
func fdatasync(f *os.File) error { return f.Sync() }

// startWriteback does nothing: it is a hint where sync_file_range exists
// (sync_linux.go), and fdatasync alone makes data durable.
func startWriteback(f *os.File, off, n int64) error { return nil }
