package platform

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// On an aws profile without control_url, every control operation returns
// the one typed error, naming the operation: the control API's methods
// say how to set control_url, tokens and ingress credentials say what
// IAM replaces them with, the rest is not on aws yet; none points at
// `dispatch serve` (an aws profile has no local server). Methods are
// found by reflection, so a new Platform method is checked without
// listing it here.
func TestAWSNotAvailable(t *testing.T) {
	var p Platform = &AWS{target: Target{Kind: "aws", Region: "eu-west-1"}}
	// The queue methods act on SQS (aws_queues.go, tested on kumo).
	queueMethods := map[string]bool{"ListQueues": true, "GetQueue": true, "CreateQueue": true, "ReceiveMessages": true, "DeleteMessages": true, "PurgeQueue": true}
	v := reflect.ValueOf(p)
	ty := reflect.TypeOf((*Platform)(nil)).Elem()
	errType := reflect.TypeOf((*error)(nil)).Elem()
	checked := 0
	for i := range ty.NumMethod() {
		name := ty.Method(i).Name
		if queueMethods[name] {
			continue
		}
		m := v.MethodByName(name)
		in := make([]reflect.Value, m.Type().NumIn())
		for j := range in {
			at := m.Type().In(j)
			switch {
			case at == reflect.TypeOf((*context.Context)(nil)).Elem():
				in[j] = reflect.ValueOf(context.Background())
			case at == reflect.TypeOf(func() time.Time { return time.Time{} }):
				in[j] = reflect.ValueOf(time.Now)
			default:
				in[j] = reflect.Zero(at)
			}
		}
		var err error
		for _, out := range m.Call(in) {
			if out.Type() == errType && !out.IsNil() {
				err = out.Interface().(error)
			}
			if pr, ok := out.Interface().(Probe); ok {
				err = pr.Err
			}
		}
		if name == "Target" || strings.HasSuffix(name, "Replay") || strings.HasSuffix(name, "Replays") {
			continue // replays run on aws (aws_replay_test.go)
		}
		checked++
		var na *NotAvailableError
		if !errors.As(err, &na) || na.What == "" {
			t.Errorf("%s: %v, want a *NotAvailableError naming the operation", name, err)
			continue
		}
		msg := err.Error()
		want := "not available on aws yet: "
		switch {
		case controlMethods[name]:
			want = "--control-url URL"
		case strings.Contains(name, "Token"), strings.Contains(name, "Credential"):
			want = "IAM replaces them"
		}
		if !strings.Contains(msg, want) || strings.Contains(msg, "dispatch serve") {
			t.Errorf("%s: %q, want %q in it", name, msg, want)
		}
	}
	if checked < 24 {
		t.Errorf("checked %d methods; the Platform interface has more", checked)
	}
}

// controlMethods go through the control API's Function URL on aws.
var controlMethods = map[string]bool{
	"Whoami": true, "CheckCredential": true, "Probe": true, "ListRegistry": true, "GetRegistryItem": true,
	"DeleteRegistryItem": true, "RegistryHistory": true, "ApplyRegistry": true, "RevokeACL": true, "CreateKey": true,
	"RotateKey": true, "DeliveryKey": true, "TenantConfig": true, "LatestSnapshot": true, "SnapshotPublicKey": true,
	"GenerateSnapshot": true, "Explain": true,
}

func TestAWSNamesTheKind(t *testing.T) {
	p := &AWS{}
	if _, err := p.ListRegistry(context.Background(), "route", RegistryFilter{}); err == nil || !strings.HasPrefix(err.Error(), "route list: ") {
		t.Errorf("route list: %v", err)
	}
	if _, err := p.RegistryHistory(context.Background(), "acl a/b c d", 1); err == nil || !strings.HasPrefix(err.Error(), "acl history: ") {
		t.Errorf("acl history: %v", err)
	}
}
