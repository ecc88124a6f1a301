package awsworld

import (
	"context"
	"strings"
	"testing"
)

// The world runs end to end in cmd/snavio's TestTwoProfile; here, what
// Start refuses before it starts anything.
func TestStartNamesWhatIsMissing(t *testing.T) {
	_, err := Start(context.Background(), Options{Env: "x"})
	if err == nil || !strings.Contains(err.Error(), "DynamoDB, Kumo and Bootstrap are required") {
		t.Fatalf("Start without emulators: %v", err)
	}
}

func TestRoleARNs(t *testing.T) {
	w := &World{Env: "dev"}
	w.names.Env = "dev"
	if got, want := w.OperatorRoleARN(), "arn:aws:iam::000000000000:role/snavio/dev/operator/snavio-dev-operator"; got != want {
		t.Errorf("OperatorRoleARN = %s, want %s", got, want)
	}
	got, err := w.EmitRoleARN("acme")
	if want := "arn:aws:iam::000000000000:role/snavio/dev/emit/snavio-dev-emit-acme"; err != nil || got != want {
		t.Errorf("EmitRoleARN = %s, %v; want %s", got, err, want)
	}
	if _, err := w.EmitRoleARN(strings.Repeat("t", 60)); err == nil {
		t.Error("EmitRoleARN accepted a role name over IAM's 64 characters")
	}
	if got, want := QueueARN("q"), "arn:aws:sqs:us-east-1:000000000000:q"; got != want {
		t.Errorf("QueueARN = %s, want %s", got, want)
	}
}
