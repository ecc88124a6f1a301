package platform

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Every control operation of an aws profile returns the one typed error,
// naming what is not available, and none points at `dispatch serve` (an
// aws profile has no local server). Methods are found by reflection, so a
// new Platform method is checked without listing it here.
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
		if name == "Target" {
			continue
		}
		checked++
		var na *NotAvailableError
		if !errors.As(err, &na) || na.What == "" {
			t.Errorf("%s: %v, want a *NotAvailableError naming the operation", name, err)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "not available on aws yet: ") || strings.Contains(msg, "dispatch serve") {
			t.Errorf("%s: %q", name, msg)
		}
	}
	if checked < 24 {
		t.Errorf("checked %d methods; the Platform interface has more", checked)
	}
}

func TestAWSNamesTheKind(t *testing.T) {
	p := &AWS{}
	if _, err := p.ListRegistry(context.Background(), "route", RegistryFilter{}); err == nil || err.Error() != "not available on aws yet: route list" {
		t.Errorf("route list: %v", err)
	}
	if _, err := p.RegistryHistory(context.Background(), "acl a/b c d", 1); err == nil || err.Error() != "not available on aws yet: acl history" {
		t.Errorf("acl history: %v", err)
	}
}
