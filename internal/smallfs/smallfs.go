// Package smallfs mounts a small file system for tests that need a disk
// that fills up: writes past its size fail with ENOSPC, as on a full disk,
// and deleting a file frees the space again.
package smallfs

import "testing"

// Mount mounts a file system of size bytes on a new temporary directory,
// unmounted when the test ends, and returns the directory. Mounting needs
// root (CAP_SYS_ADMIN) on Linux: where it is not permitted the test fails
// when CI is "true" (CI runs as root and must run it) and is skipped
// otherwise, saying why.
func Mount(t testing.TB, size int64) string {
	t.Helper()
	if !supported {
		t.Skip("smallfs: mounting a small file system is implemented on Linux only")
	}
	dir := t.TempDir()
	if err := mount(dir, size); err != nil {
		if getenv("CI") == "true" {
			t.Fatalf("smallfs: mounting a %d-byte file system on %s: %v (CI must run this test as root)", size, dir, err)
		}
		t.Skipf("smallfs: mounting a %d-byte file system needs root on Linux (%v); skipped outside CI", size, err)
	}
	t.Cleanup(func() {
		if err := unmount(dir); err != nil {
			t.Errorf("smallfs: unmounting %s: %v", dir, err)
		}
	})
	return dir
}
