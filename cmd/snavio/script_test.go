package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/snavio/snavio/internal/app"
)

// TestMain lets testscript run the real snavio entry point in-process: the
// scripts' `exec snavio` re-executes this test binary as snavio.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"snavio": func() { os.Exit(app.Main()) },
	})
}

// TestScripts runs testdata/script/*.txtar. Set SNAVIO_UPDATE_SCRIPTS=1 to
// rewrite the expected output in the scripts from the actual output.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", "script"),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       os.Getenv("SNAVIO_UPDATE_SCRIPTS") == "1",
		Setup: func(env *testscript.Env) error {
			// Keep every script's config and data inside its work dir.
			home := filepath.Join(env.WorkDir, "home")
			env.Setenv("HOME", home)
			env.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
			env.Setenv("XDG_DATA_HOME", filepath.Join(home, ".local", "share"))
			for _, k := range []string{"NO_COLOR", "SNAVIO_CONFIG", "SNAVIO_PROFILE", "SNAVIO_OUTPUT", "SNAVIO_ENDPOINT_URL",
				"SNAVIO_REGION", "SNAVIO_NO_COLOR", "SNAVIO_FORCE_TTY", "SNAVIO_DATA_DIR"} {
				env.Setenv(k, "")
			}
			return nil
		},
	})
}
