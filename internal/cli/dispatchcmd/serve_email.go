package dispatchcmd

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/snavio/snavio/internal/alerts"
	"github.com/snavio/snavio/internal/cli/cmdutil"
)

// EnvAlertEmailPassword holds the SMTP password when no
// --alert-email-password-file is given (a flag value would show in ps).
const EnvAlertEmailPassword = "SNAVIO_ALERT_EMAIL_PASSWORD"

// emailFlags are serve's flags for the email alert channel.
type emailFlags struct {
	SMTP         string
	From         string
	To           []string
	Username     string
	PasswordFile string
	Insecure     bool
}

// flagOf names the flag behind an alerts.EmailConfig field.
func (e *emailFlags) flagOf(field string) string {
	switch field {
	case alerts.FieldRelay:
		return "--alert-email-smtp"
	case alerts.FieldFrom:
		return "--alert-email-from"
	case alerts.FieldTo:
		return "--alert-email-to"
	case alerts.FieldUsername:
		return "--alert-email-username"
	case alerts.FieldPassword:
		if e.PasswordFile != "" {
			return "--alert-email-password-file " + e.PasswordFile
		}
		return EnvAlertEmailPassword
	case alerts.FieldInsecure:
		return "--alert-email-insecure"
	}
	return field
}

func (e *emailFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&e.SMTP, "alert-email-smtp", "", "email alerts through this SMTP relay, HOST:PORT (STARTTLS required unless --alert-email-insecure)")
	fl.StringVar(&e.From, "alert-email-from", "", "sender address of alert emails, such as alerts@example.com")
	fl.StringArrayVar(&e.To, "alert-email-to", nil, "recipient of alert emails; repeat the flag or separate addresses with commas")
	fl.StringVar(&e.Username, "alert-email-username", "", "SMTP AUTH username (the password from --alert-email-password-file or "+EnvAlertEmailPassword+")")
	fl.StringVar(&e.PasswordFile, "alert-email-password-file", "", "file holding the SMTP AUTH password (first line)")
	fl.BoolVar(&e.Insecure, "alert-email-insecure", false, "send without TLS, to a relay on a loopback address (127.0.0.1, ::1, localhost) only")
}

// config validates the flags and returns the email channel's
// configuration, nil when --alert-email-smtp is not given. The password
// comes from --alert-email-password-file, else from the environment.
func (e *emailFlags) config(getenv func(string) string) (*alerts.EmailConfig, error) {
	if e.SMTP == "" {
		if e.From != "" || len(e.To) > 0 || e.Username != "" || e.PasswordFile != "" || e.Insecure {
			return nil, cmdutil.Usagef("the --alert-email-* flags need --alert-email-smtp HOST:PORT, the relay to send through")
		}
		return nil, nil
	}
	c := &alerts.EmailConfig{Relay: e.SMTP, From: e.From, To: e.To, Username: e.Username, Insecure: e.Insecure}
	if e.PasswordFile != "" {
		b, err := os.ReadFile(e.PasswordFile)
		if err != nil {
			return nil, cmdutil.Usagef("--alert-email-password-file: %v", err)
		}
		pw, _, _ := strings.Cut(string(b), "\n")
		if c.Password = strings.TrimSuffix(pw, "\r"); c.Password == "" {
			return nil, cmdutil.Usagef("--alert-email-password-file %s: the first line is empty; write the password there", e.PasswordFile)
		}
	} else {
		c.Password = getenv(EnvAlertEmailPassword)
	}
	if err := c.Validate(); err != nil {
		var msgs []string
		for _, err := range unjoin(err) {
			var ce *alerts.ConfigError
			if errors.As(err, &ce) {
				msgs = append(msgs, fmt.Sprintf("%s: %s", e.flagOf(ce.Field), ce.Msg))
			} else {
				msgs = append(msgs, err.Error())
			}
		}
		return nil, cmdutil.Usagef("%s", strings.Join(msgs, "\n"))
	}
	return c, nil
}

// unjoin returns the errors errors.Join joined, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
