// Package send implements `snavio send`: build, sign and put one command on
// the bus through the code path producers use, and optionally follow it to
// its outcome (--wait) or ask the dispatcher what it would decide
// (--explain).
package send

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/config"
	"github.com/snavio/snavio/internal/ingresscred"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

// Options are the inputs of `snavio send`.
type Options struct {
	Source, Target, Command string
	// Payload is JSON, @FILE, or @- (or -) for standard input.
	Payload    string
	ID         string
	SecretFile string
	KeyVersion string
	// CredentialsFile holds the ingress credentials PutEvents is signed
	// with (local profiles); see internal/ingresscred for the precedence.
	CredentialsFile string
	// Timestamp, when set, signs with this time instead of now (to test
	// the replay window).
	Timestamp string
	// Wait is how long to follow the command's telemetry (0: do not).
	Wait    time.Duration
	Explain bool

	In     io.Reader
	Now    func() time.Time
	Getenv func(string) string
	// Bus returns the bus to put on, signing with creds on a local
	// profile (nil: the profile's, through the AWS SDK's EventBridge
	// client).
	Bus func(t platform.Target, creds aws.CredentialsProvider) platform.Bus
}

// Result is what `snavio send` prints.
type Result struct {
	CommandID  string   `json:"command_id"`
	EventID    string   `json:"event_id"`
	Source     string   `json:"source"`
	Target     string   `json:"target"`
	Command    string   `json:"command"`
	Timestamp  string   `json:"timestamp"`
	KeyVersion string   `json:"key_version"`
	Outcome    *Outcome `json:"outcome,omitempty"`
}

// TableHeader implements output.Tabular.
func (Result) TableHeader() []string {
	return []string{"command id", "event id", "source", "target", "command", "key", "outcome"}
}

// TableRows implements output.Tabular.
func (r Result) TableRows() [][]string {
	out := "sent"
	if o := r.Outcome; o != nil {
		out = o.Outcome
		if o.Reason != "" {
			out += " (" + o.Reason + ")"
		} else if o.Path != "" {
			out += " (" + o.Path + " path)"
		}
	}
	return [][]string{{r.CommandID, r.EventID, r.Source, r.Target, r.Command, r.KeyVersion, out}}
}

// NewCmd builds `snavio send`. runF replaces the run function in tests.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{In: f.IOStreams.In, Now: time.Now, Getenv: os.Getenv}
	cmd := &cobra.Command{
		Use:   "send --source S --target T --command C --payload JSON|@FILE|@-",
		Short: "Sign a command and put it on the bus",
		Long: `Build a command envelope, sign it with the source's HMAC key (scheme
snavio-hmac-sha256-v1, the code the dispatcher verifies with), check it
against the dispatcher's own limits, and put it on the bus with the AWS
SDK's EventBridge client: the PutEvents ingress of a local "snavio dispatch
serve", or the profile's EventBridge bus. Prints the command id and the
bus's event id.

The secret never goes on the command line. It comes from, in order:
  --secret-file FILE  a tenant-config document ("snavio tenant-config -o json")
                      or a key file ({"source","version_id","secret"}, as
                      "snavio key create -o json" prints it); mode 0600
  SNAVIO_SECRET       the secret in base64, with SNAVIO_KEY_VERSION
  the local server    a local profile fetches the tenant config from
                      "snavio dispatch serve" with its token

On a local profile the PutEvents request itself is signed (SigV4) with the
tenant's ingress credentials, found in this order:
  --credentials-file FILE            AWS shared-credentials format; the
                                     [<tenant>] section, else [default]
  AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
  the profile's credentials_file     (or SNAVIO_CREDENTIALS_FILE)
  <data_dir>/<tenant>.credentials    "dispatch serve --demo" writes demo's
Create them with "snavio tenant credentials create". On an aws profile the
AWS SDK's credential chain (and the profile's role_arn) is the caller, who
assumes the tenant's emit role (the profile's emit_role_arn, with its
external_id) with STS; the role's session signs PutEvents, on the
profile's bus_name or snavio-<env>-command-bus. Errors name the failing
step: credentials, AssumeRole or PutEvents. See docs/aws-cli.md.

The payload is any JSON value; it is signed and delivered in RFC 8785
canonical form, so re-serialising transports do not break the signature.
Reuse --id only to retry the same command: strict routes deliver an id once.

--wait follows the tenant's telemetry until the dispatcher decides (on aws
through a temporary SQS queue subscribed to the tenant's topic before the
put, deleted after, as "snavio tail" does) and exits with the outcome: 0 delivered, 4 invalid, 5 failed (with the reason
and retry hints), 6 duplicate, 7 no outcome within the wait. Exit 8 means
the bus refused the entry and nothing was put. See "snavio help exit-codes".

--explain puts nothing on the bus: it asks the dispatcher (a local server,
or the control API on aws) for its decision trace (each check, its result, the cache state it used) for the
command as signed.`,
		Example: `  snavio send --source acme/billing --target mailer --command send-receipt \
      --payload '{"order":"o-42"}' --wait
  snavio send --source acme/billing --target mailer --command send-receipt \
      --payload @order.json --secret-file ~/.config/snavio/acme-billing.key
  echo '{"user":"u-1"}' | SNAVIO_SECRET=$(cat key.b64) SNAVIO_KEY_VERSION=hmac-v1 \
      snavio send --source acme/billing --target accounts --command delete-user --payload @-
  snavio send --source acme/billing --target mailer --command send-receipt \
      --payload '{}' --explain
  snavio send ... --id 0f8fad5b-d9cb-469f-a165-70867728950e --wait=2m -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validate(cmd, opts); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), f, opts)
		},
	}
	AddCommandFlags(cmd, opts)
	fl := cmd.Flags()
	fl.StringVar(&opts.Payload, "payload", "", "payload: JSON, @FILE, or @- for standard input (required)")
	fl.StringVar(&opts.ID, "id", "", "command id, a UUID (default a new random one); reuse it only to retry the same command")
	fl.StringVar(&opts.Timestamp, "timestamp", "", "sign with this RFC 3339 time instead of now (tests the replay window)")
	fl.DurationVar(&opts.Wait, "wait", 0, "follow the command's telemetry until an outcome, up to this long (--wait alone: 30s)")
	fl.Lookup("wait").NoOptDefVal = DefaultWait.String()
	fl.BoolVar(&opts.Explain, "explain", false, "put nothing: print the dispatcher's decision trace for the command")
	_ = cmd.MarkFlagRequired("payload")
	cmd.MarkFlagsMutuallyExclusive("wait", "explain")
	return cmd
}

// AddCommandFlags adds the flags that name a command (--source, --target,
// --command, required) and how it is signed and put (--secret-file,
// --credentials-file, --key-version) to cmd, bound to o.
func AddCommandFlags(cmd *cobra.Command, o *Options) {
	fl := cmd.Flags()
	fl.StringVar(&o.Source, "source", "", "sending service, <tenant-id>/<service> (required)")
	fl.StringVar(&o.Target, "target", "", "target service (required)")
	fl.StringVar(&o.Command, "command", "", "command name (required)")
	fl.StringVar(&o.SecretFile, "secret-file", "", "file with the tenant config or key to sign with (mode 0600)")
	fl.StringVar(&o.CredentialsFile, "credentials-file", "", "ingress credentials file (AWS shared-credentials format) to sign PutEvents with (local profiles)")
	fl.StringVar(&o.KeyVersion, "key-version", "", "key version to sign with (default the current one; with SNAVIO_SECRET, SNAVIO_KEY_VERSION)")
	for _, n := range []string{"source", "target", "command"} {
		_ = cmd.MarkFlagRequired(n)
	}
	_ = cmd.MarkFlagFilename("secret-file", "json")
}

// ValidateCommand checks --source, --target and --command.
func ValidateCommand(source, target, command string) error {
	switch {
	case !envelope.ValidSource(source):
		return cmdutil.Usagef("invalid --source %q: use <tenant-id>/<service>, e.g. acme/billing", source)
	case !envelope.ValidTarget(target):
		return cmdutil.Usagef("invalid --target %q: use a service name such as mailer", target)
	case !envelope.ValidName(command):
		return cmdutil.Usagef("invalid --command %q: use a command name such as send-receipt", command)
	}
	return nil
}

// ValidateWait checks a --wait the user gave.
func ValidateWait(wait time.Duration) error {
	if wait <= 0 || wait > MaxWait {
		return cmdutil.Usagef("invalid --wait %s: give a duration from 1s to %s, such as --wait=45s", wait, MaxWait)
	}
	return nil
}

func validate(cmd *cobra.Command, o *Options) error {
	if err := ValidateCommand(o.Source, o.Target, o.Command); err != nil {
		return err
	}
	if cmd.Flags().Changed("wait") {
		if err := ValidateWait(o.Wait); err != nil {
			return err
		}
	}
	switch {
	case o.ID != "" && !envelope.ValidID(strings.ToLower(o.ID)):
		return cmdutil.Usagef("invalid --id %q: use a UUID such as 0f8fad5b-d9cb-469f-a165-70867728950e", o.ID)
	case o.KeyVersion != "" && !envelope.ValidVersionID(o.KeyVersion):
		return cmdutil.Usagef("invalid --key-version %q: use a version such as hmac-v2", o.KeyVersion)
	}
	if o.Timestamp != "" {
		if _, err := time.Parse(time.RFC3339Nano, o.Timestamp); err != nil {
			return cmdutil.Usagef("invalid --timestamp %q: use RFC 3339, such as 2026-11-21T12:00:00Z", o.Timestamp)
		}
	}
	return nil
}

func run(ctx context.Context, f *cmdutil.Factory, o *Options) error {
	payload, err := ReadPayload(o.Payload, o.In)
	if err != nil {
		return err
	}
	client, err := f.Platform()
	if err != nil {
		return err
	}
	now := o.Now()
	signAt := now
	if o.Timestamp != "" {
		signAt, _ = time.Parse(time.RFC3339Nano, o.Timestamp)
	}
	key, from, err := ResolveKey(ctx, o, client, now)
	if err != nil {
		return err
	}
	f.Logger().Debug("signing key", "from", from, "version", key.VersionID())
	b, err := Build(o.Source, o.Target, o.Command, o.ID, payload, key, signAt)
	if err != nil {
		return err
	}
	id := b.Envelope.Metadata.ID
	res := Result{CommandID: id, Source: o.Source, Target: o.Target, Command: o.Command, Timestamp: b.Envelope.Metadata.Timestamp, KeyVersion: key.VersionID()}
	if o.Explain {
		return explain(ctx, f, client, o.Source, b.Detail)
	}
	tenant, _, _ := strings.Cut(o.Source, "/")
	bus, err := OpenBus(f, client, o, tenant)
	if err != nil {
		return err
	}
	var cursor Cursor
	var telem TelemetryAPI = client
	if o.Wait > 0 {
		if client.Target().Kind == config.KindAWS {
			// Subscribe a temporary queue to the tenant's topic before the
			// put, so that no event about the command is missed.
			tel, err := platform.OpenAWSTelemetry(ctx, client.Target(), tenant, platform.AWSTelemetryOptions{
				Clock: clock.Func(o.Now), Unordered: true,
				Notice: func(m string) { f.Logger().Debug("telemetry", "notice", m) },
			})
			if err != nil {
				return fmt.Errorf("--wait: following tenant %s's telemetry: %w", tenant, err)
			}
			defer func() {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
				defer cancel()
				if cerr := tel.Close(cctx); cerr != nil {
					fmt.Fprintln(f.IOStreams.ErrOut, "warning:", cerr)
				}
			}()
			telem = tel
		} else if cursor, err = StartCursor(ctx, client, tenant); err != nil {
			return fmt.Errorf("--wait: reading %s's telemetry stream: %w", tenant, cmdutil.MapAPIError(err, "snavio tail"))
		}
	}
	f.Logger().Debug("put command", "id", id, "bytes", len(b.Detail), "endpoint", client.Target().Endpoint)
	out, err := bus.PutEvents(ctx, []platform.Event{{Source: o.Source, DetailType: envelope.EventType, Detail: b.Detail}})
	if err != nil {
		return err
	}
	if e := out[0]; e.ErrorCode != "" {
		return &cmdutil.ExitCodeError{Code: cmdutil.ExitNotAccepted, Err: fmt.Errorf("PutEvents: the bus refused command %s: %s: %s; %s", id, e.ErrorCode, e.ErrorMessage, entryHint(e.ErrorCode))}
	}
	res.EventID = out[0].EventID
	p, err := f.Printer()
	if err != nil {
		return err
	}
	if o.Wait == 0 {
		return p.Print(res)
	}
	note := func(name string, ev json.RawMessage) {
		f.Logger().Debug("telemetry", "event", name, "detail", string(ev))
	}
	oc, err := Wait(ctx, telem, tenant, id, cursor, o.Wait, o.Now, note)
	if err != nil {
		return fmt.Errorf("--wait: command %s was put on the bus (event %s), but following its telemetry failed: %w", id, res.EventID, cmdutil.MapAPIError(err, "snavio tail"))
	}
	if oc.Outcome == OutcomeTimeout {
		oc.Waited = o.Wait.String()
	}
	res.Outcome = &oc
	if err := p.Print(res); err != nil {
		return err
	}
	return OutcomeError(id, oc)
}

// OpenBus returns the bus to put tenant's commands on: on a local profile
// signed (SigV4) with the tenant's ingress credentials (o.CredentialsFile,
// then the environment, the profile, the data directory), on an aws
// profile with the AWS SDK's credential chain. o.Bus, when set, builds it.
func OpenBus(f *cmdutil.Factory, client platform.Platform, o *Options, tenant string) (platform.Bus, error) {
	var creds aws.CredentialsProvider
	if t := client.Target(); t.Kind == config.KindLocal {
		k, from, err := ingresscred.Resolve(ingresscred.Input{Tenant: tenant, FlagFile: o.CredentialsFile, Getenv: o.Getenv, ProfileFile: t.CredentialsFile, DataDir: t.DataDir})
		if err != nil {
			return nil, &cmdutil.UsageError{Err: fmt.Errorf("signing PutEvents: %w", err)}
		}
		f.Logger().Debug("ingress credentials", "from", from, "access_key_id", k.AccessKeyID)
		creds = credentials.NewStaticCredentialsProvider(k.AccessKeyID, k.SecretAccessKey, "")
	}
	if t := client.Target(); t.Kind == config.KindAWS {
		// The emit role is one tenant's: refuse another tenant's source
		// before any call (PutEvents would refuse it).
		if r, err := platform.EmitRoleOf(t); err == nil && r.Tenant != "" && r.Tenant != tenant {
			return nil, cmdutil.Usagef("--source %s is tenant %s's, but the profile's emit_role_arn is tenant %s's emit role (%s): use a profile of tenant %s", o.Source, tenant, r.Tenant, r.ARN, tenant)
		}
	}
	if o.Bus != nil {
		return o.Bus(client.Target(), creds), nil
	}
	return platform.NewBus(client.Target(), platform.BusOptions{Credentials: creds}), nil
}

// entryHint says what to do about a PutEvents entry error code.
func entryHint(code string) string {
	switch code {
	case "ThrottlingException", "InternalFailure", "InternalException", "ServiceUnavailable":
		return "the bus could not take it now; retry with the same --id"
	case "AccessDeniedException", "NotAuthorizedForSourceException":
		return "the credentials may not put events with this source: use the source's tenant's ingress credentials (local) or check the profile's AWS credentials and role (aws)"
	case "ValidationException", "MalformedDetail", "InvalidArgument":
		return "the entry was malformed; check --source and the payload"
	}
	return "nothing was put; retry with the same --id"
}

// ResolveKey finds the signing key of o.Source (o.SecretFile, o.KeyVersion
// and o.Getenv are read): --secret-file, SNAVIO_SECRET, or the tenant
// config of a local dispatcher. Never argv.
func ResolveKey(ctx context.Context, o *Options, client platform.Platform, now time.Time) (*signing.Key, KeySource, error) {
	if o.SecretFile != "" {
		k, err := KeyFromFile(o.SecretFile, o.Source, o.KeyVersion, now)
		return k, FromSecretFile, err
	}
	if k, ok, err := KeyFromEnv(o.Getenv, o.KeyVersion); ok {
		return k, FromEnv, err
	}
	tenant, _, _ := strings.Cut(o.Source, "/")
	raw, err := client.TenantConfig(ctx, tenant)
	var na *platform.NotAvailableError
	if errors.As(err, &na) {
		return nil, "", cmdutil.Usagef("no signing key: give --secret-file FILE, or set %s and %s (secrets are never taken on the command line)", SecretEnv, KeyVersionEnv)
	}
	if err != nil {
		return nil, "", fmt.Errorf("no signing key given (--secret-file or %s), and fetching tenant %s's keys from the local dispatcher failed: %w", SecretEnv, tenant, cmdutil.MapAPIError(err, "snavio key list"))
	}
	tc, err := keys.ParseTenantConfig(raw)
	if err != nil {
		return nil, "", fmt.Errorf("the tenant config the dispatcher served is not valid: %w; check that snavio and the server are the same version", err)
	}
	k, err := KeyFromTenantConfig(&tc, o.Source, o.KeyVersion, now, "the local dispatcher's tenant config")
	return k, FromTenantConfig, err
}
