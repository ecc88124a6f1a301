package cmdutil

import (
	"os"
	"path/filepath"
)

// GitWorkTree returns the root of the git work tree that holds path (the
// nearest ancestor directory with a .git entry), or "" if none does. A
// secret written there is one `git add .` away from being committed.
func GitWorkTree(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	for dir := filepath.Dir(abs); ; {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// SecretFileWarning returns a warning for a secret file written inside a
// git work tree, or "" when path is outside one.
func SecretFileWarning(flag, path string) string {
	root := GitWorkTree(path)
	if root == "" {
		return ""
	}
	return "Warning: " + flag + " " + path + " is inside the git work tree " + root +
		": add it to .gitignore, or keep secrets in the data directory (snavio profile show prints data_dir)"
}
