package smallfs

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

const supported = true

// mount mounts a tmpfs of size bytes on dir: in memory, so the test
// leaves nothing behind, and with a hard size limit.
func mount(dir string, size int64) error {
	return unix.Mount("snavio-smallfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+strconv.FormatInt(size, 10)+",mode=0700")
}

func unmount(dir string) error { return unix.Unmount(dir, 0) }

func getenv(k string) string { return os.Getenv(k) }
