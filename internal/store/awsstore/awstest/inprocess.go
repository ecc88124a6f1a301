package awstest

import (
	"net/http/httptest"
	"strconv"

	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/sivchari/kumo"

	"github.com/snavio/snavio/internal/sdkbody"
)

// The in-process emulators: gofakes3 for S3 and kumo for SQS and SNS. Both
// are Go libraries linked into the test binary and served by httptest on
// 127.0.0.1, so they need no install step and cannot be missing.

// S3 is an in-process gofakes3 server with an in-memory backend.
type S3 struct {
	Endpoint string
	srv      *httptest.Server
	seq      atomic.Int64
}

// Kumo is an in-process kumo server. kumo keeps every service's state in
// package-level singletons shared by all its servers in the process, so
// tests name their queues and topics uniquely (UniqueName).
type Kumo struct {
	Endpoint string
	srv      *kumo.Server
}

// staticConfig is every emulator's aws.Config: fixed test credentials
// (DynamoDB Local accepts only letters and digits in the key id), a
// region, and the HTTP client the product's configurations use.
var staticConfig = aws.Config{
	Region:      "us-east-1",
	Credentials: credentials.NewStaticCredentialsProvider("snavioTest", "snavioTest", ""),
	HTTPClient:  sdkbody.Client{Next: awshttp.NewBuildableClient()},
}

// S3 returns the binary's gofakes3 server, starting it on first use.
func (e *Emulators) S3() *S3 {
	e.inproc.Lock()
	defer e.inproc.Unlock()
	if e.s3 == nil {
		srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
		e.s3 = &S3{Endpoint: srv.URL, srv: srv}
	}
	return e.s3
}

// Kumo returns the binary's kumo server, starting it on first use.
func (e *Emulators) Kumo() *Kumo {
	e.inproc.Lock()
	defer e.inproc.Unlock()
	if e.kumo == nil {
		srv := kumo.NewServer()
		e.kumo = &Kumo{Endpoint: srv.URL, srv: srv}
	}
	return e.kumo
}

// closeInProcess stops the in-process servers.
func (e *Emulators) closeInProcess() {
	e.inproc.Lock()
	defer e.inproc.Unlock()
	if e.s3 != nil {
		e.s3.srv.Close()
		e.s3 = nil
	}
	if e.kumo != nil {
		e.kumo.srv.Close()
		e.kumo = nil
	}
}

// Config is an aws.Config for the emulator (fixed test credentials and a
// region; neither emulator checks signatures).
func (s *S3) Config() aws.Config { return staticConfig.Copy() }

// ClientOptions point an s3 client at the emulator, path-style.
func (s *S3) ClientOptions() []func(*s3.Options) {
	return []func(*s3.Options){func(o *s3.Options) {
		o.BaseEndpoint = aws.String(s.Endpoint)
		o.UsePathStyle = true
	}}
}

// NewBucketName is a bucket name no other test of the binary uses.
func (s *S3) NewBucketName() string {
	return "snavio-test-" + strconv.FormatInt(s.seq.Add(1), 10)
}

// Config is an aws.Config for kumo.
func (k *Kumo) Config() aws.Config { return staticConfig.Copy() }

// SQSOptions point an sqs client at kumo.
func (k *Kumo) SQSOptions() []func(*sqs.Options) {
	return []func(*sqs.Options){func(o *sqs.Options) { o.BaseEndpoint = aws.String(k.Endpoint) }}
}

// SNSOptions point an sns client at kumo.
func (k *Kumo) SNSOptions() []func(*sns.Options) {
	return []func(*sns.Options){func(o *sns.Options) { o.BaseEndpoint = aws.String(k.Endpoint) }}
}
