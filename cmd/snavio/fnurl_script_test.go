package main

import (
	"fmt"
	"strconv"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/sivchari/kumo"

	"github.com/snavio/snavio/internal/platform/fnurltest"
)

// fnurlKey holds a script's fake Function URL (testscript.Env.Values).
type fnurlKey struct{}

type fnurlState struct {
	fn  *fnurltest.Server
	tap *fnurltest.STSTap
}

// fnurl implements the script command
//
//	fnurl start | calls | answer STATUS | require-external-id ROLE_ARN ID
//
// for the control commands of an aws profile. "start" serves, for the
// rest of the script, a fake of the control API's Function URL
// (internal/platform/fnurltest: it verifies each request's SigV4
// signature with the SDK's signer, then serves the real registry API as
// the principal the caller's role maps to) in region us-east-1 for env
// "test", and kumo's STS behind a tap that hands the fake the
// credentials AssumeRole issued; it sets FNURL to the Function URL,
// points AWS_ENDPOINT_URL at the tap and sets test credentials.
// "calls" prints, and forgets, each call since the last: "sts
// AssumeRole ROLE EXTERNAL_ID [refused]" and "http METHOD PATH STATUS".
// "answer" makes the Function URL answer every request with STATUS
// itself (0: serve again); "require-external-id" makes AssumeRole of
// ROLE_ARN succeed only with ID, as a trust policy would.
func fnurl(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: fnurl start | calls | answer STATUS | require-external-id ROLE_ARN ID")
	}
	st := ts.Value(fnurlKey{}).(*fnurlState)
	if args[0] != "start" && st.fn == nil {
		ts.Fatalf("fnurl %s: run fnurl start first", args[0])
	}
	switch {
	case args[0] == "start" && len(args) == 1:
		fn, err := fnurltest.New(fnurltest.Options{Region: "us-east-1", Env: "test"})
		ts.Check(err)
		ts.Defer(fn.Close)
		k := kumo.NewServer()
		ts.Defer(k.Close)
		tap, err := fnurltest.NewSTSTap(k.URL, fn)
		ts.Check(err)
		ts.Defer(tap.Close)
		st.fn, st.tap = fn, tap
		for key, v := range map[string]string{"FNURL": fn.URL, "AWS_ENDPOINT_URL": tap.URL, "AWS_REGION": "us-east-1",
			"AWS_ACCESS_KEY_ID": "AKIDSCRIPT", "AWS_SECRET_ACCESS_KEY": "script", "AWS_EC2_METADATA_DISABLED": "true"} {
			ts.Setenv(key, v)
		}
	case args[0] == "calls" && len(args) == 1:
		for _, c := range st.tap.Calls() {
			refused := ""
			if c.Refused != "" {
				refused = " refused"
			}
			fmt.Fprintf(ts.Stdout(), "sts AssumeRole %s %s%s\n", c.RoleARN, c.ExternalID, refused)
		}
		for _, r := range st.fn.Requests() {
			fmt.Fprintf(ts.Stdout(), "http %s %s %d\n", r.Method, r.Path, r.Status)
		}
	case args[0] == "answer" && len(args) == 2:
		status, err := strconv.Atoi(args[1])
		if err != nil {
			ts.Fatalf("fnurl answer: %v", err)
		}
		st.fn.AnswerAll(status)
	case args[0] == "require-external-id" && len(args) == 3:
		st.tap.RequireExternalID(args[1], args[2])
	default:
		ts.Fatalf("fnurl: bad arguments %q", args)
	}
}
