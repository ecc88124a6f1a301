package ingresscred

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseAndFormatRoundTrip(t *testing.T) {
	k := Key{AccessKeyID: "SNVKTESTKEYACMEAAAAA", SecretAccessKey: "YWNtZS1pbmdyZXNzLXRlc3Qtc2VjcmV0LTAxMjM0"}
	got, err := Parse(Format("acme", k))
	if err != nil || got["acme"] != k {
		t.Fatalf("Parse(Format) = %+v, %v", got, err)
	}
	got, err = Parse([]byte("# c\n[default]\n; c\n aws_access_key_id=A \nAWS_SECRET_ACCESS_KEY = B\nregion = x\n[profile half]\naws_access_key_id = C\n"))
	if err != nil || got["default"] != (Key{"A", "B"}) || len(got) != 1 {
		t.Fatalf("Parse = %+v, %v", got, err)
	}
	for in, want := range map[string]string{"k = v\n": "before any [section]", "[x\n": "[name]", "[]\n": "no name", "[x]\nnovalue\n": "line 2: want key = value"} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Parse(%q) = %v, want %q", in, err, want)
		}
	}
}

// The precedence: a flag's file, then the environment, then the
// profile's file, then <data_dir>/<tenant>.credentials.
func TestResolvePrecedence(t *testing.T) {
	dir := t.TempDir()
	flag := write(t, dir, "flag", "[default]\naws_access_key_id = FLAG\naws_secret_access_key = s\n")
	prof := write(t, dir, "prof", "[default]\naws_access_key_id = PROFDEF\naws_secret_access_key = s\n[acme]\naws_access_key_id = PROFACME\naws_secret_access_key = s\n")
	write(t, dir, "acme.credentials", "[default]\naws_access_key_id = DATADIR\naws_secret_access_key = s\n")
	env := map[string]string{EnvAccessKeyID: "ENV", EnvSecretAccessKey: "s"}
	getenv := func(k string) string { return env[k] }
	in := Input{Tenant: "acme", FlagFile: flag, Getenv: getenv, ProfileFile: prof, DataDir: dir}
	for _, want := range []string{"FLAG", "ENV", "PROFACME", "DATADIR"} {
		k, from, err := Resolve(in)
		if err != nil || k.AccessKeyID != want || from == "" {
			t.Fatalf("Resolve = %+v from %q, %v; want %s", k, from, err, want)
		}
		switch want {
		case "FLAG":
			in.FlagFile = ""
		case "ENV":
			env = nil
		case "PROFACME":
			in.ProfileFile = ""
		}
	}
	in.DataDir = t.TempDir()
	if _, _, err := Resolve(in); !IsNone(err) || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Fatalf("nothing anywhere: %v", err)
	}
	os.Chmod(flag, 0o640)
	if _, _, err := Resolve(Input{Tenant: "acme", FlagFile: flag}); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("group-readable file: %v", err)
	}
}

// FuzzParse: the credentials-file parser never panics, and every key it
// returns has both parts.
func FuzzParse(f *testing.F) {
	f.Add([]byte("[default]\naws_access_key_id = A\naws_secret_access_key = B\n"))
	f.Add([]byte("[profile x]\r\naws_access_key_id=A\r\n#c\n;c\n"))
	f.Add([]byte("[\n=\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, err := Parse(b)
		if err != nil {
			return
		}
		for s, k := range keys {
			if s == "" || k.AccessKeyID == "" || k.SecretAccessKey == "" {
				t.Fatalf("section %q: %+v", s, k)
			}
		}
	})
}
