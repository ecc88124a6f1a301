package dispatchcmd

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/build"
	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/deploy"
	"github.com/snavio/snavio/internal/deploy/lambdazip"
	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
)

// DeployOptions are the inputs of `snavio dispatch deploy`.
type DeployOptions struct {
	Env             string
	Region          string
	CodeBucket      string
	Zip             string
	Arch            string
	DeliveryKeyFile string
	SnapshotKeyFile string
	RoleARN         string
	Yes             bool
	DetailedExit    bool
	TemplateOnly    bool
	// ProvisionedConcurrency keeps this many ingest environments warm
	// (stack.Options).
	ProvisionedConcurrency int
}

func newDeployCmd(f *cmdutil.Factory, runF func(context.Context, *DeployOptions) error) *cobra.Command {
	opts := &DeployOptions{}
	cmd := &cobra.Command{
		Use:   "deploy --env ENV --code-bucket BUCKET [--yes]",
		Short: "Deploy the platform's shared resources to AWS as one CloudFormation stack",
		Long: `Deploy the platform stack of an environment (snavio-<env>): the command
bus and its static policy, the snavio.command-sent rule, the archive, the
dispatcher functions with one least-privilege role each, the hand-off
queues and their dead-letter queues, the DynamoDB tables, the snapshot
bucket, the job schedules, the control API's Function URL and the alarms.
Every name is scoped by --env. docs/deploy.md is the guide.

It works as terraform plan/apply: it takes the bootstrap zip (--zip, else
dist/lambda/bootstrap-<arch>.zip, else it builds one from the snavio
source in the current directory), uploads it to --code-bucket under its
SHA-256 (once), creates a change set and prints what it would add,
modify, replace (flagged) or remove to stderr. On a terminal it asks
before applying; elsewhere it needs --yes and never prompts. It then
executes the change set, prints the stack's events as they come, and
prints the result with the stack's outputs. A change set without changes
is deleted and is not an error.

The first deploy of an environment needs two keys, each in a file:
--delivery-key-file, the base64 of the delivery signing master key (32
bytes or more), and --snapshot-key-file, the base64 of the 32-byte
Ed25519 seed that signs registry snapshots (the dispatcher functions
trust its public key, which deploy derives). Later deploys keep the
stack's keys unless given new ones.

--provisioned-concurrency N (default 0) keeps N environments of the
ingest function initialised: deploy publishes a version of it, points the
alias "live" with the provisioned concurrency at it, and the command rule
invokes the alias, so the first commands after a quiet spell do not wait
for a cold start. Provisioned concurrency is billed by the hour whether
used or not (docs/cost.md); 0 removes it again.

--template-only writes the template (-o json or -o yaml) and calls
nothing. AWS credentials and region come from the SDK's usual chain
(AWS_PROFILE, AWS_REGION, ...) or --region; AWS_ENDPOINT_URL points every
client at another endpoint (S3 is then addressed path-style).

Exit status: 0 deployed or nothing to change, 1 failed (a failed change
set changes nothing; a failed execution is rolled back by CloudFormation),
2 bad usage, and with --detailed-exitcode 3 when changes were applied.`,
		Example: `  # Review the template
  snavio dispatch deploy --env prod --template-only -o yaml

  # First deploy, from a terminal (asks before applying)
  make lambda
  head -c 32 /dev/urandom | base64 > ~/secrets/snavio-prod-snapshot.key
  snavio dispatch deploy --env prod --code-bucket acme-artifacts \
      --delivery-key-file ~/secrets/snavio-prod.key --snapshot-key-file ~/secrets/snavio-prod-snapshot.key

  # Keep 5 ingest environments warm
  snavio dispatch deploy --env prod --code-bucket acme-artifacts --provisioned-concurrency 5 --yes

  # From CI: no prompt, exit 3 when something changed
  snavio dispatch deploy --env prod --code-bucket acme-artifacts --zip dist/lambda/bootstrap-arm64.zip --yes --detailed-exitcode -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := stack.CheckEnv(opts.Env); err != nil {
				return cmdutil.Usagef("--env: %v", err)
			}
			if opts.RoleARN != "" && !strings.HasPrefix(opts.RoleARN, "arn:") {
				return cmdutil.Usagef("--role-arn %q: give the role's ARN (arn:aws:iam::<account>:role/<name>)", opts.RoleARN)
			}
			if err := (stack.Options{ProvisionedConcurrency: opts.ProvisionedConcurrency}).Check(); err != nil {
				return cmdutil.Usagef("--provisioned-concurrency: %v", err)
			}
			if opts.Arch != "arm64" && opts.Arch != "amd64" {
				return cmdutil.Usagef("--arch %q: use arm64 or amd64", opts.Arch)
			}
			if !opts.TemplateOnly {
				if opts.CodeBucket == "" {
					return cmdutil.Usagef("--code-bucket is required: the S3 bucket the bootstrap zip is uploaded to (it must exist)")
				}
				if !opts.Yes && !f.IOStreams.CanPrompt() {
					return cmdutil.Usagef("deploy changes the AWS account: pass --yes to apply without a prompt (there is no prompt without a terminal)")
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runDeploy(cmd.Context(), f, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Env, "env", "", "environment that scopes every resource name (required)")
	fl.StringVar(&opts.Region, "region", "", "AWS region (default: the SDK's, from AWS_REGION or the AWS profile)")
	fl.StringVar(&opts.CodeBucket, "code-bucket", "", "existing S3 bucket for the bootstrap zip")
	fl.StringVar(&opts.Zip, "zip", "", "bootstrap zip to deploy (default dist/lambda/bootstrap-<arch>.zip, else built from source)")
	fl.StringVar(&opts.Arch, "arch", "arm64", "architecture of the zip: arm64 or amd64")
	fl.StringVar(&opts.DeliveryKeyFile, "delivery-key-file", "", "file holding the base64 delivery master key (first deploy; later: replaces the key)")
	fl.StringVar(&opts.SnapshotKeyFile, "snapshot-key-file", "", "file holding the base64 32-byte Ed25519 seed that signs snapshots (first deploy; later: replaces the key)")
	fl.StringVar(&opts.RoleARN, "role-arn", "", "IAM role CloudFormation deploys with (default: your credentials; docs/deploy.md)")
	fl.BoolVarP(&opts.Yes, "yes", "y", false, "apply without asking")
	fl.BoolVar(&opts.DetailedExit, "detailed-exitcode", false, "exit 3 when changes were applied, 0 when there were none")
	fl.BoolVar(&opts.TemplateOnly, "template-only", false, "write the template (-o json or yaml) and call nothing")
	fl.IntVar(&opts.ProvisionedConcurrency, "provisioned-concurrency", 0, "ingest environments kept initialised through the alias \"live\" (0: none; billed hourly, docs/cost.md)")
	_ = cmd.MarkFlagRequired("env")
	return cmd
}

// DeployResult is what deploy prints.
type DeployResult struct {
	Stack         string            `json:"stack"`
	ChangeSetType string            `json:"change_set_type"`
	ChangeSet     string            `json:"change_set,omitempty"`
	Artifact      deploy.Artifact   `json:"artifact"`
	Changes       []deploy.Change   `json:"changes"`
	Status        string            `json:"status"`
	Outputs       map[string]string `json:"outputs,omitempty"`
}

// TableHeader implements output.Tabular: one row per change, then one
// per output.
func (r DeployResult) TableHeader() []string {
	return []string{"KIND", "NAME", "TYPE OR VALUE", "ACTION"}
}

// TableRows implements output.Tabular.
func (r DeployResult) TableRows() [][]string {
	rows := [][]string{{"stack", r.Stack, r.Status, r.ChangeSetType}}
	for _, c := range r.Changes {
		rows = append(rows, []string{"change", c.LogicalID, c.Type, changeAction(c)})
	}
	for _, k := range slices.Sorted(maps.Keys(r.Outputs)) {
		rows = append(rows, []string{"output", k, r.Outputs[k], ""})
	}
	return rows
}

func changeAction(c deploy.Change) string {
	switch {
	case c.Replacement == "True":
		return c.Action + " (REPLACE)"
	case c.Replacement == "Conditional":
		return c.Action + " (MAY REPLACE)"
	}
	return c.Action
}

// awsClients builds the deployer's clients from the SDK's configuration.
func awsClients(ctx context.Context, region string) (*deploy.Deployer, error) {
	cfg, err := platform.AWSConfig(ctx, platform.Target{}, region)
	if errors.Is(err, platform.ErrNoRegion) {
		return nil, cmdutil.Usagef("no AWS region: pass --region or set AWS_REGION")
	}
	if err != nil {
		return nil, err
	}
	pathStyle := cfg.BaseEndpoint != nil
	return &deploy.Deployer{
		CFN:    cloudformation.NewFromConfig(cfg),
		S3:     s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = pathStyle }),
		Region: cfg.Region,
	}, nil
}

func lambdaArch(goarch string) string {
	if goarch == "amd64" {
		return "x86_64"
	}
	return goarch
}

// readZip finds the bootstrap zip: --zip, the make lambda output, or a
// build from the source in the current directory.
func readZip(ctx context.Context, o *DeployOptions, errOut io.Writer) ([]byte, error) {
	path := o.Zip
	if path == "" {
		if def := filepath.Join("dist", "lambda", "bootstrap-"+o.Arch+".zip"); fileExists(def) {
			path = def
		}
	}
	if path == "" {
		fmt.Fprintf(errOut, "Building the bootstrap for linux/%s (no --zip, no dist/lambda/bootstrap-%s.zip)...\n", o.Arch, o.Arch)
		return lambdazip.Build(ctx, ".", o.Arch)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, cmdutil.Usagef("--zip: %v", err)
	}
	if err := lambdazip.Check(b); err != nil {
		return nil, cmdutil.Usagef("--zip %s: %v", path, err)
	}
	return b, nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// readDeliveryKey reads and checks the base64 key in path.
func readDeliveryKey(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", cmdutil.Usagef("--delivery-key-file: %v", err)
	}
	k := strings.TrimSpace(string(b))
	raw, err := base64.StdEncoding.DecodeString(k)
	if err != nil || len(raw) < 32 {
		return "", cmdutil.Usagef("--delivery-key-file %s: want the base64 of 32 or more random bytes (e.g. head -c 32 /dev/urandom | base64)", path)
	}
	return k, nil
}

// readSnapshotKey reads and checks the base64 Ed25519 seed in path.
func readSnapshotKey(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", cmdutil.Usagef("--snapshot-key-file: %v", err)
	}
	k, err := deploy.ParseSnapshotSeed(string(b))
	if err != nil {
		return "", cmdutil.Usagef("--snapshot-key-file %s: %v", path, err)
	}
	return k.Seed, nil
}

func runDeploy(ctx context.Context, f *cmdutil.Factory, o *DeployOptions) error {
	ios := f.IOStreams
	if err := stack.CheckEnv(o.Env); err != nil {
		return cmdutil.Usagef("--env: %v", err)
	}
	tpl, err := stack.BuildWith(o.Env, stack.Options{ProvisionedConcurrency: o.ProvisionedConcurrency, Version: build.Current().Version})
	if err != nil {
		return cmdutil.Usagef("--provisioned-concurrency: %v", err)
	}
	p, err := f.Printer()
	if err != nil {
		return err
	}
	if o.TemplateOnly {
		format := p.Format()
		if format != output.JSON && format != output.YAML {
			return cmdutil.Usagef("--template-only writes the template as -o json or -o yaml (not %s)", format)
		}
		b, err := stack.Render(tpl, string(format))
		if err != nil {
			return err
		}
		_, err = ios.Out.Write(b)
		return err
	}
	key, err := readDeliveryKey(o.DeliveryKeyFile)
	if err != nil {
		return err
	}
	seed, err := readSnapshotKey(o.SnapshotKeyFile)
	if err != nil {
		return err
	}
	for _, f := range [][2]string{{"--delivery-key-file", o.DeliveryKeyFile}, {"--snapshot-key-file", o.SnapshotKeyFile}} {
		if w := cmdutil.SecretFileWarning(f[0], f[1]); f[1] != "" && w != "" {
			fmt.Fprintln(ios.ErrOut, w)
		}
	}
	zip, err := readZip(ctx, o, ios.ErrOut)
	if err != nil {
		return err
	}
	body, err := stack.Render(tpl, "json")
	if err != nil {
		return err
	}
	d, err := awsClients(ctx, o.Region)
	if err != nil {
		return err
	}
	d.Progress = progressPrinter(ios.ErrOut)
	plan, err := d.Plan(ctx, deploy.Input{Env: o.Env, CodeBucket: o.CodeBucket, Zip: zip, Arch: lambdaArch(o.Arch), DeliveryKey: key, SnapshotSeed: seed, Template: body, RoleARN: o.RoleARN})
	if err != nil {
		return err
	}
	res := DeployResult{Stack: plan.Stack, ChangeSetType: plan.Type, ChangeSet: plan.ChangeSet, Artifact: plan.Artifact, Changes: plan.Changes}
	if plan.NoChanges() {
		fmt.Fprintf(ios.ErrOut, "No changes: stack %s is up to date (the empty change set was deleted).\n", plan.Stack)
		res.Status, res.ChangeSet = "NO_CHANGES", ""
		return p.Print(res)
	}
	printPreview(ios.ErrOut, plan)
	if !o.Yes {
		ok, err := confirm(ios.In, ios.ErrOut, fmt.Sprintf("Apply these changes to %s? Type yes to apply: ", plan.Stack), "yes")
		if err != nil || !ok {
			derr := d.Discard(ctx, plan)
			return errors.Join(fmt.Errorf("not applied: the change set of %s was deleted, nothing changed", plan.Stack), err, derr)
		}
	}
	fmt.Fprintf(ios.ErrOut, "Applying change set %s...\n", plan.ChangeSet)
	applied, err := d.Apply(ctx, plan)
	if err != nil {
		return err
	}
	res.Status, res.Outputs = applied.Status, applied.Outputs
	if err := p.Print(res); err != nil {
		return err
	}
	if o.DetailedExit {
		return &cmdutil.ExitCodeError{Code: cmdutil.ExitChanges}
	}
	return nil
}

// printPreview writes the plan for people: counts, then one line per
// change, replacements flagged.
func printPreview(w io.Writer, p *deploy.Plan) {
	counts := map[string]int{}
	replaced := 0
	for _, c := range p.Changes {
		counts[c.Action]++
		if c.Replaced() {
			replaced++
		}
	}
	fmt.Fprintf(w, "Change set %s of stack %s (%s): %d to add, %d to modify (%d replaced), %d to remove.\n",
		p.ChangeSet, p.Stack, p.Type, counts["Add"], counts["Modify"], replaced, counts["Remove"])
	if p.Artifact.Uploaded {
		fmt.Fprintf(w, "Uploaded the bootstrap zip to s3://%s/%s.\n", p.Artifact.Bucket, p.Artifact.Key)
	}
	for _, c := range p.Changes {
		mark := map[string]string{"Add": "+", "Modify": "~", "Remove": "-"}[c.Action]
		if mark == "" {
			mark = "?"
		}
		line := fmt.Sprintf("  %s %-28s %s", mark, c.LogicalID, c.Type)
		if c.Replaced() {
			line += "  REPLACEMENT: " + strings.ToLower(c.Replacement) + " (the resource is deleted and made anew)"
		}
		fmt.Fprintln(w, line)
	}
}

func progressPrinter(w io.Writer) func(deploy.Event) {
	return func(e deploy.Event) {
		line := fmt.Sprintf("%s  %-28s %-28s %s", e.Time.UTC().Format(time.TimeOnly), e.Status, e.LogicalID, e.Type)
		if e.Reason != "" {
			line += "  " + e.Reason
		}
		fmt.Fprintln(w, line)
	}
}

// confirm asks question on w and reads one line from in: true when it
// is want.
func confirm(in io.Reader, w io.Writer, question, want string) (bool, error) {
	fmt.Fprint(w, question)
	line, err := bufio.NewReader(io.LimitReader(in, 1024)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("reading the confirmation: %w", err)
	}
	return strings.TrimSpace(line) == want, nil
}
