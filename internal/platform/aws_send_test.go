package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/snavio/snavio/internal/store/awsstore/awstest"
)

var emu awstest.Emulators

func TestMain(m *testing.M) {
	code := m.Run()
	emu.Close()
	os.Exit(code)
}

// callerEnv gives the SDK's chain static caller credentials and no
// shared files.
func callerEnv(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDCALLER")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "caller-secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_PROFILE", "")
}

// recorder records each request's form (query-protocol calls such as STS)
// and Authorization header on its way to the server.
type recorder struct {
	mu    sync.Mutex
	forms []url.Values
	auth  map[string]string // X-Amz-Target or Action -> Authorization
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(b))
	r.mu.Lock()
	if r.auth == nil {
		r.auth = map[string]string{}
	}
	op := req.Header.Get("X-Amz-Target")
	if f, err := url.ParseQuery(string(b)); err == nil && f.Get("Action") != "" {
		r.forms = append(r.forms, f)
		op = f.Get("Action")
	}
	r.auth[op] = req.Header.Get("Authorization")
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

const testEmitRole = "arn:aws:iam::000000000000:role/snavio/t/emit/snavio-t-emit-acme"

func TestAWSSendAssumesTheEmitRoleAndPuts(t *testing.T) {
	callerEnv(t)
	k := emu.Kumo()
	ctx := context.Background()
	env := emu.UniqueName()
	bus := "snavio-" + env + "-command-bus"
	eb := eventbridge.NewFromConfig(k.Config(), func(o *eventbridge.Options) { o.BaseEndpoint = awssdk.String(k.Endpoint) })
	if _, err := eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: awssdk.String(bus)}); err != nil {
		t.Fatal(err)
	}
	rule := emu.UniqueName()
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: awssdk.String(rule), EventBusName: awssdk.String(bus), EventPattern: awssdk.String(`{"detail-type":["snavio.command-sent"]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: awssdk.String(rule), EventBusName: awssdk.String(bus), Targets: []ebtypes.Target{{Id: awssdk.String("t"), Arn: awssdk.String("arn:aws:sqs:us-east-1:000000000000:" + rule)}}}); err != nil {
		t.Fatal(err)
	}

	rec := &recorder{}
	target := Target{Kind: "aws", Endpoint: k.Endpoint, Region: "us-east-1", Env: env, EmitRoleARN: testEmitRole, ExternalID: "acme-ext-1"}
	b := NewBus(target, BusOptions{HTTPClient: &http.Client{Transport: rec}, MaxAttempts: 1})
	detail := `{"probe":"` + rule + `"}`
	res, err := b.PutEvents(ctx, []Event{{Source: "acme/billing", DetailType: "snavio.command-sent", Detail: []byte(detail)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].EventID == "" {
		t.Fatalf("results %+v", res)
	}
	if len(rec.forms) != 1 {
		t.Fatalf("STS calls %v, want one AssumeRole", rec.forms)
	}
	f := rec.forms[0]
	if f.Get("Action") != "AssumeRole" || f.Get("RoleArn") != testEmitRole || f.Get("ExternalId") != "acme-ext-1" || f.Get("DurationSeconds") != "900" {
		t.Errorf("AssumeRole request %v", f)
	}
	if a := rec.auth["AssumeRole"]; !strings.Contains(a, "Credential=AKIDCALLER/") {
		t.Errorf("AssumeRole signed with %q, want the caller's key", a)
	}
	// PutEvents is signed with the session's key, not the caller's.
	if a := rec.auth["AWSEvents.PutEvents"]; a == "" || strings.Contains(a, "AKIDCALLER") {
		t.Errorf("PutEvents signed with %q, want the assumed role's session key", a)
	}

	resp, err := http.Get(k.Endpoint + "/kumo/eventbridge/delivered-events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var delivered []struct{ EventId, Source, DetailType, Detail, EventBusName, RuleName string }
	if err := json.NewDecoder(resp.Body).Decode(&delivered); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range delivered {
		if d.RuleName == rule {
			found = d.EventId == res[0].EventID && d.Source == "acme/billing" && d.EventBusName == bus && d.Detail == detail
		}
	}
	if !found {
		t.Errorf("the event is not on bus %s as put: %+v", bus, delivered)
	}
}

func TestAWSSendWithoutExternalIDSendsNone(t *testing.T) {
	callerEnv(t)
	k := emu.Kumo()
	rec := &recorder{}
	b := NewBus(Target{Kind: "aws", Endpoint: k.Endpoint, Region: "us-east-1", EmitRoleARN: testEmitRole}, BusOptions{HTTPClient: &http.Client{Transport: rec}, MaxAttempts: 1})
	if _, err := b.PutEvents(context.Background(), []Event{{Source: "acme/billing", DetailType: "snavio.command-sent", Detail: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	if len(rec.forms) != 1 || rec.forms[0].Has("ExternalId") {
		t.Errorf("AssumeRole request %v", rec.forms)
	}
}

// stepOf fails the test unless err is a *StepError of step whose message
// contains want.
func stepOf(t *testing.T, err error, step, want string) {
	t.Helper()
	var se *StepError
	var ce *CredentialsError
	switch {
	case errors.As(err, &se) && se.Step == step && strings.Contains(err.Error(), want):
	case errors.As(err, &ce) && ce.Step == step && strings.Contains(err.Error(), want):
	default:
		t.Fatalf("error %v (%T), want step %s with %q", err, err, step, want)
	}
	if !strings.HasPrefix(err.Error(), step+": ") {
		t.Errorf("error %q does not start with its step", err)
	}
}

func TestAWSSendNamesTheFailingStep(t *testing.T) {
	ctx := context.Background()
	put := func(target Target) error {
		_, err := NewBus(target, BusOptions{MaxAttempts: 1}).PutEvents(ctx, []Event{{Source: "acme/billing", DetailType: "snavio.command-sent", Detail: []byte(`{}`)}})
		return err
	}
	k := emu.Kumo()

	t.Run("no emit role", func(t *testing.T) {
		callerEnv(t)
		err := put(Target{Kind: "aws", Endpoint: k.Endpoint, Region: "us-east-1"})
		stepOf(t, err, StepAssumeRole, "--emit-role-arn")
	})
	t.Run("no credentials", func(t *testing.T) {
		callerEnv(t)
		t.Setenv("AWS_ACCESS_KEY_ID", "")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "")
		err := put(Target{Kind: "aws", Endpoint: k.Endpoint, Region: "us-east-1", EmitRoleARN: testEmitRole})
		stepOf(t, err, StepCredentials, "none found")
	})
	t.Run("STS unreachable", func(t *testing.T) {
		callerEnv(t)
		err := put(Target{Kind: "aws", Endpoint: "http://127.0.0.1:1", Region: "us-east-1", EmitRoleARN: testEmitRole})
		stepOf(t, err, StepAssumeRole, "cannot reach STS at http://127.0.0.1:1")
		if strings.Contains(err.Error(), "EventBridge") {
			t.Errorf("an STS failure blamed on EventBridge: %v", err)
		}
		var se *StepError
		if errors.As(err, &se); !se.Retryable {
			t.Error("unreachable STS not retryable")
		}
	})
	// kumo grants every AssumeRole: a fake STS answers AccessDenied as
	// STS does (its query-protocol XML error).
	t.Run("access denied", func(t *testing.T) {
		callerEnv(t)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>User: arn:aws:iam::111111111111:user/bob is not authorized to perform: sts:AssumeRole</Message></Error><RequestId>r1</RequestId></ErrorResponse>`)
		}))
		defer srv.Close()
		err := put(Target{Kind: "aws", Endpoint: srv.URL, Region: "us-east-1", EmitRoleARN: testEmitRole, ExternalID: "x1"})
		stepOf(t, err, StepAssumeRole, "access denied to the emit role "+testEmitRole)
		if !strings.Contains(err.Error(), "external_id") {
			t.Errorf("no hint at external_id: %v", err)
		}
	})
	// kumo's EventBridge accepts every PutEvents: a server that answers
	// STS from kumo and refuses PutEvents as EventBridge does.
	t.Run("PutEvents refused", func(t *testing.T) {
		callerEnv(t)
		kumoURL, _ := url.Parse(k.Endpoint)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Amz-Target") == "AWSEvents.PutEvents" {
				w.Header().Set("Content-Type", "application/x-amz-json-1.1")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"__type":"AccessDeniedException","message":"not authorized to put to snavio-t-command-bus"}`)
				return
			}
			r.URL.Scheme, r.URL.Host, r.RequestURI, r.Host = kumoURL.Scheme, kumoURL.Host, "", kumoURL.Host
			resp, err := http.DefaultTransport.RoundTrip(r)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
		}))
		defer srv.Close()
		err := put(Target{Kind: "aws", Endpoint: srv.URL, Region: "us-east-1", Env: "t", EmitRoleARN: testEmitRole})
		stepOf(t, err, StepPutEvents, "AccessDeniedException: not authorized")
		if !strings.Contains(err.Error(), "snavio-t-command-bus") {
			t.Errorf("error does not name the bus: %v", err)
		}
	})
}

func TestEmitRoleOf(t *testing.T) {
	for _, c := range []struct {
		t                  Target
		env, tenant, fails string
	}{
		{t: Target{EmitRoleARN: testEmitRole}, env: "t", tenant: "acme"},
		{t: Target{EmitRoleARN: "arn:aws:iam::000000000000:role/snavio-prod-emit-a.b_c", Env: "prod"}, env: "prod", tenant: "a.b_c"},
		{t: Target{EmitRoleARN: "arn:aws:iam::000000000000:role/custom"}, env: "", tenant: ""},
		{t: Target{EmitRoleARN: "arn:aws:iam::000000000000:role/custom", Env: "t"}, env: "t", tenant: ""},
		{t: Target{}, fails: "no emit_role_arn"},
		{t: Target{EmitRoleARN: "arn:aws:sts::000000000000:assumed-role/x"}, fails: "not an IAM role ARN"},
	} {
		r, err := EmitRoleOf(c.t)
		if c.fails != "" {
			if err == nil || !strings.Contains(err.Error(), c.fails) {
				t.Errorf("%+v: error %v, want %q", c.t, err, c.fails)
			}
			continue
		}
		if err != nil || r.Env != c.env || r.Tenant != c.tenant || r.Account != "000000000000" {
			t.Errorf("%+v: %+v %v", c.t, r, err)
		}
	}
	r, _ := EmitRoleOf(Target{EmitRoleARN: testEmitRole})
	if arn, err := r.TopicARN("eu-west-1", "a.b_c"); err != nil || arn != "arn:aws:sns:eu-west-1:000000000000:snavio-t-telemetry-a_db__c" {
		t.Errorf("topic %q %v", arn, err)
	}
}
