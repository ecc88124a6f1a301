package root

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/config"
	"github.com/snavio/snavio/internal/iostreams"
)

type mapEnv map[string]string

func (e mapEnv) LookupEnv(k string) (string, bool) { v, ok := e[k]; return v, ok }

func newFactory(t testing.TB) (*cmdutil.Factory, *cmdutil.Globals, *iostreams.IOStreams, *bytes.Buffer, *bytes.Buffer) {
	return newFactoryIn(t.TempDir())
}

func newFactoryIn(home string) (*cmdutil.Factory, *cmdutil.Globals, *iostreams.IOStreams, *bytes.Buffer, *bytes.Buffer) {
	ios, _, out, errOut := iostreams.Test()
	g := &cmdutil.Globals{}
	return cmdutil.New(ios, mapEnv{"HOME": home, "XDG_CONFIG_HOME": home + "/cfg"}, g), g, ios, out, errOut
}

func TestCommandTableMatchesTheTree(t *testing.T) {
	f, g, _, _, _ := newFactory(t)
	full := NewCmd(f, g)
	var got []string
	for _, c := range full.Commands() {
		got = append(got, c.Name())
	}
	var want []string
	for _, c := range commands() {
		built := c.build(f)
		if names := append([]string{built.Name()}, built.Aliases...); !slices.Equal(names, c.names) {
			t.Errorf("table names %v, the command calls itself %v", c.names, names)
		}
		want = append(want, c.names[0])
	}
	for _, tp := range helpTopics() {
		want = append(want, tp.Name())
	}
	slices.Sort(want)
	if !slices.Equal(got, want) { // cobra sorts Commands()
		t.Errorf("full tree has %v, want %v", got, want)
	}
}

func TestCommandName(t *testing.T) {
	f, g, _, _, _ := newFactory(t)
	r := newRoot(f, g)
	tests := []struct {
		args []string
		want string // "" means: build the whole tree
	}{
		{nil, ""},
		{[]string{"version"}, "version"},
		{[]string{"version", "-o", "json"}, "version"},
		{[]string{"-o", "json", "version"}, "version"},
		{[]string{"-ojson", "version"}, "version"},
		{[]string{"-vo", "json", "version"}, "version"},
		{[]string{"-vojson", "route"}, "route"},
		{[]string{"-v", "queue", "ls"}, "queue"},
		{[]string{"--output", "yaml", "profile", "list"}, "profile"},
		{[]string{"--output=yaml", "profile"}, "profile"},
		{[]string{"--profile", "version", "route", "list"}, "route"},
		{[]string{"--config", "/x.yaml", "--endpoint-url", "http://h", "--region", "eu-west-1", "send"}, "send"},
		{[]string{"--no-color", "version"}, "version"},
		{[]string{"--no-color=false", "version"}, "version"},
		{[]string{"--verbose", "tail"}, "tail"},
		{[]string{"-h"}, ""},
		{[]string{"--help", "version"}, ""},
		{[]string{"-x", "version"}, ""},
		{[]string{"--bogus", "version"}, ""},
		{[]string{"--", "version"}, ""},
		{[]string{"-", "version"}, ""},
		{[]string{"-o"}, ""},
		{[]string{"--profile"}, ""},
	}
	for _, tt := range tests {
		got, ok := commandName(r, tt.args)
		if (tt.want == "") == ok || got != tt.want {
			t.Errorf("commandName(%q) = %q, %v; want %q", tt.args, got, ok, tt.want)
		}
	}
}

func TestNewCmdForBuildsOnlyTheNamedCommand(t *testing.T) {
	f, g, _, _, _ := newFactory(t)
	full := len(NewCmd(f, g).Commands())
	for args, want := range map[string][]string{
		"version -o json":   {"version"},
		"-v route list":     {"route"},
		"dispatch serve -h": {"dispatch"},
		"completion bash":   nil, // walks the whole tree
		"__complete r":      nil,
		"help version":      nil,
		"exit-codes":        nil, // a help topic
		"verion":            nil, // unknown: suggestions need every name
		"":                  nil,
	} {
		f, g, _, _, _ := newFactory(t)
		cmd := NewCmdFor(f, g, strings.Fields(args))
		var got []string
		for _, c := range cmd.Commands() {
			got = append(got, c.Name())
		}
		if want == nil && len(got) != full || want != nil && !slices.Equal(got, want) {
			t.Errorf("NewCmdFor(%q) built %v, want %v (nil: all %d)", args, got, want, full)
		}
	}
}

// TestNewCmdForRunsLikeTheFullTree runs each argument list once on the
// tree NewCmdFor builds and once on the whole tree: the same stdout,
// stderr and error, whatever the arguments.
func TestNewCmdForRunsLikeTheFullTree(t *testing.T) {
	for _, args := range []string{
		"version -o json",
		"-o yaml version",
		"-ojson version",
		"-vo json version",
		"--no-color version -o table",
		"--profile ghost version -o json",
		"version --help",
		"version extra",
		"version --bogus",
		"route --help",
		"route list --help",
		"route ls --help",
		"route",
		"route nope",
		"profile list -o json",
		"profile set",
		"profile use ghost",
		"queue ls --help",
		"send --help",
		"send",
		"dispatch serve --help",
		"tail --help",
		"replay --help",
		"token --help",
		"key",
		"acl list --bogus",
		"doctor --help",
		"snapshot",
		"tenant-config --help",
		"-o xml version",
		"verion",
		"help version",
		"--help",
		"",
		"completion bash",
		"__complete rou",
		"__complete route l",
		"__complete -o ",
	} {
		t.Run(args, func(t *testing.T) {
			home := t.TempDir()
			lazy := execute(t, home, true, strings.Fields(args))
			whole := execute(t, home, false, strings.Fields(args))
			if lazy != whole {
				t.Errorf("NewCmdFor:\n%s\nNewCmd:\n%s", lazy, whole)
			}
		})
	}
}

func execute(t *testing.T, home string, lazy bool, args []string) string {
	t.Helper()
	f, g, ios, out, errOut := newFactoryIn(home)
	var cmd *cobra.Command
	if lazy {
		cmd = NewCmdFor(f, g, args)
	} else {
		cmd = NewCmd(f, g)
	}
	cmd.SetArgs(args)
	cmd.SetIn(ios.In)
	cmd.SetOut(ios.Out)
	cmd.SetErr(ios.ErrOut)
	failed, err := cmd.ExecuteContextC(context.Background())
	var b strings.Builder
	b.WriteString("stdout: " + out.String() + "\nstderr: " + errOut.String() + "\n")
	if err != nil {
		b.WriteString("error: " + err.Error() + " (exit " + string(rune('0'+cmdutil.ExitCode(err))) + ") in " + failed.CommandPath())
	}
	return b.String()
}

// BenchmarkNewCmd builds the whole tree, as help and completion do.
func BenchmarkNewCmd(b *testing.B) {
	ios, _, _, _ := iostreams.Test()
	b.ReportAllocs()
	for b.Loop() {
		g := &cmdutil.Globals{}
		NewCmd(cmdutil.New(ios, mapEnv{}, g), g)
	}
}

// BenchmarkNewCmdForVersion builds what `snavio version -o json` needs.
func BenchmarkNewCmdForVersion(b *testing.B) {
	ios, _, _, _ := iostreams.Test()
	args := []string{"version", "-o", "json"}
	b.ReportAllocs()
	for b.Loop() {
		g := &cmdutil.Globals{}
		NewCmdFor(cmdutil.New(ios, mapEnv{}, g), g, args)
	}
}

// TestEnvironmentTopicListsEveryVariable fails when a non-test source file
// reads a SNAVIO_* variable that `snavio help environment` does not list.
func TestEnvironmentTopicListsEveryVariable(t *testing.T) {
	var page string
	for _, c := range helpTopics() {
		if c.Use == "environment" {
			page = c.Long
		}
	}
	if page == "" {
		t.Fatal("no environment help topic")
	}
	root := filepath.Join("..", "..", "..")
	re := regexp.MustCompile(`"(SNAVIO_[A-Z_]+)"`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// Test-support packages (awstest, dispatchtest, ...) are not the CLI,
		// and the Lambda bootstrap's variables are its functions'
		// configuration (docs/lambda.md), not snavio's; the deploy stack
		// sets them on the functions.
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasSuffix(d.Name(), "test") ||
			path == filepath.Join(root, "internal", "lambda") || path == filepath.Join(root, "cmd", "snavio-lambda") ||
			path == filepath.Join(root, "internal", "deploy", "stack")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			if !listed(page, m[1]) {
				t.Errorf("%s reads %s, which `snavio help environment` does not list", path, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range config.SettingKeys() {
		if name := config.EnvName(k); !listed(page, name) {
			t.Errorf("setting %s is read from %s, which `snavio help environment` does not list", k, name)
		}
	}
}

// listed reports whether the environment page has a line for name.
func listed(page, name string) bool {
	return regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(name) + `(\s|$)`).MatchString(page)
}
