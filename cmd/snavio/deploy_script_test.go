package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/sivchari/kumo"

	"github.com/snavio/snavio/internal/deploy/cfnfake"
	"github.com/snavio/snavio/internal/deploy/lambdazip"
)

// awsFakeKey holds a script's AWS fake (testscript.Env.Values).
type awsFakeKey struct{}

type awsFakeState struct{ fake *cfnfake.Fake }

// awsFake implements the script command
//
//	aws-fake start BUCKET | kumo | fail-changeset REASON | fail-resource LOGICAL_ID | ok | calls | zip FILE TEXT
//
// for `snavio dispatch deploy` and `destroy`: "start" serves, for the rest
// of the script, a fake of CloudFormation's query protocol
// (internal/deploy/cfnfake: no emulator has change sets) and gofakes3 for
// S3 on one address, told apart by the SigV4 scope, creates BUCKET and
// points AWS_ENDPOINT_URL, a region and test credentials at it.
// "kumo" instead serves kumo (IAM, SNS, SQS, STS) in-process there.
// "fail-changeset" and "fail-resource" make the next change sets fail or
// the next execution roll back, "ok" clears both, "calls" prints each
// CloudFormation call with its parameters, and "zip" writes a bootstrap
// zip holding TEXT.
func awsFake(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: aws-fake start BUCKET | fail-changeset REASON | fail-resource ID | ok | calls | zip FILE TEXT")
	}
	st := ts.Value(awsFakeKey{}).(*awsFakeState)
	if args[0] != "start" && args[0] != "zip" && args[0] != "kumo" && st.fake == nil {
		ts.Fatalf("aws-fake %s: run aws-fake start first", args[0])
	}
	switch {
	case args[0] == "start" && len(args) == 2:
		st.fake = cfnfake.New()
		// The CLI polls every 2 s or more; the deploy package's tests walk
		// the one-step-per-poll path with millisecond delays.
		st.fake.RevealAll = true
		s3h := gofakes3.New(s3mem.New()).Server()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.Header.Get("Authorization"), "/s3/aws4_request") {
				s3h.ServeHTTP(w, r)
				return
			}
			st.fake.ServeHTTP(w, r)
		}))
		ts.Defer(srv.Close)
		cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDSCRIPT", "script", "")}
		c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.BaseEndpoint = aws.String(srv.URL); o.UsePathStyle = true })
		if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(args[1])}); err != nil {
			ts.Fatalf("aws-fake: create bucket: %v", err)
		}
		for k, v := range map[string]string{"AWS_ENDPOINT_URL": srv.URL, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDSCRIPT",
			"AWS_SECRET_ACCESS_KEY": "script", "AWS_EC2_METADATA_DISABLED": "true"} {
			ts.Setenv(k, v)
		}
	case args[0] == "kumo" && len(args) == 1:
		// kumo in-process for IAM, SNS, SQS and STS (tenant on-boarding).
		srv := kumo.NewServer()
		ts.Defer(srv.Close)
		for k, v := range map[string]string{"AWS_ENDPOINT_URL": srv.URL, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDSCRIPT",
			"AWS_SECRET_ACCESS_KEY": "script", "AWS_EC2_METADATA_DISABLED": "true"} {
			ts.Setenv(k, v)
		}
	case args[0] == "fail-changeset" && len(args) == 2:
		st.fake.FailChangeSets(args[1])
	case args[0] == "fail-resource" && len(args) == 2:
		st.fake.FailResource(args[1])
	case args[0] == "ok" && len(args) == 1:
		st.fake.FailChangeSets("")
		st.fake.FailResource("")
	case args[0] == "calls" && len(args) == 1:
		for _, r := range st.fake.Requests() {
			var kv []string
			for k, v := range r.Form {
				if k == "Action" || k == "Version" || k == "TemplateBody" || strings.HasSuffix(k, "ParameterValue") && strings.Contains(r.Form.Get(strings.TrimSuffix(k, "Value")+"Key"), "DeliveryKey") {
					continue
				}
				kv = append(kv, k+"="+v[0])
			}
			sort.Strings(kv)
			fmt.Fprintln(ts.Stdout(), r.Action, strings.Join(kv, " "))
		}
	case args[0] == "zip" && len(args) == 3:
		var b bytes.Buffer
		ts.Check(lambdazip.Write(&b, strings.NewReader(args[2])))
		ts.Check(os.WriteFile(ts.MkAbs(args[1]), b.Bytes(), 0o644))
	default:
		ts.Fatalf("aws-fake: bad arguments %q", args)
	}
}
