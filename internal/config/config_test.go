package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

type mapEnv map[string]string

func (m mapEnv) LookupEnv(k string) (string, bool) { v, ok := m[k]; return v, ok }

func TestDefaultPaths(t *testing.T) {
	tests := []struct {
		env        mapEnv
		flag       string
		wantConfig string
		wantData   string
	}{
		{mapEnv{"HOME": "/h"}, "", "/h/.config/snavio/config.yaml", "/h/.local/share/snavio"},
		{mapEnv{"HOME": "/h", "XDG_CONFIG_HOME": "/x", "XDG_DATA_HOME": "/d"}, "", "/x/snavio/config.yaml", "/d/snavio"},
		{mapEnv{"HOME": "/h", "SNAVIO_CONFIG": "/e.yaml"}, "", "/e.yaml", "/h/.local/share/snavio"},
		{mapEnv{"HOME": "/h", "SNAVIO_CONFIG": "/e.yaml"}, "/f.yaml", "/f.yaml", "/h/.local/share/snavio"},
	}
	for _, tt := range tests {
		p, err := DefaultPaths(tt.env, tt.flag)
		if err != nil {
			t.Fatal(err)
		}
		if p.ConfigFile != tt.wantConfig || p.DataDir != tt.wantData {
			t.Errorf("DefaultPaths(%v, %q) = %+v, want %s %s", tt.env, tt.flag, p, tt.wantConfig, tt.wantData)
		}
	}
}

func TestSaveIsAtomicAndPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "config.yaml")
	f := &File{CurrentProfile: "a", Profiles: map[string]*Profile{"a": {Kind: KindLocal, Endpoint: "http://127.0.0.1:1"}}}
	if err := Save(path, f); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.CurrentProfile != "a" || got.Profiles["a"].Endpoint != "http://127.0.0.1:1" {
		t.Errorf("round trip = %+v", got)
	}
}

func TestLoadMissingAndEmptyFiles(t *testing.T) {
	dir := t.TempDir()
	f, err := Load(filepath.Join(dir, "none.yaml"))
	if err != nil || len(f.Profiles) != 0 {
		t.Fatalf("missing file: %v %+v", err, f)
	}
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(empty); err != nil {
		t.Fatalf("empty file: %v", err)
	}
}

func TestLoadRejects(t *testing.T) {
	tests := map[string]string{
		"profiles: [x": "fix the YAML",
		"profiles:\n  a:\n    kind: local\n    bogus: 1\n":                           "field bogus not found",
		"profiles:\n  a:\n    kind: mars\n":                                          `unknown kind "mars"`,
		"profiles:\n  a:\n":                                                          `profile "a" is empty`,
		"profiles:\n  a:\n    kind: aws\n    endpoint: http://x\n":                   "kind aws does not take endpoint",
		"profiles:\n  'a b':\n    kind: local\n":                                     "invalid profile name",
		"current: x\n":                                                               "field current not found",
		"profiles:\n  a:\n    kind: aws\n    env: Prod\n":                            `invalid env "Prod"`,
		"profiles:\n  a:\n    kind: aws\n    control_url: http://example.com/\n":     `invalid control_url "http://example.com/"`,
		"profiles:\n  a:\n    kind: aws\n    emit_role_arn: arn:aws:iam::1:role/x\n": "invalid emit_role_arn",
		"profiles:\n  a:\n    kind: aws\n    external_id: \"a b\"\n":                 "invalid external_id",
		"profiles:\n  a:\n    kind: local\n    control_url: https://x.on.aws/\n":     "kind local takes only",
	}
	for body, want := range tests {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load(%q) = %v, want error containing %q", body, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("Load(%q) error spans lines: %q", body, err)
		}
	}
}

func flags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.String("profile", "", "")
	fs.StringP("output", "o", "", "")
	fs.String("endpoint-url", "", "")
	fs.String("region", "", "")
	fs.Bool("no-color", false, "")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

func value(s *Settings, key string) Setting {
	for _, v := range s.Values {
		if v.Key == key {
			return v
		}
	}
	return Setting{}
}

func TestPrecedenceFlagEnvProfileDefault(t *testing.T) {
	for _, k := range []string{"SNAVIO_PROFILE", "SNAVIO_ENDPOINT_URL", "SNAVIO_REGION", "SNAVIO_OUTPUT", "SNAVIO_NO_COLOR", "SNAVIO_BUS_NAME"} {
		t.Setenv(k, "")
	}
	file := &File{CurrentProfile: "p", Profiles: map[string]*Profile{
		"p": {Kind: KindAWS, Region: "eu-west-1"},
		"q": {Kind: KindLocal, Endpoint: "http://127.0.0.1:2"},
	}}
	paths := Paths{ConfigFile: "/c.yaml", DataDir: "/d"}

	s, err := Resolve(file, flags(t), paths)
	if err != nil {
		t.Fatal(err)
	}
	if s.ProfileName != "p" || s.ProfileOrigin != FromFile || s.Region != "eu-west-1" || value(s, "region").Origin != FromFile {
		t.Errorf("profile layer: %+v", s)
	}
	if s.BusName != DefaultBusName || value(s, "bus_name").Origin != FromDefault {
		t.Errorf("default layer: bus %q origin %s", s.BusName, value(s, "bus_name").Origin)
	}

	t.Setenv("SNAVIO_REGION", "us-west-2")
	t.Setenv("SNAVIO_BUS_NAME", "other-bus")
	s, err = Resolve(file, flags(t), paths)
	if err != nil {
		t.Fatal(err)
	}
	if s.Region != "us-west-2" || value(s, "region").Origin != FromEnv || s.BusName != "other-bus" {
		t.Errorf("env layer: region %q (%s) bus %q", s.Region, value(s, "region").Origin, s.BusName)
	}

	s, err = Resolve(file, flags(t, "--region", "ap-south-1"), paths)
	if err != nil {
		t.Fatal(err)
	}
	if s.Region != "ap-south-1" || value(s, "region").Origin != FromFlag {
		t.Errorf("flag layer: region %q (%s)", s.Region, value(s, "region").Origin)
	}

	t.Setenv("SNAVIO_PROFILE", "q")
	s, err = Resolve(file, flags(t), paths)
	if err != nil {
		t.Fatal(err)
	}
	if s.ProfileName != "q" || s.ProfileOrigin != FromEnv || s.EndpointURL != "http://127.0.0.1:2" || s.DataDir != "/d" {
		t.Errorf("SNAVIO_PROFILE: %+v", s)
	}
	s, err = Resolve(file, flags(t, "--profile", "p"), paths)
	if err != nil || s.ProfileName != "p" || s.ProfileOrigin != FromFlag {
		t.Errorf("--profile beats SNAVIO_PROFILE: %v %+v", err, s)
	}
}

func TestResolveWithoutConfigUsesBuiltInLocal(t *testing.T) {
	t.Setenv("SNAVIO_PROFILE", "")
	t.Setenv("SNAVIO_ENDPOINT_URL", "")
	s, err := Resolve(&File{Profiles: map[string]*Profile{}}, nil, Paths{DataDir: "/d"})
	if err != nil {
		t.Fatal(err)
	}
	if s.ProfileName != DefaultProfileName || s.Kind != KindLocal || s.EndpointURL != DefaultLocalEndpoint || s.DataDir != "/d" {
		t.Errorf("built-in profile: %+v", s)
	}
	t.Setenv("SNAVIO_PROFILE", "missing")
	if _, err := Resolve(&File{Profiles: map[string]*Profile{}}, nil, Paths{ConfigFile: "/c"}); err == nil ||
		!strings.Contains(err.Error(), `profile "missing" (from env) is not in /c`) {
		t.Errorf("missing named profile: %v", err)
	}
}

func TestPresentation(t *testing.T) {
	t.Setenv("SNAVIO_OUTPUT", "yaml")
	t.Setenv("SNAVIO_NO_COLOR", "1")
	p, err := ResolvePresentation(flags(t))
	if err != nil || p.Output != "yaml" || !p.NoColor {
		t.Fatalf("env: %+v %v", p, err)
	}
	p, err = ResolvePresentation(flags(t, "-o", "json"))
	if err != nil || p.Output != "json" {
		t.Fatalf("flag: %+v %v", p, err)
	}
	t.Setenv("SNAVIO_NO_COLOR", "perhaps")
	if _, err := ResolvePresentation(nil); err == nil || !strings.Contains(err.Error(), "SNAVIO_NO_COLOR") {
		t.Fatalf("bad bool: %v", err)
	}
}

func TestBuiltinDefaultProfile(t *testing.T) {
	f := &File{Profiles: map[string]*Profile{"prod": {Kind: KindAWS, Region: "eu-west-1"}}}
	if got := f.ProfileNames(); len(got) != 2 || got[0] != "default" || got[1] != "prod" {
		t.Errorf("ProfileNames = %q, want default and prod", got)
	}
	if p, builtin, ok := f.Lookup("default"); !ok || !builtin || p.Kind != KindLocal {
		t.Errorf("Lookup(default) = %+v %v %v", p, builtin, ok)
	}
	if f.Current() != "default" {
		t.Errorf("Current = %q", f.Current())
	}
	// A file's own "default" replaces the built-in one.
	f.Profiles["default"] = &Profile{Kind: KindAWS, Region: "us-east-1"}
	if p, builtin, _ := f.Lookup("default"); builtin || p.Kind != KindAWS {
		t.Errorf("own default: %+v builtin %v", p, builtin)
	}
	if _, _, ok := f.Lookup("nope"); ok {
		t.Error("Lookup(nope) found a profile")
	}
}
