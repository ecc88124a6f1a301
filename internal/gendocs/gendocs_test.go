package gendocs

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestGeneratedFilesAreFresh fails when completions/ or man/ differ from
// what the current command tree generates.
func TestGeneratedFilesAreFresh(t *testing.T) {
	repo := filepath.Join("..", "..")
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	var committed []string
	for _, dir := range []string{"completions", "man"} {
		entries, err := os.ReadDir(filepath.Join(repo, dir))
		if err != nil {
			t.Fatalf("%s/: %v; run `make completions man`", dir, err)
		}
		for _, e := range entries {
			committed = append(committed, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(committed)
	for _, rel := range committed {
		if _, ok := files[rel]; !ok {
			t.Errorf("%s is committed but no longer generated: run `make completions man`", rel)
		}
	}
	for rel, want := range files {
		got, err := os.ReadFile(filepath.Join(repo, rel))
		if err != nil {
			t.Errorf("%s is missing: run `make completions man` (%v)", rel, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `make completions man` and commit the result", rel)
		}
	}
}

func TestFilesCoverEveryShellAndCommand(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"completions/snavio.bash", "completions/_snavio", "completions/snavio.fish", "completions/snavio.ps1",
		"man/snavio.1", "man/snavio-version.1", "man/snavio-profile-set.1", "man/snavio-completion.1",
	} {
		if len(files[filepath.FromSlash(want)]) == 0 {
			t.Errorf("%s not generated", want)
		}
	}
	if !bytes.Contains(files[filepath.FromSlash("man/snavio-version.1")], []byte("snavio version -o json")) {
		t.Error("man page of version lacks its example")
	}
}

func TestWriteReplacesDirectory(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "man", "snavio-removed.1")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, "man"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale man page survived Write: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "man", "snavio.1")); err != nil {
		t.Errorf("snavio.1 not written: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "completions")); !os.IsNotExist(err) {
		t.Errorf("Write(man) touched completions/")
	}
}

// TestEveryCommandHasExamplesAndOutputFormats holds the CLI to its
// conventions: every runnable command documents examples, and the global
// -o flag reaches it (inherited from the root).
func TestEveryCommandHasExamplesAndOutputFormats(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.Runnable() || c.Hidden || c.Name() == "help" || c.Name() == "__complete" || c.Name() == "__completeNoDesc" {
			return
		}
		n++
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%q has no examples in its help", c.CommandPath())
		}
		if c.Short == "" {
			t.Errorf("%q has no short description", c.CommandPath())
		}
		if c.InheritedFlags().Lookup("output") == nil && c.Flags().Lookup("output") == nil && c != c.Root() {
			t.Errorf("%q does not take -o/--output", c.CommandPath())
		}
	}
	walk(Root())
	if n < 30 {
		t.Fatalf("walked %d runnable commands; the tree looks incomplete", n)
	}
}
