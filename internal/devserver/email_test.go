package devserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/alerts"
	"github.com/snavio/snavio/internal/alerts/smtptest"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// startWithEmail runs the demo with the email channel pointed at relay
// and sends one invalid command (a critical alert) from the demo source.
func startWithEmail(t *testing.T, relay *smtptest.Relay, password string) (*Serve, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := Start(context.Background(), Options{DataDir: dir, Ephemeral: true, Listen: "127.0.0.1:0", Demo: true,
		Email: &alerts.EmailConfig{Relay: relay.Addr, From: "alerts@snavio.example", To: []string{"ops@demo.example"},
			Username: "alerts", Password: password, RootCAs: relay.RootCAs},
		Jobs: Schedule{Alerts: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	bad := signed(t, demoKeyFrom(t, dir), "0f8fad5b-d9cb-469f-a165-000000000199", DemoTarget, DemoCommand, `{"a":1}`)
	putEvent(t, dir, s.Info().URL, DemoSource, bytes.Replace(bad, []byte(`"a":1`), []byte(`"a":2`), 1))
	return s, dir
}

// apiCall answers method path with token (the operator's when empty),
// failing the test on a status other than want.
func apiCall(t *testing.T, s *Serve, dir, token, method, path, body string, want int) string {
	t.Helper()
	if token == "" {
		tok, err := os.ReadFile(filepath.Join(dir, server.OperatorTokenFile))
		if err != nil {
			t.Fatal(err)
		}
		token = strings.TrimSpace(string(tok))
	}
	req, _ := http.NewRequest(method, s.Info().URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, b, want)
	}
	return string(b)
}

// scrapeMetrics returns the server's /metrics.
func scrapeMetrics(t *testing.T, s *Serve) string {
	t.Helper()
	res, err := http.Get(s.Info().URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// TestAlertsReachEmail: an invalid command's alert goes through the
// outbox's drain to the relay over STARTTLS with AUTH, and /metrics
// counts it.
func TestAlertsReachEmail(t *testing.T) {
	relay := smtptest.Start(t, smtptest.Options{User: "alerts", Password: "pw-0123456789"})
	s, _ := startWithEmail(t, relay, "pw-0123456789")
	waitFor(t, "the alert email", func() bool { return len(relay.Deliveries()) > 0 })
	d := relay.Deliveries()[0]
	if !d.TLS || !d.Auth || d.From != "alerts@snavio.example" || len(d.To) != 1 || d.To[0] != "ops@demo.example" {
		t.Fatalf("delivery tls=%v auth=%v from %q to %v", d.TLS, d.Auth, d.From, d.To)
	}
	msg, err := mail.ReadMessage(bytes.NewReader(d.Data))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := msg.Header.Get("Subject"), "[snavio] CRITICAL "+telemetry.NameInvalid+" for tenant demo"; got != want {
		t.Fatalf("subject %q, want %q", got, want)
	}
	// The relay has the message before the channel's Deliver returns (it
	// still closes the session), so the count may trail it by a moment.
	waitFor(t, "the email delivery counted in /metrics", func() bool {
		return strings.Contains(scrapeMetrics(t, s), "\nsnavio_alert_email_delivered_total 1\n")
	})
}

// TestEmailRefusedShowsOnTheDashboard: the relay refuses the login (a
// permanent failure): the critical alert is on the dashboard log, the
// failure too, over /v1/alerts and in /metrics.
func TestEmailRefusedShowsOnTheDashboard(t *testing.T) {
	relay := smtptest.Start(t, smtptest.Options{User: "alerts", Password: "pw-0123456789"})
	s, dir := startWithEmail(t, relay, "wrong-password")
	waitFor(t, "the delivery failure", func() bool { return len(s.alerts.Dashboard().Failures("demo")) > 0 })
	var got struct {
		Alerts   []alerts.Alert   `json:"alerts"`
		Failures []alerts.Failure `json:"delivery_failures"`
	}
	if err := json.Unmarshal([]byte(apiCall(t, s, dir, "", http.MethodGet, "/v1/alerts?tenant=demo", "", http.StatusOK)), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Alerts) != 1 || got.Alerts[0].Event != telemetry.NameInvalid {
		t.Fatalf("dashboard alerts %+v", got.Alerts)
	}
	if len(got.Failures) != 1 || got.Failures[0].Channel != "email" || !got.Failures[0].Permanent || !strings.Contains(got.Failures[0].Error, "535") {
		t.Fatalf("delivery failures %+v", got.Failures)
	}
	// The tenant sees its failure, without the error text, which names
	// the operator's relay.
	var iss wire.TokenIssued
	if err := json.Unmarshal([]byte(apiCall(t, s, dir, "", http.MethodPost, "/v1/tokens", `{"tenant":"demo"}`, http.StatusCreated)), &iss); err != nil {
		t.Fatal(err)
	}
	var mine struct {
		Failures []alerts.Failure `json:"delivery_failures"`
	}
	if err := json.Unmarshal([]byte(apiCall(t, s, dir, iss.Secret, http.MethodGet, "/v1/alerts", "", http.StatusOK)), &mine); err != nil {
		t.Fatal(err)
	}
	if len(mine.Failures) != 1 || mine.Failures[0].Channel != "email" || mine.Failures[0].Error != "" {
		t.Fatalf("tenant's failures %+v", mine.Failures)
	}
	if n := len(relay.Deliveries()); n != 0 || relay.Auths() != 1 {
		t.Fatalf("%d messages, %d logins: a refused login is not retried", n, relay.Auths())
	}
	waitFor(t, "the email failure counted in /metrics", func() bool {
		return strings.Contains(scrapeMetrics(t, s), "\nsnavio_alert_email_failed_total 1\n")
	})
}

func TestStartRefusesABadEmailConfig(t *testing.T) {
	_, err := Start(context.Background(), Options{DataDir: t.TempDir(), Ephemeral: true, Listen: "127.0.0.1:0",
		Email: &alerts.EmailConfig{Relay: "smtp.example.com", From: "a@b", To: []string{"c@d"}}})
	if err == nil || !strings.Contains(err.Error(), "--alert-email-smtp") || !strings.Contains(err.Error(), "want HOST:PORT") {
		t.Fatalf("err %v", err)
	}
}
