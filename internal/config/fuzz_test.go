package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the config loader: it must never panic,
// every failure must be one line naming the file, and anything it accepts
// must survive a Save/Load round trip unchanged.
func FuzzLoad(f *testing.F) {
	f.Add([]byte("current_profile: a\nprofiles:\n  a:\n    kind: local\n    endpoint: http://127.0.0.1:1\n"))
	f.Add([]byte("profiles:\n  p:\n    kind: aws\n    region: eu-west-1\n    role_arn: arn:aws:iam::123456789012:role/r\n"))
	f.Add([]byte("profiles: [x"))
	f.Add([]byte("profiles:\n  a: ~\n"))
	f.Add([]byte("{}"))
	f.Add([]byte("- 1\n- 2\n"))
	f.Add([]byte("profiles:\n  a: &x {kind: local}\n  b: *x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		file, err := Load(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		out := filepath.Join(dir, "out.yaml")
		if err := Save(out, file); err != nil {
			t.Fatalf("accepted config does not save: %v", err)
		}
		again, err := Load(out)
		if err != nil {
			t.Fatalf("saved config does not load: %v", err)
		}
		if again.CurrentProfile != file.CurrentProfile || len(again.Profiles) != len(file.Profiles) {
			t.Fatalf("round trip changed the config: %+v vs %+v", file, again)
		}
		for name, p := range file.Profiles {
			if q := again.Profiles[name]; q == nil || *q != *p {
				t.Fatalf("round trip changed profile %q: %+v vs %+v", name, p, q)
			}
		}
	})
}
