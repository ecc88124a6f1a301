// Package atomicfile writes small files so that a reader, or a restart
// after a crash, sees the old content or the new, never part of either.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write writes data to path with mode perm, replacing any file there: a
// temporary file in the same directory is written, synced and renamed
// over path, and the directory is synced.
func Write(path string, data []byte, perm os.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// WriteExclusive is Write for a file that must not exist yet: it fails
// with an error matching fs.ErrExist if path exists, and never changes
// that file. The temporary file is linked to path, which fails rather
// than replace, so two processes racing to create path cannot both win.
func WriteExclusive(path string, data []byte, perm os.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir syncs a directory, making the entries created, renamed or
// removed in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// writeTemp writes data to a new, synced file with mode perm beside path
// and returns its name.
func writeTemp(path string, data []byte, perm os.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	werr := f.Chmod(perm)
	if werr == nil {
		_, werr = f.Write(data)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(name)
		return "", werr
	}
	return name, nil
}
