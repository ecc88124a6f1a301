package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// registeredPlatform answers the route list and the queue reads of
// `queue list --registered`; any other method is not called.
type registeredPlatform struct {
	platform.Platform
	routes []registry.Item
	queues map[string]wire.QueueInfo // by name
}

func (p registeredPlatform) Target() platform.Target { return platform.Target{Kind: "local"} }

func (p registeredPlatform) ListRegistry(_ context.Context, kind registry.Kind, _ platform.RegistryFilter) ([]registry.Item, error) {
	if kind != registry.KindRoute {
		return nil, errors.New("not routes")
	}
	return p.routes, nil
}

func (p registeredPlatform) GetQueue(_ context.Context, name string) (wire.QueueInfo, error) {
	q, ok := p.queues[name]
	if !ok {
		return wire.QueueInfo{}, &platform.APIError{Status: 404, Message: "queue " + name + " does not exist"}
	}
	return q, nil
}

func TestListRegistered(t *testing.T) {
	arn := func(acct, name string) string { return "arn:aws:sqs:eu-west-1:" + acct + ":" + name }
	route := func(target, cmd, q, dlq string) registry.Item {
		return registry.Item{Route: &registry.Route{Target: target, Command: cmd, QueueARN: q, DLQARN: dlq}}
	}
	p := registeredPlatform{
		routes: []registry.Item{
			route("mailer", "send", arn("111111111111", "mailer"), arn("111111111111", "mailer-dlq")),
			route("mailer", "bounce", arn("111111111111", "mailer"), ""),
			route("ledger", "post", arn("222222222222", "ledger"), ""),
			route("gone", "x", arn("111111111111", "gone"), ""),
		},
		queues: map[string]wire.QueueInfo{
			"mailer":     {Name: "mailer", ARN: arn("111111111111", "mailer"), Visible: 3},
			"mailer-dlq": {Name: "mailer-dlq", ARN: arn("111111111111", "mailer-dlq")},
			"ledger":     {Name: "ledger", ARN: arn("111111111111", "ledger")}, // same name, this account
		},
	}
	var out, errOut bytes.Buffer
	d := Deps{
		Platform: func() (platform.Platform, error) { return p, nil },
		Printer:  func() (*output.Printer, error) { return output.NewPrinter(&out, output.JSON, output.Styles{}), nil },
		ErrOut:   &errOut,
	}
	cmd := NewCmdList(d, nil)
	cmd.SetArgs([]string{"--registered"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "2 of 4 registered queues could not be read here: gone, ledger") {
		t.Fatalf("error %v", err)
	}
	var got []wire.QueueInfo
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(got) != 2 || got[0].Name != "mailer" || got[1].Name != "mailer-dlq" {
		t.Errorf("listed %+v, want mailer and mailer-dlq once each", got)
	}
	for _, want := range []string{
		"queue " + arn("222222222222", "ledger") + " (routes ledger/post): the profile's queue ledger is " + arn("111111111111", "ledger") + ", another queue",
		"queue " + arn("111111111111", "gone") + " (routes gone/x): ",
	} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr %q, want %q", errOut.String(), want)
		}
	}

	cmd = NewCmdList(d, func(context.Context, *ListOptions) error { return nil })
	cmd.SetArgs([]string{"--registered", "--prefix", "m"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "--prefix and --registered: give one") {
		t.Errorf("--prefix with --registered: %v", err)
	}
}
