package stack

import (
	"fmt"
	"strings"

	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// Names derives every name of an environment's platform resources. Env
// follows the AWS store's rule (awsstore.Config.Env): 1-32 lower-case
// letters, digits or '-', starting with a letter or digit.
type Names struct{ Env string }

// CheckEnv validates an environment name.
func CheckEnv(env string) error {
	if len(env) < 1 || len(env) > 32 || env[0] == '-' || strings.Trim(env, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return fmt.Errorf("env %q: give 1-32 lower-case letters, digits or '-', starting with a letter or digit (it scopes every resource name)", env)
	}
	return nil
}

func (n Names) prefix() string { return "snavio-" + n.Env + "-" }

// Stack is the CloudFormation stack of the environment.
func (n Names) Stack() string { return "snavio-" + n.Env }

// Bus is the command bus.
func (n Names) Bus() string { return n.prefix() + "command-bus" }

// Archive is the command bus's archive.
func (n Names) Archive() string { return n.prefix() + "commands" }

// Table is a DynamoDB table of the AWS store (flow, registry, changelog,
// outbox), named as awsstore.Config names it.
func (n Names) Table(kind string) string { return n.prefix() + kind }

// SnapshotBucket is the bucket of registry snapshots in accountID's
// account: bucket names are global, so the account makes it unique.
func (n Names) SnapshotBucket(accountID string) string { return n.prefix() + "snap-" + accountID }

// Function is a Lambda function.
func (n Names) Function(key string) string { return n.prefix() + key }

// Queue is an SQS queue of the platform.
func (n Names) Queue(name string) string { return n.prefix() + name }

// FunctionRolePath is the IAM path of the functions' roles.
func (n Names) FunctionRolePath() string { return "/snavio/" + n.Env + "/fn/" }

// FunctionRole is the role of a function.
func (n Names) FunctionRole(key string) string { return n.prefix() + "fn-" + key }

// EmitRolePath is the IAM path of every tenant's emit role. The bus
// policy trusts roles by this path: an environment name cannot contain
// '/', so no other environment's role and no role outside the path
// matches it.
func (n Names) EmitRolePath() string { return "/snavio/" + n.Env + "/emit/" }

// OperatorRolePath is the IAM path of roles that may read snapshots.
func (n Names) OperatorRolePath() string { return "/snavio/" + n.Env + "/operator/" }

// EmitRole is the emit role of tenant; IAM limits role names to 64
// characters, so long environment and tenant names together are refused.
func (n Names) EmitRole(tenant string) (string, error) {
	name := n.prefix() + "emit-" + tenant
	if len(name) > 64 {
		return "", fmt.Errorf("tenant %q: its emit role %q would be %d characters; IAM allows 64 (shorten the tenant id or the env)", tenant, name, len(name))
	}
	return name, nil
}

// OperatorRole is the name of the operators' role: the control API maps a
// caller assuming it to the operator. IAM role names are unique in an
// account whatever their path, so the name alone identifies the role.
func (n Names) OperatorRole() string { return n.prefix() + "operator" }

// TenantRolePath is the IAM path of the tenants' control roles.
func (n Names) TenantRolePath() string { return "/snavio/" + n.Env + "/tenant/" }

// TenantRole is the control role of tenant: the control API maps a caller
// assuming it to that tenant. IAM limits role names to 64 characters.
func (n Names) TenantRole(tenant string) (string, error) {
	name := n.prefix() + "tenant-" + tenant
	if len(name) > 64 {
		return "", fmt.Errorf("tenant %q: its control role %q would be %d characters; IAM allows 64 (shorten the tenant id or the env)", tenant, name, len(name))
	}
	return name, nil
}

// TelemetryTopicPrefix prefixes every tenant's telemetry topic, as the
// AWS store's SNS publisher names them (awsstore.Config.TopicPrefix).
func (n Names) TelemetryTopicPrefix() string { return n.prefix() + "telemetry-" }

// AlarmTopic is the SNS topic every alarm notifies.
func (n Names) AlarmTopic() string { return n.prefix() + "alarms" }

// TelemetryTopic is tenant's telemetry topic, as the AWS store's SNS
// publisher names it (awsstore.SNSPublisher.TopicARN): the tenant escaped
// into SNS's characters, '_' as "__" and '.' as "_d".
func (n Names) TelemetryTopic(tenant string) (string, error) {
	if !telemetry.ValidStream(tenant) {
		return "", fmt.Errorf("tenant %.80q: give %s", tenant, telemetry.StreamRule)
	}
	return n.TelemetryTopicPrefix() + escapeTenant(tenant), nil
}

// TailQueuePrefix starts the name of every temporary queue `snavio tail`
// makes for tenant (the escaped tenant, then "_q", which no escaped
// tenant contains: so a tenant's control role, allowed this prefix, can
// never touch another tenant's queues). A random suffix of
// TailQueueSuffixLen characters completes it within SQS's 80.
func (n Names) TailQueuePrefix(tenant string) (string, error) {
	if !telemetry.ValidStream(tenant) {
		return "", fmt.Errorf("tenant %.80q: give %s", tenant, telemetry.StreamRule)
	}
	p := n.prefix() + "tail-" + escapeTenant(tenant) + "_q"
	if len(p)+TailQueueSuffixLen > 80 {
		return "", fmt.Errorf("tenant %q: its tail queues %q... would be over SQS's 80 characters: shorten the tenant id or the env", tenant, p)
	}
	return p, nil
}

// TailQueueSuffixLen is the length of a tail queue's random suffix.
const TailQueueSuffixLen = 12

// escapeTenant writes a tenant id in SNS and SQS names' characters: '_'
// as "__" and '.' as "_d", so every '_' is followed by '_' or 'd'.
func escapeTenant(tenant string) string {
	var b strings.Builder
	for i := 0; i < len(tenant); i++ {
		switch c := tenant[i]; c {
		case '_':
			b.WriteString("__")
		case '.':
			b.WriteString("_d")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
