package cmdutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecretFileWarning(t *testing.T) {
	repo := t.TempDir()
	if err := os.Mkdir(filepath.Join(repo, ".git"), 0o700); err != nil {
		t.Fatal(err)
	}
	inside := filepath.Join(repo, "sub", "demo.token")
	if got := GitWorkTree(inside); got != repo {
		t.Errorf("GitWorkTree(%s) = %q, want %q", inside, got, repo)
	}
	if w := SecretFileWarning("--token-file", inside); !strings.Contains(w, "inside the git work tree "+repo) {
		t.Errorf("warning = %q", w)
	}
	outside := filepath.Join(t.TempDir(), "demo.token")
	if w := SecretFileWarning("--token-file", outside); w != "" {
		t.Errorf("outside a work tree: warning %q, want none", w)
	}
}
