package app

import (
	"context"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/iostreams"
)

type env map[string]string

func (e env) LookupEnv(k string) (string, bool) { v, ok := e[k]; return v, ok }

func run(t *testing.T, tty bool, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv("SNAVIO_OUTPUT", "")
	t.Setenv("SNAVIO_NO_COLOR", "")
	ios, _, out, errOut := iostreams.Test()
	ios.SetStdoutTTY(tty)
	ios.SetStderrTTY(tty)
	home := t.TempDir()
	code = Run(context.Background(), args, ios, env{"HOME": home, "XDG_CONFIG_HOME": home + "/cfg"})
	return code, out.String(), errOut.String()
}

func TestRunVersionByTerminal(t *testing.T) {
	code, out, _ := run(t, false, "version")
	if code != 0 || !strings.HasPrefix(out, "{\n") {
		t.Errorf("piped: code %d out %q", code, out)
	}
	code, out, _ = run(t, true, "version")
	if code != 0 || !strings.HasPrefix(out, "snavio version ") || strings.Count(out, "\n") != 1 {
		t.Errorf("tty: code %d out %q, want one line", code, out)
	}
	code, out, _ = run(t, true, "--no-color", "version")
	if code != 0 || strings.Contains(out, "\x1b[") {
		t.Errorf("tty --no-color: code %d out %q", code, out)
	}
}

func TestRunErrorIsOneLine(t *testing.T) {
	code, out, errOut := run(t, false, "profile", "use", "ghost")
	if code != 1 || out != "" {
		t.Fatalf("code %d out %q", code, out)
	}
	if lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "Error: profile \"ghost\" is not in ") {
		t.Errorf("stderr = %q", errOut)
	}
	code, _, errOut = run(t, true, "profile", "use", "ghost")
	if code != 1 || !strings.HasPrefix(errOut, "\x1b[") {
		t.Errorf("tty error not coloured: %q", errOut)
	}
}

func TestRunUsageError(t *testing.T) {
	code, _, errOut := run(t, false, "profile", "set")
	if code != 2 || strings.Count(errOut, "snavio profile set --help") != 1 {
		t.Errorf("code %d stderr %q", code, errOut)
	}
}

// A usage error that already points at the command's --help gets no second
// "Run ... --help" line.
func TestRunUsageHintOnce(t *testing.T) {
	code, _, errOut := run(t, false, "route", "get")
	if code != 2 || strings.Count(errOut, "snavio route get --help") != 1 {
		t.Errorf("code %d stderr %q: want the --help hint once", code, errOut)
	}
}
