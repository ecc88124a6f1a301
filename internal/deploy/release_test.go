package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestReleasePublishesLambdaZips reads .goreleaser.yaml (goreleaser
// itself is not on every machine; `make release-check` runs it): the
// bootstrap is built for linux arm64 and amd64 as `make lambda` builds
// it, with the CLI's version stamp, and archived alone as a zip beside
// the CLI archives, named so that deploy --zip takes it as it comes.
func TestReleasePublishesLambdaZips(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Builds []struct {
			ID, Main, Binary string
			Env, Flags, Tags []string
			Ldflags          []string
			Goos, Goarch     []string
		}
		Archives []struct {
			ID           string
			IDs          []string `yaml:"ids"`
			Formats      []string
			NameTemplate string `yaml:"name_template"`
			Files        []string
			BuildsInfo   struct{ Mode int } `yaml:"builds_info"`
		}
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	var cliLdflags []string
	found := false
	for _, bd := range cfg.Builds {
		if bd.ID == "snavio" {
			cliLdflags = bd.Ldflags
		}
	}
	for _, bd := range cfg.Builds {
		if bd.ID != "snavio-lambda" {
			continue
		}
		found = true
		if bd.Main != "./cmd/snavio-lambda" || bd.Binary != "bootstrap" {
			t.Errorf("lambda build: main %q binary %q, want ./cmd/snavio-lambda as bootstrap", bd.Main, bd.Binary)
		}
		if !slices.Equal(bd.Goos, []string{"linux"}) || !slices.Contains(bd.Goarch, "arm64") || !slices.Contains(bd.Goarch, "amd64") {
			t.Errorf("lambda build: %v/%v, want linux arm64 and amd64", bd.Goos, bd.Goarch)
		}
		if !slices.Contains(bd.Tags, "lambda.norpc") || !slices.Contains(bd.Flags, "-trimpath") || !slices.Contains(bd.Env, "CGO_ENABLED=0") {
			t.Errorf("lambda build: tags %v flags %v env %v, want make lambda's (lambda.norpc, -trimpath, CGO off)", bd.Tags, bd.Flags, bd.Env)
		}
		if !slices.Equal(bd.Ldflags, cliLdflags) {
			t.Errorf("lambda ldflags %v differ from the CLI's %v", bd.Ldflags, cliLdflags)
		}
	}
	if !found {
		t.Fatal("no snavio-lambda build")
	}
	found = false
	for _, a := range cfg.Archives {
		if !slices.Equal(a.IDs, []string{"snavio-lambda"}) {
			if slices.Contains(a.IDs, "snavio-lambda") {
				t.Errorf("archive %s mixes the bootstrap with other builds", a.ID)
			}
			continue
		}
		found = true
		if !slices.Equal(a.Formats, []string{"zip"}) || !slices.Equal(a.Files, []string{"none*"}) || a.BuildsInfo.Mode != 0o755 {
			t.Errorf("lambda archive: formats %v files %v mode %o, want a zip holding only bootstrap, 0755", a.Formats, a.Files, a.BuildsInfo.Mode)
		}
		if !strings.Contains(a.NameTemplate, "lambda_bootstrap_{{ .Arch }}") {
			t.Errorf("lambda archive name %q, want ..._lambda_bootstrap_<arch>", a.NameTemplate)
		}
	}
	if !found {
		t.Fatal("no archive of the snavio-lambda build")
	}
}
