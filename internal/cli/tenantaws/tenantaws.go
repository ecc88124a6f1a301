// Package tenantaws implements `snavio tenant create|show|list|delete|
// add-service|remove-service` on AWS: a tenant's emit role, telemetry
// topic and queue, made as data by SDK calls (internal/deploy/tenant),
// never by a deploy.
package tenantaws

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/config"
	"github.com/snavio/snavio/internal/deploy/policy"
	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/internal/deploy/tenant"
	"github.com/snavio/snavio/internal/platform"
)

// LocalCreate is `tenant create` on a local profile, which another
// package supplies (it issues the tenant's token and ingress credentials
// through the platform): Bind adds its flags, named in Flags so that an
// AWS run refuses them, and Run creates the tenant.
type LocalCreate struct {
	Bind  func(*pflag.FlagSet)
	Flags []string
	Run   func(ctx context.Context, tenant string) error
}

// Commands builds the tenant subcommands that act on AWS; create acts
// locally through local on a local profile without --env.
func Commands(f *cmdutil.Factory, local LocalCreate) []*cobra.Command {
	return []*cobra.Command{newCreate(f, local), newShow(f), newList(f), newDelete(f), newAddService(f), newRemoveService(f)}
}

// common are the flags every command takes.
type common struct {
	Env, Region string
}

func (c *common) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.Env, "env", "", "environment of the platform stack (required)")
	cmd.Flags().StringVar(&c.Region, "region", "", "AWS region (default: the SDK's, from AWS_REGION or the AWS profile)")
	_ = cmd.MarkFlagRequired("env")
}

func (c *common) check() error {
	if err := stack.CheckEnv(c.Env); err != nil {
		return cmdutil.Usagef("--env: %v", err)
	}
	return nil
}

const awsNote = `It acts on AWS with the SDK's credentials (AWS_PROFILE, AWS_REGION, ...;
AWS_ENDPOINT_URL points it elsewhere) in the environment of --env, whose
platform stack "snavio dispatch deploy" made (docs/deploy.md).`

// onboarder builds the clients and finds the account (STS).
func onboarder(ctx context.Context, c *common) (*tenant.Onboarder, error) {
	cfg, err := platform.AWSConfig(ctx, platform.Target{}, c.Region)
	if errors.Is(err, platform.ErrNoRegion) {
		return nil, cmdutil.Usagef("no AWS region: pass --region or set AWS_REGION")
	}
	if err != nil {
		return nil, err
	}
	id, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return nil, fmt.Errorf("who am I (sts GetCallerIdentity): %w", err)
	}
	account := aws.ToString(id.Account)
	partition := "aws"
	if arn := aws.ToString(id.Arn); strings.HasPrefix(arn, "arn:") {
		partition = strings.SplitN(arn, ":", 3)[1]
	}
	n := stack.Names{Env: c.Env}
	return &tenant.Onboarder{
		IAM: iam.NewFromConfig(cfg), SNS: sns.NewFromConfig(cfg), SQS: sqs.NewFromConfig(cfg),
		Env: c.Env, Account: account, Region: cfg.Region, Partition: partition,
		BusARN: "arn:" + partition + ":events:" + cfg.Region + ":" + account + ":event-bus/" + n.Bus(),
	}, nil
}

// parseServices reads --service NAME=ROLE_ARN values.
func parseServices(tenantID string, vals []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range vals {
		name, arn, ok := strings.Cut(v, "=")
		if !ok {
			return nil, cmdutil.Usagef("--service %q: want NAME=ROLE_ARN (the tenant's role that sends as <tenant>/NAME)", v)
		}
		if err := checkBinding(tenantID, name, arn); err != nil {
			return nil, err
		}
		out[name] = arn
	}
	return out, nil
}

func checkBinding(tenantID, service, arn string) error {
	if err := policy.CheckSource(tenantID + "/" + service); err != nil {
		return cmdutil.Usagef("%v", err)
	}
	if _, err := policy.RoleName(arn); err != nil {
		return cmdutil.Usagef("%v", err)
	}
	return nil
}

func checkTenant(c *common, t string) error {
	if err := c.check(); err != nil {
		return err
	}
	n := stack.Names{Env: c.Env}
	if _, err := n.TelemetryTopic(t); err != nil {
		return cmdutil.Usagef("%v", err)
	}
	if _, err := n.EmitRole(t); err != nil {
		return cmdutil.Usagef("%v", err)
	}
	return nil
}

// View is a tenant as show prints it: its services, its roles ("" for a
// missing one) and the encryption of its telemetry queues.
type View struct {
	Tenant      string        `json:"tenant"`
	Services    []ServiceView `json:"services"`
	EmitRole    string        `json:"emit_role"`
	ControlRole string        `json:"control_role"`
	// Encryption is "SSE-KMS <key>" or "SSE-SQS".
	Encryption string `json:"encryption"`
}

// ServiceView is one service of a tenant.
type ServiceView struct {
	Service string `json:"service"`
	Source  string `json:"source"`
	Role    string `json:"role"`
}

func view(s *tenant.State) View {
	v := View{Tenant: s.Tenant, Services: []ServiceView{}, EmitRole: s.EmitRoleARN, ControlRole: s.ControlRoleARN, Encryption: "SSE-SQS"}
	if s.KMSKey != "" {
		v.Encryption = "SSE-KMS " + s.KMSKey
	}
	for _, svc := range slices.Sorted(maps.Keys(s.Services)) {
		v.Services = append(v.Services, ServiceView{Service: svc, Source: s.Tenant + "/" + svc, Role: s.Services[svc]})
	}
	return v
}

func printResult(f *cmdutil.Factory, v any) error {
	p, err := f.Printer()
	if err != nil {
		return err
	}
	return p.Print(v)
}

func newCreate(f *cmdutil.Factory, local LocalCreate) *cobra.Command {
	c := &common{}
	var services []string
	var kmsKey string
	cmd := &cobra.Command{
		Use:   "create TENANT [--env ENV --service NAME=ROLE_ARN... [--kms-key KEY]]",
		Short: "Create a tenant: its token and credentials locally, its roles and telemetry on AWS",
		Long: `Create a tenant.

On a local profile without --env ("snavio dispatch serve"): issue the
tenant's token and its ingress credential, as "snavio token create" and
"snavio tenant credentials create" do, and print each once (or write them
to --token-file and --credentials-file, new files of mode 0600).

On AWS (--env, or an aws profile with env set): make, or bring back in
line, everything the platform provisions for a tenant (docs/deploy.md):
the emit role snavio-<env>-emit-<tenant> under the IAM path
/snavio/<env>/emit/, which the given tenant roles may assume (each only
with a session named after itself) and which may put events on the bus
only as the sources bound to the caller's role; the control role
snavio-<env>-tenant-<tenant> under /snavio/<env>/tenant/, trusted alike,
which may only call the control API's Function URL (the control API maps
its callers to the tenant); the telemetry topic; the telemetry queue with
its dead-letter queue and a policy letting only the topic send and only
the tenant's roles read; and the subscription. The queues are encrypted
with --kms-key (SSE-KMS; its key policy must let SNS and the tenant's roles
use it) or, without it, with SQS-managed keys (SSE-SQS).

It is idempotent: a second run with the same services changes nothing and
says so; a run with other services or another key makes the resources
match them.
` + awsNote,
		Example: `  # local
  snavio tenant create acme --token-file acme.token --credentials-file acme.credentials

  # AWS
  snavio tenant create acme --env prod \
      --service billing=arn:aws:iam::123456789012:role/BillingSender \
      --service account=arn:aws:iam::123456789012:role/AccountSender \
      --kms-key alias/snavio-telemetry`,
		Args: cmdutil.ExactArgs(1, "a TENANT id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			onAWS, err := awsTarget(f, c)
			if err != nil {
				return err
			}
			changed := func(names ...string) []string {
				var out []string
				for _, n := range names {
					if cmd.Flags().Changed(n) {
						out = append(out, "--"+n)
					}
				}
				return out
			}
			if !onAWS {
				if set := changed("service", "kms-key", "region"); len(set) > 0 {
					return cmdutil.Usagef("%s: on a local profile tenant create issues a token and credentials; pass --env ENV to create the tenant on AWS", strings.Join(set, ", "))
				}
				return local.Run(cmd.Context(), args[0])
			}
			if set := changed(local.Flags...); len(set) > 0 {
				return cmdutil.Usagef("%s: only on a local profile; on AWS the tenant's producers assume its emit role (docs/deploy.md)", strings.Join(set, ", "))
			}
			if err := checkTenant(c, args[0]); err != nil {
				return err
			}
			svc, err := parseServices(args[0], services)
			if err != nil {
				return err
			}
			if len(svc) == 0 {
				return cmdutil.Usagef("give at least one --service NAME=ROLE_ARN")
			}
			if kmsKey != "" {
				if err := tenant.CheckKMSKey(kmsKey); err != nil {
					return cmdutil.Usagef("%v", err)
				}
			}
			o, err := onboarder(cmd.Context(), c)
			if err != nil {
				return err
			}
			res, err := o.Apply(cmd.Context(), tenant.Spec{Tenant: args[0], Services: svc, KMSKey: kmsKey})
			if err != nil {
				return err
			}
			return printResult(f, res)
		},
	}
	cmd.Flags().StringVar(&c.Env, "env", "", "AWS: environment of the platform stack (default: the aws profile's env)")
	cmd.Flags().StringVar(&c.Region, "region", "", "AWS: region (default: the SDK's, from AWS_REGION or the AWS profile)")
	cmd.Flags().StringArrayVar(&services, "service", nil, "AWS: NAME=ROLE_ARN: the tenant role that sends as <tenant>/NAME (repeatable)")
	cmd.Flags().StringVar(&kmsKey, "kms-key", "", "AWS: KMS key (id, ARN, alias/NAME or alias ARN) of the telemetry queues (default: SQS-managed encryption)")
	local.Bind(cmd.Flags())
	return cmd
}

// awsTarget tells whether create acts on AWS: with --env, or on an aws
// profile (whose env it takes when --env is not given).
func awsTarget(f *cmdutil.Factory, c *common) (bool, error) {
	if c.Env != "" {
		return true, nil
	}
	s, err := f.Settings()
	if err != nil {
		return false, err
	}
	if s.Kind != config.KindAWS {
		return false, nil
	}
	if s.Env == "" {
		return false, cmdutil.Usagef("profile %s is an aws profile without env: pass --env ENV, or set the profile's env", s.ProfileName)
	}
	c.Env = s.Env
	return true, nil
}

func newShow(f *cmdutil.Factory) *cobra.Command {
	c := &common{}
	cmd := &cobra.Command{
		Use:   "show TENANT --env ENV",
		Short: "Show a tenant's services and the roles that send as them, on AWS",
		Long: `Show a tenant's services, read back from its emit role's policies (they are
the record), its emit and control roles, and the encryption of its
telemetry queues. Exit 1 when the tenant has no emit role.
` + awsNote,
		Example: `  snavio tenant show acme --env prod -o json`,
		Args:    cmdutil.ExactArgs(1, "a TENANT id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTenant(c, args[0]); err != nil {
				return err
			}
			o, err := onboarder(cmd.Context(), c)
			if err != nil {
				return err
			}
			s, err := o.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if s == nil {
				return fmt.Errorf("no tenant %s in env %s: snavio tenant create %s --env %s --service NAME=ROLE_ARN", args[0], c.Env, args[0], c.Env)
			}
			return printResult(f, view(s))
		},
	}
	c.bind(cmd)
	return cmd
}

func newList(f *cmdutil.Factory) *cobra.Command {
	c := &common{}
	cmd := &cobra.Command{
		Use:   "list --env ENV",
		Short: "List the tenants of an environment on AWS",
		Long: `List the tenants that have an emit or a control role in the environment,
with the names of both ("" for a missing one: "tenant create" makes it).
` + awsNote,
		Example: `  snavio tenant list --env prod`,
		Args:    cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.check(); err != nil {
				return err
			}
			o, err := onboarder(cmd.Context(), c)
			if err != nil {
				return err
			}
			ts, err := o.List(cmd.Context())
			if err != nil {
				return err
			}
			return printResult(f, ts)
		},
	}
	c.bind(cmd)
	return cmd
}

func newDelete(f *cmdutil.Factory) *cobra.Command {
	c := &common{}
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete TENANT --env ENV --yes",
		Short: "Remove a tenant's roles, topic, queues and subscription from AWS",
		Long: `Remove everything "tenant create" made for the tenant. Its producers can no
longer assume the emit role nor its people the control role, and
undelivered telemetry in its queues is lost. Running it again changes nothing. It needs --yes.
` + awsNote,
		Example: `  snavio tenant delete acme --env prod --yes`,
		Args:    cmdutil.ExactArgs(1, "a TENANT id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTenant(c, args[0]); err != nil {
				return err
			}
			if !yes {
				return cmdutil.Usagef("delete removes tenant %s's role, topic and queues: pass --yes to confirm", args[0])
			}
			o, err := onboarder(cmd.Context(), c)
			if err != nil {
				return err
			}
			res, err := o.Delete(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printResult(f, res)
		},
	}
	c.bind(cmd)
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "confirm the deletion")
	return cmd
}

func newAddService(f *cmdutil.Factory) *cobra.Command {
	c := &common{}
	var role string
	cmd := &cobra.Command{
		Use:   "add-service TENANT SERVICE --role ROLE_ARN --env ENV",
		Short: "Let a tenant role send as <tenant>/<service>, on AWS",
		Long: `Add a service to a tenant: the emit role's trust gains ROLE_ARN and its
permission the source <tenant>/<service> bound to that role. Idempotent.
` + awsNote,
		Example: `  snavio tenant add-service acme shipping --role arn:aws:iam::123456789012:role/ShippingSender --env prod`,
		Args:    cmdutil.ExactArgs(2, "a TENANT and a SERVICE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTenant(c, args[0]); err != nil {
				return err
			}
			if err := checkBinding(args[0], args[1], role); err != nil {
				return err
			}
			return change(cmd.Context(), f, c, args[0], func(s *tenant.Spec) error { s.Services[args[1]] = role; return nil })
		},
	}
	c.bind(cmd)
	cmd.Flags().StringVar(&role, "role", "", "ARN of the tenant role that sends as the service (required)")
	_ = cmd.MarkFlagRequired("role")
	return cmd
}

func newRemoveService(f *cmdutil.Factory) *cobra.Command {
	c := &common{}
	cmd := &cobra.Command{
		Use:   "remove-service TENANT SERVICE --env ENV",
		Short: "Stop a tenant's service from sending, on AWS",
		Long: `Remove a service from a tenant: its source leaves the emit role's
permission (and its role the trust, unless another service uses it). The
last service cannot be removed: delete the tenant instead.
` + awsNote,
		Example: `  snavio tenant remove-service acme shipping --env prod`,
		Args:    cmdutil.ExactArgs(2, "a TENANT and a SERVICE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTenant(c, args[0]); err != nil {
				return err
			}
			return change(cmd.Context(), f, c, args[0], func(s *tenant.Spec) error {
				if _, ok := s.Services[args[1]]; !ok {
					return fmt.Errorf("tenant %s has no service %s (snavio tenant show %s --env %s)", args[0], args[1], args[0], c.Env)
				}
				if len(s.Services) == 1 {
					return cmdutil.Usagef("%s is tenant %s's last service: delete the tenant instead (snavio tenant delete %s --env %s --yes)", args[1], args[0], args[0], c.Env)
				}
				delete(s.Services, args[1])
				return nil
			})
		},
	}
	c.bind(cmd)
	return cmd
}

// change reads the tenant, edits its spec and applies it.
func change(ctx context.Context, f *cmdutil.Factory, c *common, t string, edit func(*tenant.Spec) error) error {
	o, err := onboarder(ctx, c)
	if err != nil {
		return err
	}
	s, err := o.Get(ctx, t)
	if err != nil {
		return err
	}
	if s == nil {
		return fmt.Errorf("no tenant %s in env %s: create it first (snavio tenant create %s --env %s --service NAME=ROLE_ARN)", t, c.Env, t, c.Env)
	}
	if err := edit(&s.Spec); err != nil {
		return err
	}
	res, err := o.Apply(ctx, s.Spec)
	if err != nil {
		return err
	}
	return printResult(f, res)
}
