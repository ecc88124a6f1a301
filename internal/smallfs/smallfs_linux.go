package smallfs

import (
	"strconv"

	"golang.org/x/sys/unix"
)

const supported = true

// MountAt mounts a tmpfs of size bytes on dir, an existing directory: in
// memory, so a test leaves nothing behind, with a hard size limit.
func MountAt(dir string, size int64) error {
	return unix.Mount("snavio-smallfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+strconv.FormatInt(size, 10)+",mode=0700")
}

// Unmount unmounts what MountAt mounted on dir.
func Unmount(dir string) error { return unix.Unmount(dir, 0) }
