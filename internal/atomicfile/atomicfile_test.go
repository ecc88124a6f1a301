package atomicfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/snavio/snavio/internal/smallfs"
)

// entries lists dir, so a test can see no temporary file is left behind.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func check(t *testing.T, path, want string, perm os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || string(b) != want {
		t.Fatalf("%s holds %q, %v; want %q", path, b, err, want)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != perm {
		t.Fatalf("%s mode %v, %v; want %v", path, fi.Mode().Perm(), err, perm)
	}
}

func TestWriteReplacesWithMode(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := Write(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	check(t, p, "one", 0o600)
	if err := Write(p, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	check(t, p, "two", 0o644)
	if got := entries(t, dir); len(got) != 1 {
		t.Fatalf("left behind: %v", got)
	}
}

func TestWriteExclusiveNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "secret")
	if err := WriteExclusive(p, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteExclusive(p, []byte("second"), 0o600); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second create: %v, want fs.ErrExist", err)
	}
	check(t, p, "first", 0o600)
	if got := entries(t, dir); len(got) != 1 {
		t.Fatalf("left behind: %v", got)
	}
}

func TestWriteExclusiveRaceHasOneWinner(t *testing.T) {
	p := filepath.Join(t.TempDir(), "token")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = WriteExclusive(p, []byte{byte('a' + i)}, 0o600) })
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("writers %d and %d both created %s", won, i, p)
		case err == nil:
			won = i
		case !errors.Is(err, fs.ErrExist):
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no writer created the file")
	}
	check(t, p, string([]byte{byte('a' + won)}), 0o600)
}

func TestWriteIntoMissingDirFails(t *testing.T) {
	p := filepath.Join(t.TempDir(), "no", "f")
	if err := Write(p, nil, 0o600); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Write: %v", err)
	}
	if err := WriteExclusive(p, nil, 0o600); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("WriteExclusive: %v", err)
	}
}

// On a full disk the old content stays whole and no temporary file is
// left to fill it further.
func TestWriteOnFullDiskKeepsOldContent(t *testing.T) {
	dir := smallfs.Mount(t, 1<<20)
	p := filepath.Join(dir, "f")
	if err := Write(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, bytes.Repeat([]byte("x"), 2<<20), 0o600); err == nil {
		t.Fatal("a 2 MiB write to a 1 MiB disk succeeded")
	}
	check(t, p, "old", 0o600)
	if got := entries(t, dir); len(got) != 1 || got[0] != "f" {
		t.Fatalf("left behind: %v", got)
	}
}

func BenchmarkWrite(b *testing.B) {
	p := filepath.Join(b.TempDir(), "cursor")
	for b.Loop() {
		if err := Write(p, []byte("123456789\n"), 0o600); err != nil {
			b.Fatal(err)
		}
	}
}
