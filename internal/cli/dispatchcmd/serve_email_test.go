package dispatchcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEmailFlagsPassword(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "smtp.password")
	if err := os.WriteFile(file, []byte("from-file\r\nsecond line ignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		if k == EnvAlertEmailPassword {
			return "from-env"
		}
		return ""
	}
	base := emailFlags{SMTP: "smtp.example.com:587", From: "a@example.com", To: []string{"ops@example.com"}, Username: "alerts"}

	// The file wins over the environment; its first line, without CR LF.
	f := base
	f.PasswordFile = file
	c, err := f.config(env)
	if err != nil || c.Password != "from-file" {
		t.Fatalf("password %q err %v", c.Password, err)
	}
	// Without a file, the environment.
	if c, err := base.config(env); err != nil || c.Password != "from-env" {
		t.Fatalf("password %q err %v", c.Password, err)
	}
	// No relay, no channel.
	if c, err := (&emailFlags{}).config(env); c != nil || err != nil {
		t.Fatalf("no flags: %v %v", c, err)
	}
	// An error names the flag the value came from.
	f.Username = ""
	if _, err := f.config(env); err == nil || !strings.HasPrefix(err.Error(), "--alert-email-username: a password without a username") {
		t.Fatalf("err %v", err)
	}
}
