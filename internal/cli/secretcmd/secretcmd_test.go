package secretcmd

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/cli/cmdutil"
)

func TestSecretFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "acme.token")
	f, err := CreateSecretFile("--token-file", "a token file", path)
	if err != nil {
		t.Fatal(err)
	}
	var note bytes.Buffer
	if err := f.Write([]byte("secret\n"), "lost", &note); err != nil {
		t.Fatal(err)
	}
	var done error
	f.Close(&done)
	if b, err := os.ReadFile(path); err != nil || string(b) != "secret\n" {
		t.Fatalf("file = %q, %v", b, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}

	// An existing file is refused as a usage error and left alone.
	_, err = CreateSecretFile("--token-file", "a token file", path)
	if cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), "--token-file "+path+" exists: a token file is never overwritten") {
		t.Fatalf("existing file: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "secret\n" {
		t.Fatal("the existing file changed")
	}
	// A missing directory is a usage error.
	if _, err := CreateSecretFile("--token-file", "a token file", filepath.Join(dir, "no", "f")); cmdutil.ExitCode(err) != cmdutil.ExitUsage {
		t.Fatalf("missing directory: %v", err)
	}

	// A command that fails leaves no file behind.
	other := filepath.Join(dir, "other.token")
	f, err = CreateSecretFile("--token-file", "a token file", other)
	if err != nil {
		t.Fatal(err)
	}
	failed := errors.New("refused")
	f.Close(&failed)
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Fatalf("the file of a failed command is left: %v", err)
	}
}

func TestSecretFileWarnsInGitTree(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, ".git"), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := CreateSecretFile("--credentials-file", "a credentials file", filepath.Join(dir, "ci.credentials"))
	if err != nil {
		t.Fatal(err)
	}
	var note bytes.Buffer
	err = f.Write([]byte("x"), "lost", &note)
	f.Close(&err)
	if err != nil || !strings.HasPrefix(note.String(), "Warning: --credentials-file ") {
		t.Fatalf("warning = %q, %v", note.String(), err)
	}
}

func TestNonNil(t *testing.T) {
	type list []int
	if got := NonNil(list(nil)); got == nil || len(got) != 0 {
		t.Fatalf("NonNil(nil) = %#v", got)
	}
	if got := NonNil(list{1}); len(got) != 1 {
		t.Fatalf("NonNil = %#v", got)
	}
}
