//go:build linux

package wal

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync makes f's written data durable (and its size, not its other
// metadata): what a log append needs.
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// startWriteback starts writing f's bytes [off, off+n) to the disk without
// waiting for it (sync_file_range SYNC_FILE_RANGE_WRITE): it makes nothing
// durable, fdatasync still does, but that then has less left to write.
func startWriteback(f *os.File, off, n int64) error {
	return unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
