// Package gendocs writes the generated files that ship with snavio: shell
// completion scripts (completions/) and man pages (man/), both from the
// real command tree. `make completions man` runs it; a test fails when the
// committed files differ from what it would write.
package gendocs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/completion"
	"github.com/snavio/snavio/internal/cli/root"
	"github.com/snavio/snavio/internal/iostreams"
)

// manDate is the date printed in every man page's footer. It is fixed so
// that regenerating the pages is reproducible; bump it with the manual.
var manDate = time.Date(2026, time.November, 1, 0, 0, 0, 0, time.UTC)

// Root builds the command tree with streams that go nowhere.
func Root() *cobra.Command {
	ios, _, _, _ := iostreams.Test()
	g := &cmdutil.Globals{}
	return root.NewCmd(cmdutil.New(ios, emptyEnv{}, g), g)
}

type emptyEnv struct{}

func (emptyEnv) LookupEnv(string) (string, bool) { return "", false }

// Files returns every generated file keyed by its path relative to the
// repository root (completions/..., man/...).
func Files() (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, sh := range completion.Shells {
		var buf bytes.Buffer
		if err := completion.Write(Root(), &buf, sh); err != nil {
			return nil, fmt.Errorf("generate %s completion: %w", sh, err)
		}
		files[filepath.Join("completions", completion.FileName(sh))] = buf.Bytes()
	}

	tmp, err := os.MkdirTemp("", "snavio-man-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	r := Root()
	r.DisableAutoGenTag = true
	header := &doc.GenManHeader{Title: "SNAVIO", Section: "1", Source: "snavio", Manual: "snavio manual", Date: &manDate}
	if err := doc.GenManTree(r, header, tmp); err != nil {
		return nil, fmt.Errorf("generate man pages: %w", err)
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(tmp, e.Name()))
		if err != nil {
			return nil, err
		}
		files[filepath.Join("man", e.Name())] = b
	}
	return files, nil
}

// Write replaces the generated files under repo for the given top-level
// directories ("completions", "man"), removing files that are no longer
// generated.
func Write(repo string, dirs ...string) error {
	files, err := Files()
	if err != nil {
		return err
	}
	for _, dir := range dirs {
		full := filepath.Join(repo, dir)
		if err := os.RemoveAll(full); err != nil {
			return err
		}
		if err := os.MkdirAll(full, 0o755); err != nil {
			return err
		}
	}
	for rel, b := range files {
		if !under(rel, dirs) {
			continue
		}
		if err := os.WriteFile(filepath.Join(repo, rel), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func under(rel string, dirs []string) bool {
	top := rel
	if i := bytes.IndexByte([]byte(rel), filepath.Separator); i >= 0 {
		top = rel[:i]
	}
	for _, d := range dirs {
		if d == top {
			return true
		}
	}
	return false
}
