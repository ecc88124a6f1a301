// Package deploy runs the platform stack's change sets: upload the
// bootstrap zip by content hash, create a change set (CREATE or UPDATE),
// describe what it would change, execute it and wait with progress, or
// delete the stack. The flow is terraform's plan/apply and sam deploy's;
// docs/deploy.md is the guide.
package deploy

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// CloudFormation is the part of the CloudFormation API a Deployer calls.
type CloudFormation interface {
	cloudformation.DescribeStacksAPIClient
	cloudformation.DescribeChangeSetAPIClient
	CreateChangeSet(context.Context, *cloudformation.CreateChangeSetInput, ...func(*cloudformation.Options)) (*cloudformation.CreateChangeSetOutput, error)
	ExecuteChangeSet(context.Context, *cloudformation.ExecuteChangeSetInput, ...func(*cloudformation.Options)) (*cloudformation.ExecuteChangeSetOutput, error)
	DeleteChangeSet(context.Context, *cloudformation.DeleteChangeSetInput, ...func(*cloudformation.Options)) (*cloudformation.DeleteChangeSetOutput, error)
	DeleteStack(context.Context, *cloudformation.DeleteStackInput, ...func(*cloudformation.Options)) (*cloudformation.DeleteStackOutput, error)
	DescribeStackEvents(context.Context, *cloudformation.DescribeStackEventsInput, ...func(*cloudformation.Options)) (*cloudformation.DescribeStackEventsOutput, error)
}

// Objects is the part of the S3 API a Deployer calls.
type Objects interface {
	HeadObject(context.Context, *s3.HeadObjectInput, ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// TemplateBodyLimit is CloudFormation's limit on an inline template;
// larger templates go through S3.
const TemplateBodyLimit = 51_200

// Deployer runs change sets of one environment's stack.
type Deployer struct {
	CFN CloudFormation
	S3  Objects
	// Region of the S3 client: a template over TemplateBodyLimit is
	// passed as its S3 URL in that region.
	Region string
	Clock  clock.Clock
	// Progress receives stack events while a change set executes or the
	// stack is deleted, oldest first (nil: none).
	Progress func(Event)
	// WaitMin and WaitMax bound the delay between polls (defaults 2 s and
	// 15 s); MaxWait bounds a whole wait (default 1 h).
	WaitMin, WaitMax, MaxWait time.Duration
	// TemplateBodyLimit overrides TemplateBodyLimit (tests).
	TemplateBodyLimit int
}

// Input is what a deploy needs.
type Input struct {
	Env        string
	CodeBucket string
	// Zip is the bootstrap zip; Arch is its Lambda architecture (arm64
	// or x86_64).
	Zip  []byte
	Arch string
	// DeliveryKey is the base64 delivery master key; empty keeps the
	// stack's current one (an error on the first deploy).
	DeliveryKey string
	// SnapshotSeed is base64 of the 32-byte Ed25519 seed that signs
	// registry snapshots (ParseSnapshotSeed); empty keeps the stack's
	// current key (an error on the first deploy).
	SnapshotSeed string
	// Template is the rendered template (JSON).
	Template []byte
	// RoleARN, when set, is the service role CloudFormation acts with
	// (the deployer then needs only iam:PassRole on it).
	RoleARN string
}

// Artifact is the uploaded bootstrap zip.
type Artifact struct {
	Bucket   string `json:"bucket"`
	Key      string `json:"key"`
	SHA256   string `json:"sha256"`
	Uploaded bool   `json:"uploaded"`
}

// Change is one resource change of a change set.
type Change struct {
	Action      string `json:"action"`
	LogicalID   string `json:"logical_id"`
	Type        string `json:"type"`
	PhysicalID  string `json:"physical_id,omitempty"`
	Replacement string `json:"replacement,omitempty"`
}

// Replaced reports whether the change replaces the resource (or may:
// CloudFormation's Conditional).
func (c Change) Replaced() bool { return c.Replacement == "True" || c.Replacement == "Conditional" }

// Plan is a created change set and what it would change.
type Plan struct {
	Stack       string   `json:"stack"`
	Type        string   `json:"change_set_type"`
	ChangeSet   string   `json:"change_set,omitempty"`
	ChangeSetID string   `json:"change_set_id,omitempty"`
	Artifact    Artifact `json:"artifact"`
	Changes     []Change `json:"changes"`
}

// NoChanges reports whether applying the plan would change nothing.
func (p *Plan) NoChanges() bool { return len(p.Changes) == 0 }

// Event is one stack event.
type Event struct {
	Time      time.Time `json:"time"`
	LogicalID string    `json:"logical_id"`
	Type      string    `json:"type"`
	Status    string    `json:"status"`
	Reason    string    `json:"reason,omitempty"`
}

// ChangeSetFailedError is a change set CloudFormation could not create.
type ChangeSetFailedError struct {
	Stack, Reason string
}

func (e *ChangeSetFailedError) Error() string {
	return fmt.Sprintf("the change set of stack %s failed: %s (nothing was changed)", e.Stack, e.Reason)
}

// StackFailedError is a stack operation that ended in a failed state.
type StackFailedError struct {
	Stack, Status string
	// Failures are the failed resources' events, oldest first.
	Failures []Event
}

func (e *StackFailedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "stack %s ended %s", e.Stack, e.Status)
	for _, f := range e.Failures {
		fmt.Fprintf(&b, "; %s (%s) %s: %s", f.LogicalID, f.Type, f.Status, f.Reason)
	}
	if strings.Contains(e.Status, "ROLLBACK") {
		b.WriteString(": CloudFormation rolled the stack back to its previous state")
	}
	return b.String()
}

func (d *Deployer) defaults() {
	if d.WaitMin == 0 {
		d.WaitMin = 2 * time.Second
	}
	if d.WaitMax == 0 {
		d.WaitMax = 15 * time.Second
	}
	if d.MaxWait == 0 {
		d.MaxWait = time.Hour
	}
	if d.Clock == nil {
		d.Clock = clock.System()
	}
	if d.TemplateBodyLimit == 0 {
		d.TemplateBodyLimit = TemplateBodyLimit
	}
}

// stackStatus returns the stack's status, "" when it does not exist.
func (d *Deployer) stackStatus(ctx context.Context, name string) (*cftypes.Stack, error) {
	out, err := d.CFN.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "ValidationError" && strings.Contains(ae.ErrorMessage(), "does not exist") {
			return nil, nil
		}
		return nil, fmt.Errorf("describe stack %s: %w", name, err)
	}
	if len(out.Stacks) == 0 {
		return nil, nil
	}
	return &out.Stacks[0], nil
}

// Plan uploads the zip (unless S3 has it), creates a change set and
// returns what it would change. A change set that changes nothing is
// deleted and returned as a plan without changes.
func (d *Deployer) Plan(ctx context.Context, in Input) (*Plan, error) {
	d.defaults()
	if err := stack.CheckEnv(in.Env); err != nil {
		return nil, err
	}
	name := stack.Names{Env: in.Env}.Stack()
	st, err := d.stackStatus(ctx, name)
	if err != nil {
		return nil, err
	}
	p := &Plan{Stack: name, Type: "UPDATE"}
	switch {
	case st == nil || st.StackStatus == cftypes.StackStatusReviewInProgress:
		p.Type = "CREATE"
	case st.StackStatus == cftypes.StackStatusRollbackComplete || st.StackStatus == cftypes.StackStatusRollbackFailed:
		return nil, fmt.Errorf("stack %s is %s after a failed first deploy and cannot be updated: run snavio dispatch destroy --env %s, then deploy again", name, st.StackStatus, in.Env)
	case strings.HasSuffix(string(st.StackStatus), "_IN_PROGRESS"):
		return nil, fmt.Errorf("stack %s is %s: another operation is running; wait for it, then deploy again", name, st.StackStatus)
	}
	// Keys without a previous value to keep: all of them on a create; the
	// snapshot key on a stack an older snavio deployed without it.
	var missing []string
	if p.Type == "CREATE" && in.DeliveryKey == "" {
		missing = append(missing, "the delivery key (--delivery-key-file)")
	}
	if in.SnapshotSeed == "" && (p.Type == "CREATE" || !hasParameter(st, stack.ParamSnapshotSigningKey)) {
		missing = append(missing, "the snapshot signing key (--snapshot-key-file)")
	}
	if len(missing) > 0 {
		what := "does not exist yet: its first deploy"
		if p.Type == "UPDATE" {
			what = "was deployed without a snapshot signing key: this deploy"
		}
		return nil, fmt.Errorf("stack %s %s needs %s", name, what, strings.Join(missing, " and "))
	}
	var snap SnapshotKey
	if in.SnapshotSeed != "" {
		if snap, err = ParseSnapshotSeed(in.SnapshotSeed); err != nil {
			return nil, err
		}
	}

	sum := sha256.Sum256(in.Zip)
	p.Artifact = Artifact{Bucket: in.CodeBucket, Key: "snavio/lambda/" + hex.EncodeToString(sum[:]) + ".zip", SHA256: hex.EncodeToString(sum[:])}
	if p.Artifact.Uploaded, err = d.upload(ctx, in.CodeBucket, p.Artifact.Key, in.Zip, "application/zip"); err != nil {
		return nil, err
	}

	params := []cftypes.Parameter{
		{ParameterKey: aws.String(stack.ParamCodeBucket), ParameterValue: aws.String(in.CodeBucket)},
		{ParameterKey: aws.String(stack.ParamCodeKey), ParameterValue: aws.String(p.Artifact.Key)},
		{ParameterKey: aws.String(stack.ParamArchitecture), ParameterValue: aws.String(in.Arch)},
	}
	params = append(params, secret(stack.ParamDeliveryKey, in.DeliveryKey),
		secret(stack.ParamSnapshotSigningKey, snap.Seed), secret(stack.ParamSnapshotPublicKey, snap.Public))
	// The key's fingerprint goes with the key; a stack an older snavio
	// deployed has none to keep, and takes the template's default.
	switch {
	case in.DeliveryKey != "":
		params = append(params, cftypes.Parameter{ParameterKey: aws.String(stack.ParamDeliveryKeyFingerprint), ParameterValue: aws.String(stack.DeliveryKeyFingerprint(in.DeliveryKey))})
	case hasParameter(st, stack.ParamDeliveryKeyFingerprint):
		params = append(params, cftypes.Parameter{ParameterKey: aws.String(stack.ParamDeliveryKeyFingerprint), UsePreviousValue: aws.Bool(true)})
	}
	p.ChangeSet = "snavio-" + d.Clock.Now().UTC().Format("20060102T150405Z")
	ccs := &cloudformation.CreateChangeSetInput{
		StackName:     aws.String(name),
		ChangeSetName: aws.String(p.ChangeSet),
		ChangeSetType: cftypes.ChangeSetType(p.Type),
		Capabilities:  []cftypes.Capability{cftypes.CapabilityCapabilityNamedIam},
		Parameters:    params,
		Description:   aws.String("snavio dispatch deploy"),
		Tags:          []cftypes.Tag{{Key: aws.String("snavio:env"), Value: aws.String(in.Env)}},
	}
	if in.RoleARN != "" {
		ccs.RoleARN = aws.String(in.RoleARN)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, in.Template); err != nil {
		return nil, fmt.Errorf("the template is not JSON: %w", err)
	}
	in.Template = compact.Bytes()
	if len(in.Template) <= d.TemplateBodyLimit {
		ccs.TemplateBody = aws.String(string(in.Template))
	} else {
		ts := sha256.Sum256(in.Template)
		key := "snavio/templates/" + hex.EncodeToString(ts[:]) + ".json"
		if _, err := d.upload(ctx, in.CodeBucket, key, in.Template, "application/json"); err != nil {
			return nil, err
		}
		ccs.TemplateURL = aws.String(templateURL(in.CodeBucket, d.Region, key))
	}
	out, err := d.CFN.CreateChangeSet(ctx, ccs)
	if err != nil {
		return nil, fmt.Errorf("create change set of stack %s: %w", name, err)
	}
	p.ChangeSetID = aws.ToString(out.Id)

	w := cloudformation.NewChangeSetCreateCompleteWaiter(d.CFN, func(o *cloudformation.ChangeSetCreateCompleteWaiterOptions) {
		o.MinDelay, o.MaxDelay = d.WaitMin, d.WaitMax
	})
	waitErr := w.Wait(ctx, &cloudformation.DescribeChangeSetInput{StackName: aws.String(name), ChangeSetName: aws.String(p.ChangeSetID)}, d.MaxWait)
	cs, err := d.CFN.DescribeChangeSet(ctx, &cloudformation.DescribeChangeSetInput{StackName: aws.String(name), ChangeSetName: aws.String(p.ChangeSetID)})
	if err != nil {
		return nil, fmt.Errorf("describe change set %s: %w", p.ChangeSet, errors.Join(err, waitErr))
	}
	if cs.Status == cftypes.ChangeSetStatusFailed {
		reason := aws.ToString(cs.StatusReason)
		discardErr := d.Discard(ctx, p)
		if noChanges(reason) {
			p.Changes = nil
			return p, discardErr
		}
		return nil, errors.Join(&ChangeSetFailedError{Stack: name, Reason: reason}, discardErr)
	}
	if waitErr != nil {
		return nil, fmt.Errorf("change set %s of stack %s is %s: %w", p.ChangeSet, name, cs.Status, waitErr)
	}
	for {
		for _, c := range cs.Changes {
			rc := c.ResourceChange
			if rc == nil {
				continue
			}
			p.Changes = append(p.Changes, Change{
				Action: string(rc.Action), LogicalID: aws.ToString(rc.LogicalResourceId), Type: aws.ToString(rc.ResourceType),
				PhysicalID: aws.ToString(rc.PhysicalResourceId), Replacement: string(rc.Replacement),
			})
		}
		if cs.NextToken == nil {
			break
		}
		if cs, err = d.CFN.DescribeChangeSet(ctx, &cloudformation.DescribeChangeSetInput{StackName: aws.String(name), ChangeSetName: aws.String(p.ChangeSetID), NextToken: cs.NextToken}); err != nil {
			return nil, fmt.Errorf("describe change set %s: %w", p.ChangeSet, err)
		}
	}
	if p.Changes == nil {
		p.Changes = []Change{}
	}
	return p, nil
}

// secret is a parameter given a new value, or keeping its previous one
// when value is empty.
func secret(key, value string) cftypes.Parameter {
	if value == "" {
		return cftypes.Parameter{ParameterKey: aws.String(key), UsePreviousValue: aws.Bool(true)}
	}
	return cftypes.Parameter{ParameterKey: aws.String(key), ParameterValue: aws.String(value)}
}

// hasParameter reports whether the deployed stack has parameter key (a
// stack deployed by an older snavio may lack a newer parameter, whose
// previous value CloudFormation then cannot use).
func hasParameter(st *cftypes.Stack, key string) bool {
	return st != nil && slices.ContainsFunc(st.Parameters, func(p cftypes.Parameter) bool { return aws.ToString(p.ParameterKey) == key })
}

// SnapshotKey is the snapshot signing key as the stack's two parameters:
// base64 of the Ed25519 seed (secret) and of its public key.
type SnapshotKey struct{ Seed, Public string }

// ParseSnapshotSeed reads base64 of a 32-byte Ed25519 seed (surrounding
// space ignored), as the snapshot function reads
// SNAVIO_SNAPSHOT_SIGNING_KEY, and derives the public key the dispatcher
// functions trust.
func ParseSnapshotSeed(s string) (SnapshotKey, error) {
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(seed) != ed25519.SeedSize {
		return SnapshotKey{}, fmt.Errorf("the snapshot signing key is not base64 of a %d-byte Ed25519 seed: make one with head -c 32 /dev/urandom | base64", ed25519.SeedSize)
	}
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	return SnapshotKey{Seed: base64.StdEncoding.EncodeToString(seed), Public: base64.StdEncoding.EncodeToString(pub)}, nil
}

// noChanges tells CloudFormation's refusal of an empty change set.
func noChanges(reason string) bool {
	return strings.Contains(reason, "didn't contain changes") || strings.Contains(reason, "No updates are to be performed")
}

func templateURL(bucket, region, key string) string {
	return "https://" + bucket + ".s3." + region + ".amazonaws.com/" + (&url.URL{Path: key}).EscapedPath()
}

// upload puts body at key unless an object with the same SHA-256 is there.
func (d *Deployer) upload(ctx context.Context, bucket, key string, body []byte, contentType string) (bool, error) {
	sum := sha256.Sum256(body)
	b64 := base64.StdEncoding.EncodeToString(sum[:])
	head, err := d.S3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err == nil && head.Metadata["sha256"] == hex.EncodeToString(sum[:]) {
		return false, nil
	}
	var nf *s3types.NotFound
	if err != nil && !errors.As(err, &nf) {
		var ae smithy.APIError
		if !errors.As(err, &ae) || (ae.ErrorCode() != "NotFound" && ae.ErrorCode() != "NoSuchKey") {
			return false, fmt.Errorf("look for s3://%s/%s: %w (does the bucket exist and may you read it?)", bucket, key, err)
		}
	}
	_, err = d.S3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(string(body)),
		ContentType: aws.String(contentType), ContentLength: aws.Int64(int64(len(body))),
		Metadata: map[string]string{"sha256": hex.EncodeToString(sum[:])}, ChecksumSHA256: aws.String(b64),
	})
	if err != nil {
		return false, fmt.Errorf("upload s3://%s/%s: %w", bucket, key, err)
	}
	return true, nil
}

// Discard deletes the plan's change set and, for a first deploy, the
// empty stack CloudFormation made to hold it.
func (d *Deployer) Discard(ctx context.Context, p *Plan) error {
	_, err := d.CFN.DeleteChangeSet(ctx, &cloudformation.DeleteChangeSetInput{StackName: aws.String(p.Stack), ChangeSetName: aws.String(p.ChangeSetID)})
	if err != nil {
		return fmt.Errorf("delete change set %s: %w", p.ChangeSet, err)
	}
	if p.Type == "CREATE" {
		if _, err := d.CFN.DeleteStack(ctx, &cloudformation.DeleteStackInput{StackName: aws.String(p.Stack)}); err != nil {
			return fmt.Errorf("delete the empty stack %s: %w", p.Stack, err)
		}
	}
	return nil
}

// Result is an applied plan: the stack's final status and outputs.
type Result struct {
	Stack   string            `json:"stack"`
	Status  string            `json:"status"`
	Outputs map[string]string `json:"outputs"`
}

// Apply executes the plan's change set and waits for the stack, sending
// its events to Progress.
func (d *Deployer) Apply(ctx context.Context, p *Plan) (*Result, error) {
	d.defaults()
	w := &watcher{d: d, stack: p.Stack}
	if err := w.mark(ctx); err != nil {
		return nil, err
	}
	if _, err := d.CFN.ExecuteChangeSet(ctx, &cloudformation.ExecuteChangeSetInput{StackName: aws.String(p.Stack), ChangeSetName: aws.String(p.ChangeSetID)}); err != nil {
		return nil, fmt.Errorf("execute change set %s: %w", p.ChangeSet, err)
	}
	in := &cloudformation.DescribeStacksInput{StackName: aws.String(p.Stack)}
	var out *cloudformation.DescribeStacksOutput
	var err error
	if p.Type == "CREATE" {
		out, err = cloudformation.NewStackCreateCompleteWaiter(w, func(o *cloudformation.StackCreateCompleteWaiterOptions) {
			o.MinDelay, o.MaxDelay = d.WaitMin, d.WaitMax
		}).WaitForOutput(ctx, in, d.MaxWait)
	} else {
		out, err = cloudformation.NewStackUpdateCompleteWaiter(w, func(o *cloudformation.StackUpdateCompleteWaiterOptions) {
			o.MinDelay, o.MaxDelay = d.WaitMin, d.WaitMax
		}).WaitForOutput(ctx, in, d.MaxWait)
	}
	if err != nil {
		return nil, w.failure(ctx, err)
	}
	res := &Result{Stack: p.Stack, Outputs: map[string]string{}}
	if len(out.Stacks) > 0 {
		res.Status = string(out.Stacks[0].StackStatus)
		for _, o := range out.Stacks[0].Outputs {
			res.Outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
		}
	}
	return res, nil
}

// Destroy deletes env's stack and waits. The tables and the snapshot
// bucket are retained by their DeletionPolicy. It reports false when
// there was no stack.
func (d *Deployer) Destroy(ctx context.Context, env string) (bool, error) {
	d.defaults()
	if err := stack.CheckEnv(env); err != nil {
		return false, err
	}
	name := stack.Names{Env: env}.Stack()
	st, err := d.stackStatus(ctx, name)
	if err != nil || st == nil {
		return false, err
	}
	w := &watcher{d: d, stack: name}
	if err := w.mark(ctx); err != nil {
		return false, err
	}
	// Wait on the stack id: a deleted stack is described by id only.
	id := aws.ToString(st.StackId)
	if _, err := d.CFN.DeleteStack(ctx, &cloudformation.DeleteStackInput{StackName: aws.String(name)}); err != nil {
		return false, fmt.Errorf("delete stack %s: %w", name, err)
	}
	w.stack = id
	err = cloudformation.NewStackDeleteCompleteWaiter(w, func(o *cloudformation.StackDeleteCompleteWaiterOptions) {
		o.MinDelay, o.MaxDelay = d.WaitMin, d.WaitMax
	}).Wait(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(id)}, d.MaxWait)
	if err != nil {
		w.stack = name
		return false, w.failure(ctx, err)
	}
	return true, nil
}

// watcher is the DescribeStacks client the SDK's waiters poll: each poll
// also reads the stack's new events and sends them to Progress.
type watcher struct {
	d      *Deployer
	stack  string
	last   string // newest event id seen before the operation
	seen   map[string]bool
	failed []Event
	status string
}

// mark remembers the newest event, so only the operation's are shown.
func (w *watcher) mark(ctx context.Context) error {
	w.seen = map[string]bool{}
	out, err := w.d.CFN.DescribeStackEvents(ctx, &cloudformation.DescribeStackEventsInput{StackName: aws.String(w.stack)})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "ValidationError" {
			return nil // a stack in review has no events yet
		}
		return fmt.Errorf("describe events of stack %s: %w", w.stack, err)
	}
	if len(out.StackEvents) > 0 {
		w.last = aws.ToString(out.StackEvents[0].EventId)
	}
	return nil
}

func (w *watcher) DescribeStacks(ctx context.Context, in *cloudformation.DescribeStacksInput, opts ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error) {
	out, err := w.d.CFN.DescribeStacks(ctx, in, opts...)
	if err == nil && len(out.Stacks) > 0 {
		w.status = string(out.Stacks[0].StackStatus)
	}
	if perr := w.poll(ctx); perr != nil && err == nil {
		return nil, perr
	}
	return out, err
}

// poll reads events newer than the mark, newest first from the API (one
// page: a poll every few seconds sees fewer than a page of new events),
// and reports them oldest first.
func (w *watcher) poll(ctx context.Context) error {
	out, err := w.d.CFN.DescribeStackEvents(ctx, &cloudformation.DescribeStackEventsInput{StackName: aws.String(w.stack)})
	if err != nil {
		return nil // progress is best effort; the waiter decides
	}
	var fresh []Event
	for _, e := range out.StackEvents {
		id := aws.ToString(e.EventId)
		if id == w.last {
			break
		}
		if w.seen[id] {
			continue
		}
		w.seen[id] = true
		ev := Event{Time: aws.ToTime(e.Timestamp), LogicalID: aws.ToString(e.LogicalResourceId), Type: aws.ToString(e.ResourceType),
			Status: string(e.ResourceStatus), Reason: aws.ToString(e.ResourceStatusReason)}
		fresh = append(fresh, ev)
	}
	slices.Reverse(fresh)
	for _, ev := range fresh {
		if strings.HasSuffix(ev.Status, "_FAILED") {
			w.failed = append(w.failed, ev)
		}
		if w.d.Progress != nil {
			w.d.Progress(ev)
		}
	}
	return nil
}

// failure turns a waiter's error into a StackFailedError with the failed
// resources' reasons when the stack reached a failed state.
func (w *watcher) failure(ctx context.Context, err error) error {
	_ = w.poll(ctx)
	if w.status == "" || strings.HasSuffix(w.status, "_IN_PROGRESS") {
		return fmt.Errorf("waiting for stack %s: %w", w.stack, err)
	}
	return &StackFailedError{Stack: w.stack, Status: w.status, Failures: w.failed}
}
