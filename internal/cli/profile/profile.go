// Package profile implements `snavio profile list|use|show|set|delete`.
package profile

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/config"
)

// NewCmd builds `snavio profile`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profile <command>",
		Short: "Manage named profiles in the config file",
		Long: `Manage the named profiles of the config file without editing YAML by hand.

A profile of kind local points at a running "snavio dispatch serve"; a
profile of kind aws names the region, AWS profile, bus, tables, snapshot
bucket and role of a deployment. See "snavio help config".`,
		Example: `  snavio profile set local --kind local --endpoint-url http://127.0.0.1:8787 --use
  snavio profile set local --credentials-file ~/.config/snavio/acme.credentials
  snavio profile set prod --kind aws --region eu-west-1 --aws-profile platform
  snavio profile list
  snavio profile use prod
  snavio profile show`,
		Args: cobra.ArbitraryArgs,
		RunE: cmdutil.GroupRunE,
	}
	cmd.AddCommand(newListCmd(f), newUseCmd(f), newShowCmd(f), newSetCmd(f), newDeleteCmd(f))
	return cmd
}

// profileNames completes the first argument with the config's profiles.
func profileNames(f *cmdutil.Factory) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		file, err := f.Config()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return file.ProfileNames(), cobra.ShellCompDirectiveNoFileComp
	}
}

// loadForWrite returns the config file and its path.
func loadForWrite(f *cmdutil.Factory) (*config.File, string, error) {
	p, err := f.Paths()
	if err != nil {
		return nil, "", err
	}
	file, err := f.Config()
	if err != nil {
		return nil, "", err
	}
	return file, p.ConfigFile, nil
}

// Entry is a profile as listed and shown.
type Entry struct {
	Name    string `json:"name"`
	Current bool   `json:"current"`
	// Builtin marks the built-in local profile "default", which exists
	// without a config-file entry.
	Builtin bool `json:"builtin,omitempty"`
	config.Profile
}

// Entries is a list of profiles.
type Entries []Entry

// TableHeader implements output.Tabular.
func (Entries) TableHeader() []string {
	return []string{"current", "name", "kind", "endpoint/region"}
}

// TableRows implements output.Tabular.
func (es Entries) TableRows() [][]string {
	rows := make([][]string, len(es))
	for i, e := range es {
		cur := ""
		if e.Current {
			cur = "*"
		}
		where := e.Endpoint
		if e.Kind == config.KindAWS {
			where = e.Region
		}
		rows[i] = []string{cur, e.Name, e.Kind, where}
	}
	return rows
}

// entry returns the profile name of file, which must exist (Lookup).
func entry(file *config.File, name string) Entry {
	p, builtin, _ := file.Lookup(name)
	return Entry{Name: name, Current: name == file.Current(), Builtin: builtin, Profile: *p}
}

func newListCmd(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the profiles: the config file's and the built-in \"default\"",
		Example: `  snavio profile list
  snavio profile list -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			file, err := f.Config()
			if err != nil {
				return err
			}
			p, err := f.Printer()
			if err != nil {
				return err
			}
			out := Entries{}
			for _, n := range file.ProfileNames() {
				out = append(out, entry(file, n))
			}
			return p.Print(out)
		},
	}
}

func newUseCmd(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:               "use NAME",
		Short:             "Make a profile the current one",
		Example:           `  snavio profile use prod`,
		Args:              cmdutil.ExactArgs(1, "a profile NAME"),
		ValidArgsFunction: profileNames(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			file, path, err := loadForWrite(f)
			if err != nil {
				return err
			}
			if _, _, ok := file.Lookup(name); !ok {
				return fmt.Errorf("profile %q is not in %s: run `snavio profile list`, or create it with `snavio profile set %s --kind local`", name, path, name)
			}
			file.CurrentProfile = name
			if err := config.Save(path, file); err != nil {
				return err
			}
			p, err := f.Printer()
			if err != nil {
				return err
			}
			return p.Print(entry(file, name))
		},
	}
}

func newShowCmd(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "show [NAME]",
		Short: "Show the resolved settings, or one stored profile",
		Long: `Without NAME, show the settings this invocation resolves (flags, SNAVIO_*
environment, the selected profile and defaults) and where each came from.
With NAME, show that profile as stored in the config file.`,
		Example: `  snavio profile show
  SNAVIO_REGION=eu-west-1 snavio profile show --profile prod -o yaml
  snavio profile show prod -o json`,
		Args:              cmdutil.MaximumArgs(1, "one profile NAME"),
		ValidArgsFunction: profileNames(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := f.Printer()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				file, path, err := loadForWrite(f)
				if err != nil {
					return err
				}
				if _, _, ok := file.Lookup(args[0]); !ok {
					return fmt.Errorf("profile %q is not in %s: run `snavio profile list`", args[0], path)
				}
				return p.Print(entry(file, args[0]))
			}
			s, err := f.Settings()
			if err != nil {
				return err
			}
			return p.Print(resolved{s})
		},
	}
}

// resolved prints Settings as a table of KEY VALUE ORIGIN rows.
type resolved struct{ *config.Settings }

func (r resolved) TableHeader() []string { return []string{"key", "value", "origin", "env"} }

func (r resolved) TableRows() [][]string {
	rows := [][]string{
		{"config_file", r.ConfigFile, "", "SNAVIO_CONFIG"},
		{"profile", r.ProfileName, string(r.ProfileOrigin), "SNAVIO_PROFILE"},
		{"kind", r.Kind, "profile", ""},
	}
	for _, v := range r.Values {
		rows = append(rows, []string{v.Key, v.Value, string(v.Origin), v.Env})
	}
	return rows
}

type setOptions struct {
	kind, dataDir, credentialsFile, awsProfile, busName, tablePrefix, snapshotBucket, roleARN string
	env, controlURL, emitRoleARN, externalID                                                  string
	use                                                                                       bool
}

func newSetCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &setOptions{}
	cmd := &cobra.Command{
		Use:   "set NAME [flags]",
		Short: "Create or update a profile",
		Long: `Create a profile, or update the fields given on the command line and keep
the others. Creating a profile needs --kind. Changing the kind clears the
fields the new kind does not use. The global --endpoint-url and --region
flags set the profile's endpoint and region. An empty value clears a field.`,
		Example: `  snavio profile set local --kind local --endpoint-url http://127.0.0.1:8787 --use
  snavio profile set local --credentials-file ~/.config/snavio/acme.credentials
  snavio profile set prod --kind aws --region eu-west-1 --aws-profile platform \
      --bus-name snavio-command-bus --table-prefix snavio-prod \
      --snapshot-bucket snavio-prod-snapshots \
      --role-arn arn:aws:iam::123456789012:role/snavio-prod-operator
  snavio profile set prod --env prod \
      --control-url https://abc123.lambda-url.eu-west-1.on.aws/ \
      --emit-role-arn arn:aws:iam::123456789012:role/snavio/prod/emit/snavio-prod-emit-acme
  snavio profile set prod --region us-east-1 -o json`,
		Args:              cmdutil.ExactArgs(1, "a profile NAME"),
		ValidArgsFunction: profileNames(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSet(f, cmd, args[0], opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.kind, "kind", "", "profile kind: local or aws (required to create)")
	fl.StringVar(&opts.dataDir, "data-dir", "", "data directory (local)")
	fl.StringVar(&opts.credentialsFile, "credentials-file", "", "ingress credentials file that snavio send signs PutEvents with (local)")
	fl.StringVar(&opts.awsProfile, "aws-profile", "", "profile in the AWS shared config (aws)")
	fl.StringVar(&opts.busName, "bus-name", "", "EventBridge bus name (aws)")
	fl.StringVar(&opts.tablePrefix, "table-prefix", "", "DynamoDB table name prefix (aws)")
	fl.StringVar(&opts.snapshotBucket, "snapshot-bucket", "", "S3 bucket of registry snapshots (aws)")
	fl.StringVar(&opts.roleARN, "role-arn", "", "IAM role to assume for control operations (aws)")
	fl.StringVar(&opts.env, "env", "", "environment of the deployment, as given to dispatch deploy --env (aws)")
	fl.StringVar(&opts.controlURL, "control-url", "", "control API Function URL: the ControlApiUrl output of dispatch deploy (aws)")
	fl.StringVar(&opts.emitRoleARN, "emit-role-arn", "", "the tenant's emit role that send assumes (aws)")
	fl.StringVar(&opts.externalID, "external-id", "", "external id for assuming the emit role and --role-arn (aws)")
	fl.BoolVar(&opts.use, "use", false, "also make it the current profile")
	_ = cmd.RegisterFlagCompletionFunc("kind", cobra.FixedCompletions([]string{config.KindLocal, config.KindAWS}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func runSet(f *cmdutil.Factory, cmd *cobra.Command, name string, opts *setOptions) error {
	if err := config.ValidateProfileName(name); err != nil {
		return &cmdutil.UsageError{Err: err}
	}
	file, path, err := loadForWrite(f)
	if err != nil {
		return err
	}
	changed := func(n string) bool { return cmd.Flags().Changed(n) }
	prof, exists := file.Profiles[name]
	if !exists {
		if !changed("kind") {
			return cmdutil.Usagef("profile %q does not exist yet: give --kind local or --kind aws to create it", name)
		}
		prof = &config.Profile{}
	}
	updated := *prof
	if changed("kind") && opts.kind != updated.Kind {
		switch opts.kind {
		case config.KindLocal:
			updated = config.Profile{Kind: config.KindLocal, Endpoint: updated.Endpoint, DataDir: updated.DataDir, CredentialsFile: updated.CredentialsFile}
		case config.KindAWS:
			updated = config.Profile{Kind: config.KindAWS, Region: updated.Region, AWSProfile: updated.AWSProfile, BusName: updated.BusName,
				TablePrefix: updated.TablePrefix, SnapshotBucket: updated.SnapshotBucket, RoleARN: updated.RoleARN,
				Env: updated.Env, ControlURL: updated.ControlURL, EmitRoleARN: updated.EmitRoleARN, ExternalID: updated.ExternalID}
		default:
			return cmdutil.Usagef("invalid --kind %q: use local or aws", opts.kind)
		}
	}
	global := cmd.Root().PersistentFlags()
	if g := global.Lookup("endpoint-url"); g != nil && g.Changed {
		updated.Endpoint = g.Value.String()
	}
	if g := global.Lookup("region"); g != nil && g.Changed {
		updated.Region = g.Value.String()
	}
	set := func(flag string, dst *string, v string) {
		if changed(flag) {
			*dst = v
		}
	}
	set("data-dir", &updated.DataDir, opts.dataDir)
	set("credentials-file", &updated.CredentialsFile, opts.credentialsFile)
	set("aws-profile", &updated.AWSProfile, opts.awsProfile)
	set("bus-name", &updated.BusName, opts.busName)
	set("table-prefix", &updated.TablePrefix, opts.tablePrefix)
	set("snapshot-bucket", &updated.SnapshotBucket, opts.snapshotBucket)
	set("role-arn", &updated.RoleARN, opts.roleARN)
	set("env", &updated.Env, opts.env)
	set("control-url", &updated.ControlURL, opts.controlURL)
	set("emit-role-arn", &updated.EmitRoleARN, opts.emitRoleARN)
	set("external-id", &updated.ExternalID, opts.externalID)
	if err := config.ValidateProfile(name, &updated); err != nil {
		return &cmdutil.UsageError{Err: err}
	}
	file.Profiles[name] = &updated
	// The current profile changes only when asked: a new aws profile
	// must not silently take over from the local one.
	if opts.use {
		file.CurrentProfile = name
	}
	if err := config.Save(path, file); err != nil {
		return err
	}
	p, err := f.Printer()
	if err != nil {
		return err
	}
	return p.Print(entry(file, name))
}

func newDeleteCmd(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:               "delete NAME",
		Aliases:           []string{"rm"},
		Short:             "Delete a profile",
		Example:           `  snavio profile delete staging`,
		Args:              cmdutil.ExactArgs(1, "a profile NAME"),
		ValidArgsFunction: profileNames(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			file, path, err := loadForWrite(f)
			if err != nil {
				return err
			}
			e, ok := file.Profiles[name]
			if !ok {
				if name == config.DefaultProfileName {
					return fmt.Errorf("profile %q is the built-in local profile and cannot be deleted; switch away from it with `snavio profile use NAME`", name)
				}
				return fmt.Errorf("profile %q is not in %s: run `snavio profile list`", name, path)
			}
			deleted := Entry{Name: name, Current: file.CurrentProfile == name, Profile: *e}
			delete(file.Profiles, name)
			if file.CurrentProfile == name {
				file.CurrentProfile = ""
			}
			if err := config.Save(path, file); err != nil {
				return err
			}
			p, err := f.Printer()
			if err != nil {
				return err
			}
			return p.Print(deleted)
		},
	}
}
