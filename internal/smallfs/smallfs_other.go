//go:build !linux

package smallfs

import "errors"

const supported = false

// MountAt fails: it is implemented on Linux only.
func MountAt(string, int64) error {
	return errors.New("mounting a small file system is implemented on Linux only")
}

// Unmount does nothing: nothing was mounted.
func Unmount(string) error { return nil }
