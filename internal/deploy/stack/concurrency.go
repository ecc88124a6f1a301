package stack

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/awslabs/goformation/v7/cloudformation/cloudwatch"
	"github.com/awslabs/goformation/v7/cloudformation/lambda"
)

// Options are the choices of a deploy that shape the template.
type Options struct {
	// ProvisionedConcurrency keeps this many ingest environments
	// initialised (0: none, on-demand only). Above 0 the ingest function
	// gets a published version and the alias IngestAlias holding the
	// provisioned concurrency, and the command rule invokes the alias.
	ProvisionedConcurrency int
	// Version is the snavio version deploying (build.Current): each
	// function's description names it and the output VersionOutput
	// carries it, for `snavio doctor` to compare with its own. Empty
	// leaves both out.
	Version string
}

// VersionOutput is the output that names the snavio version which
// deployed the stack.
const VersionOutput = "SnavioVersion"

// MaxProvisionedConcurrency bounds --provisioned-concurrency: Lambda's
// default account concurrency is 1000 and it keeps 100 unreserved.
const MaxProvisionedConcurrency = 900

// ParamDeliveryKeyFingerprint is the first 16 hex digits of the SHA-256
// of the delivery key (deploy computes it; "none" until a deploy is given
// the key). The ingest version's description carries it, so that a new
// delivery key publishes a new version without the key itself appearing.
const ParamDeliveryKeyFingerprint = "DeliveryKeyFingerprint"

// IngestAlias is the name of the ingest function's alias.
const IngestAlias = "live"

// Check validates o.
func (o Options) Check() error {
	if len(o.Version) > 64 || strings.ContainsAny(o.Version, " \t\n") {
		return fmt.Errorf("version %.70q: give a version string such as v1.2.3 (up to 64 characters, no blanks)", o.Version)
	}
	if o.ProvisionedConcurrency < 0 || o.ProvisionedConcurrency > MaxProvisionedConcurrency {
		return fmt.Errorf("provisioned concurrency %d: give 0 (none) to %d; AWS also keeps 100 of the account's concurrency unreserved", o.ProvisionedConcurrency, MaxProvisionedConcurrency)
	}
	return nil
}

// ingestTarget is what the command rule invokes: the alias when it holds
// provisioned concurrency, else the function ($LATEST).
func (x b) ingestTarget() string {
	if x.o.ProvisionedConcurrency > 0 {
		return Ref("IngestAlias")
	}
	return GetAtt("IngestFunction", "Arn")
}

// ingestAlias publishes a version of the ingest function and points the
// alias with the provisioned concurrency at it. A version is immutable
// and CloudFormation publishes one only when the Version resource is
// replaced, so its description names everything the function's
// environments are made from: the code's key (its SHA-256), the
// architecture, the snapshot public key, the delivery key's fingerprint
// and a digest of the function's rendered properties. Any change to them
// publishes a new version and moves the alias.
func (x b) ingestAlias() error {
	if x.o.ProvisionedConcurrency == 0 {
		return nil
	}
	fn, err := json.Marshal(x.t.Resources["IngestFunction"])
	if err != nil {
		return fmt.Errorf("stack: digest of the ingest function: %w", err)
	}
	sum := sha256.Sum256(fn)
	x.add("IngestVersion", &lambda.Version{
		FunctionName: Ref("IngestFunction"),
		Description: ptr(Sub("code ${" + ParamCodeKey + "} arch ${" + ParamArchitecture + "} snapshot key ${" + ParamSnapshotPublicKey +
			"} delivery key ${" + ParamDeliveryKeyFingerprint + "} config " + hex.EncodeToString(sum[:8]))),
	})
	x.add("IngestAlias", &lambda.Alias{
		Name:            IngestAlias,
		Description:     ptr("What the command rule invokes: the published ingest version with provisioned concurrency"),
		FunctionName:    Ref("IngestFunction"),
		FunctionVersion: GetAtt("IngestVersion", "Version"),
		ProvisionedConcurrencyConfig: &lambda.Alias_ProvisionedConcurrencyConfiguration{
			ProvisionedConcurrentExecutions: x.o.ProvisionedConcurrency,
		},
	})
	// The failed-invocation destination is set on the alias, which must
	// exist first.
	x.t.Resources["IngestInvokeConfig"].(*lambda.EventInvokeConfig).AWSCloudFormationDependsOn = []string{"IngestAlias"}
	// Invocations beyond the provisioned environments run on demand, with
	// cold starts: sustained spill-over means N is too low.
	dims := []cloudwatch.Alarm_Dimension{
		{Name: "FunctionName", Value: Ref("IngestFunction")},
		{Name: "Resource", Value: Sub("${IngestFunction}:" + IngestAlias)},
	}
	x.alarm("IngestSpilloverAlarm", FnIngest+"-spillover", x.n.Function(FnIngest)+": invocations beyond the provisioned concurrency in the last 5 minutes (raise --provisioned-concurrency)",
		"AWS/Lambda", "ProvisionedConcurrencySpilloverInvocations", "Sum", dims, 0)
	return nil
}

// qualifier is the qualifier function key is invoked with: the ingest
// alias when it holds provisioned concurrency, else $LATEST.
func (x b) qualifier(key string) string {
	if key == FnIngest && x.o.ProvisionedConcurrency > 0 {
		return IngestAlias
	}
	return "$LATEST"
}

// DeliveryKeyFingerprint is the value of ParamDeliveryKeyFingerprint for
// the base64 delivery key: the first 16 hex digits of its SHA-256, which
// tell keys apart and reveal nothing of a 32-byte random key.
func DeliveryKeyFingerprint(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}
