// Package smallfs mounts a small file system for tests that need a disk
// that fills up: writes past its size fail with ENOSPC, as on a full disk,
// and deleting a file frees the space again.
package smallfs

import (
	"os"
	"strconv"
	"testing"
)

// Mount mounts a file system of size bytes on a new temporary directory,
// unmounted when the test ends, and returns the directory. Mounting needs
// root (CAP_SYS_ADMIN) on Linux: where it is not permitted the test fails
// when CI is "true" (CI runs as root and must run it) and is skipped
// otherwise, saying why.
func Mount(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	err := MountAt(dir, size)
	if msg, skip := Unavailable(err, size); skip {
		t.Skip(msg)
	} else if err != nil {
		t.Fatal(msg)
	}
	t.Cleanup(func() {
		if err := Unmount(dir); err != nil {
			t.Errorf("smallfs: unmounting %s: %v", dir, err)
		}
	})
	return dir
}

// Unavailable turns MountAt's error into what a test says, and whether it
// skips: outside CI a missing permission (or another OS) skips; under
// CI=true only another OS does.
func Unavailable(err error, size int64) (msg string, skip bool) {
	switch {
	case !supported:
		return "smallfs: mounting a small file system is implemented on Linux only", true
	case err == nil:
		return "", false
	case os.Getenv("CI") == "true":
		return "smallfs: mounting a " + strconv.FormatInt(size, 10) + "-byte file system: " + err.Error() + " (CI must run this test as root)", false
	}
	return "smallfs: mounting a " + strconv.FormatInt(size, 10) + "-byte file system needs root on Linux (" + err.Error() + "); skipped outside CI", true
}
