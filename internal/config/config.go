// Package config reads and writes the snavio configuration file and resolves
// the settings a command runs with.
//
// The file ($XDG_CONFIG_HOME/snavio/config.yaml) holds named profiles:
//
//	current_profile: local
//	profiles:
//	  local:
//	    kind: local
//	    endpoint: http://127.0.0.1:8787
//	    data_dir: /home/me/.local/share/snavio
//	  prod:
//	    kind: aws
//	    region: eu-west-1
//	    aws_profile: platform-admin
//	    bus_name: snavio-command-bus
//	    table_prefix: snavio-prod
//	    snapshot_bucket: snavio-prod-snapshots
//	    role_arn: arn:aws:iam::123456789012:role/snavio-operator
//
// Every setting resolves with the precedence flag > SNAVIO_* environment
// variable > profile > default. A fresh viper instance is built for every
// invocation (no package state), and profile names are map keys rather than
// viper paths, so names with dots work.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/snavio/snavio/internal/atomicfile"
)

// Profile kinds.
const (
	KindLocal = "local"
	KindAWS   = "aws"
)

// DefaultProfileName is used when nothing names a profile.
const DefaultProfileName = "default"

// DefaultLocalEndpoint is where `snavio dispatch serve` listens by default.
const DefaultLocalEndpoint = "http://127.0.0.1:8787"

// DefaultBusName is the spec's EventBridge bus.
const DefaultBusName = "snavio-command-bus"

// File is the configuration file.
type File struct {
	CurrentProfile string              `yaml:"current_profile,omitempty" mapstructure:"current_profile"`
	Profiles       map[string]*Profile `yaml:"profiles,omitempty" mapstructure:"profiles"`
}

// Profile is one named target: a local `dispatch serve` or an AWS account.
type Profile struct {
	Kind string `yaml:"kind" json:"kind" mapstructure:"kind"`

	// kind: local
	Endpoint string `yaml:"endpoint,omitempty" json:"endpoint,omitempty" mapstructure:"endpoint"`
	DataDir  string `yaml:"data_dir,omitempty" json:"data_dir,omitempty" mapstructure:"data_dir"`
	// CredentialsFile is the ingress credentials (AWS shared-credentials
	// format) `snavio send` signs PutEvents with.
	CredentialsFile string `yaml:"credentials_file,omitempty" json:"credentials_file,omitempty" mapstructure:"credentials_file"`

	// kind: aws
	Region         string `yaml:"region,omitempty" json:"region,omitempty" mapstructure:"region"`
	AWSProfile     string `yaml:"aws_profile,omitempty" json:"aws_profile,omitempty" mapstructure:"aws_profile"`
	BusName        string `yaml:"bus_name,omitempty" json:"bus_name,omitempty" mapstructure:"bus_name"`
	TablePrefix    string `yaml:"table_prefix,omitempty" json:"table_prefix,omitempty" mapstructure:"table_prefix"`
	SnapshotBucket string `yaml:"snapshot_bucket,omitempty" json:"snapshot_bucket,omitempty" mapstructure:"snapshot_bucket"`
	RoleARN        string `yaml:"role_arn,omitempty" json:"role_arn,omitempty" mapstructure:"role_arn"`
	// Env is the deployment's environment (`snavio dispatch deploy --env`):
	// it names the stack, its bus, tables, roles and topics.
	Env string `yaml:"env,omitempty" json:"env,omitempty" mapstructure:"env"`
	// ControlURL is the control API's Function URL (the stack's
	// ControlApiUrl output), called with SigV4.
	ControlURL string `yaml:"control_url,omitempty" json:"control_url,omitempty" mapstructure:"control_url"`
	// EmitRoleARN is the tenant's emit role `snavio send` assumes to put
	// commands on the bus, with ExternalID when its trust policy asks one.
	EmitRoleARN string `yaml:"emit_role_arn,omitempty" json:"emit_role_arn,omitempty" mapstructure:"emit_role_arn"`
	ExternalID  string `yaml:"external_id,omitempty" json:"external_id,omitempty" mapstructure:"external_id"`
}

// Paths tells where configuration and state live.
type Paths struct {
	// ConfigFile is the configuration file's path.
	ConfigFile string
	// DataDir is the default data directory of local profiles.
	DataDir string
}

// Env looks up environment variables (os.LookupEnv in production).
type Env interface {
	LookupEnv(key string) (string, bool)
}

// DefaultPaths computes the configuration file and data directory from
// --config (flagConfig, may be empty), SNAVIO_CONFIG and the XDG base
// directory variables, falling back to ~/.config and ~/.local/share.
func DefaultPaths(env Env, flagConfig string) (Paths, error) {
	home, _ := env.LookupEnv("HOME")
	if home == "" {
		if h, err := os.UserHomeDir(); err == nil {
			home = h
		}
	}
	var p Paths
	switch {
	case flagConfig != "":
		p.ConfigFile = flagConfig
	case nonEmpty(env, "SNAVIO_CONFIG"):
		p.ConfigFile, _ = env.LookupEnv("SNAVIO_CONFIG")
	default:
		dir, _ := env.LookupEnv("XDG_CONFIG_HOME")
		if dir == "" {
			if home == "" {
				return Paths{}, errors.New("cannot locate the config file: neither XDG_CONFIG_HOME nor HOME is set; pass --config FILE")
			}
			dir = filepath.Join(home, ".config")
		}
		p.ConfigFile = filepath.Join(dir, "snavio", "config.yaml")
	}
	data, _ := env.LookupEnv("XDG_DATA_HOME")
	if data == "" && home != "" {
		data = filepath.Join(home, ".local", "share")
	}
	if data != "" {
		p.DataDir = filepath.Join(data, "snavio")
	}
	return p, nil
}

func nonEmpty(env Env, key string) bool {
	v, ok := env.LookupEnv(key)
	return ok && v != ""
}

// Load reads the configuration file at path. A missing file is an empty
// configuration, not an error; a malformed one is an error naming the file.
func Load(path string) (*File, error) {
	f := &File{Profiles: map[string]*Profile{}}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	v := viper.NewWithOptions(viper.KeyDelimiter("\x00"))
	v.SetConfigFile(path)
	v.SetConfigType("yaml")
	if err := v.ReadInConfig(); err != nil {
		return nil, fmt.Errorf("read config file %s: %w; fix the YAML or move the file away", path, unwrapViper(err))
	}
	// Decode strictly with yaml.v3 so that a misspelt key is reported
	// instead of silently ignored. viper has checked the file parses.
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config file %s: %w", path, err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(f); err != nil && !errors.Is(err, io.EOF) { // io.EOF: an empty file
		return nil, fmt.Errorf("config file %s: %s; see `snavio help config` for the format", path, yamlMessage(err))
	}
	if f.Profiles == nil {
		f.Profiles = map[string]*Profile{}
	}
	for name, p := range f.Profiles {
		if p == nil {
			return nil, fmt.Errorf("config file %s: profile %q is empty; give it a kind (local or aws)", path, name)
		}
		if err := ValidateProfile(name, p); err != nil {
			return nil, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	return f, nil
}

// yamlMessage flattens a yaml.v3 error (a TypeError lists one problem
// per line) into one line.
func yamlMessage(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			msgs[i] = strings.ReplaceAll(m, " in type config.Profile", "")
		}
		return strings.Join(msgs, "; ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

func unwrapViper(err error) error {
	var pe viper.ConfigParseError
	if errors.As(err, &pe) {
		if u := pe.Unwrap(); u != nil {
			return u
		}
	}
	return err
}

// Save writes f to path atomically (a temporary file in the same directory,
// then a rename) with mode 0600, creating the directory 0700 if needed.
func Save(path string, f *File) error {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	b := buf.Bytes()
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create config directory %s: %w", dir, err)
	}
	if err := atomicfile.Write(path, b, 0o600); err != nil {
		return fmt.Errorf("write config file %s: %w", path, err)
	}
	return nil
}

// ProfileNames returns the names of every profile there is, in sorted
// order: the file's, and the built-in DefaultProfileName unless the file
// defines its own.
func (f *File) ProfileNames() []string {
	names := make([]string, 0, len(f.Profiles)+1)
	for n := range f.Profiles {
		names = append(names, n)
	}
	if _, ok := f.Profiles[DefaultProfileName]; !ok {
		names = append(names, DefaultProfileName)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the profile called name: the file's, or, for
// DefaultProfileName when the file has none by that name, the built-in
// local profile (builtin true). It is always there, so a config file of
// aws profiles alone still leaves a local one to switch back to.
func (f *File) Lookup(name string) (p *Profile, builtin, ok bool) {
	if p, ok := f.Profiles[name]; ok {
		return p, false, true
	}
	if name == DefaultProfileName {
		return &Profile{Kind: KindLocal}, true, true
	}
	return nil, false, false
}

// Current returns the name of the current profile: the file's
// current_profile, or DefaultProfileName.
func (f *File) Current() string {
	if f.CurrentProfile != "" {
		return f.CurrentProfile
	}
	return DefaultProfileName
}

// The validation patterns are compiled on first use, not at package init:
// compiling them eagerly cost more than a whole hello-world process at every
// start of snavio (measured by TestStartupCost).
var (
	profileNameRE = lazyRE(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	regionRE      = lazyRE(`^[a-z]{2}(-[a-z]+)+-\d$`)
	roleARNRE     = lazyRE(`^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$`)
	bucketRE      = lazyRE(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	busRE         = lazyRE(`^[A-Za-z0-9._/-]{1,256}$`)
	tablePrefixRE = lazyRE(`^[A-Za-z0-9_.-]{1,200}$`)
	// envRE is stack.NewNames' rule for --env, which config cannot import.
	envRE        = lazyRE(`^[a-z0-9][a-z0-9-]{0,31}$`)
	externalIDRE = lazyRE(`^[\w+=,.@:/-]+$`) // 2-1224 long, checked apart (RE2 repeats stop at 1000)
)

func lazyRE(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// ValidateProfileName checks a profile name.
func ValidateProfileName(name string) error {
	if !profileNameRE().MatchString(name) {
		return fmt.Errorf("invalid profile name %q: use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// ValidateProfile checks every field of p, naming the profile and the field
// in the error.
func ValidateProfile(name string, p *Profile) error {
	if err := ValidateProfileName(name); err != nil {
		return err
	}
	switch p.Kind {
	case KindLocal:
		if p.Region != "" || p.AWSProfile != "" || p.BusName != "" || p.TablePrefix != "" || p.SnapshotBucket != "" || p.RoleARN != "" ||
			p.Env != "" || p.ControlURL != "" || p.EmitRoleARN != "" || p.ExternalID != "" {
			return fmt.Errorf("profile %q: kind local takes only endpoint, data_dir and credentials_file; remove the AWS fields or set kind: aws", name)
		}
		if p.Endpoint != "" {
			if err := ValidateEndpoint(p.Endpoint); err != nil {
				return fmt.Errorf("profile %q: %w", name, err)
			}
		}
	case KindAWS:
		if p.Endpoint != "" || p.DataDir != "" || p.CredentialsFile != "" {
			return fmt.Errorf("profile %q: kind aws does not take endpoint, data_dir or credentials_file (AWS credentials come from aws_profile); use --endpoint-url for an AWS-compatible endpoint, or set kind: local", name)
		}
		if p.Region != "" && !regionRE().MatchString(p.Region) {
			return fmt.Errorf("profile %q: invalid region %q: use an AWS region such as us-east-1", name, p.Region)
		}
		if p.RoleARN != "" && !roleARNRE().MatchString(p.RoleARN) {
			return fmt.Errorf("profile %q: invalid role_arn %q: use arn:aws:iam::<12-digit account>:role/<name>", name, p.RoleARN)
		}
		if p.EmitRoleARN != "" && !roleARNRE().MatchString(p.EmitRoleARN) {
			return fmt.Errorf("profile %q: invalid emit_role_arn %q: use arn:aws:iam::<12-digit account>:role/<path/>snavio-<env>-emit-<tenant>", name, p.EmitRoleARN)
		}
		if p.Env != "" && !envRE().MatchString(p.Env) {
			return fmt.Errorf("profile %q: invalid env %q: use the --env of `snavio dispatch deploy` (lowercase letters, digits, '-', up to 32)", name, p.Env)
		}
		if p.ExternalID != "" && (len(p.ExternalID) < 2 || len(p.ExternalID) > 1224 || !externalIDRE().MatchString(p.ExternalID)) {
			return fmt.Errorf("profile %q: invalid external_id: use 2-1224 characters of letters, digits and +=,.@:/-", name)
		}
		if p.ControlURL != "" {
			if err := ValidateControlURL(p.ControlURL); err != nil {
				return fmt.Errorf("profile %q: %w", name, err)
			}
		}
		if p.SnapshotBucket != "" && !bucketRE().MatchString(p.SnapshotBucket) {
			return fmt.Errorf("profile %q: invalid snapshot_bucket %q: use an S3 bucket name (3-63 lowercase letters, digits, '.', '-')", name, p.SnapshotBucket)
		}
		if p.BusName != "" && !busRE().MatchString(p.BusName) {
			return fmt.Errorf("profile %q: invalid bus_name %q: use an EventBridge bus name", name, p.BusName)
		}
		if p.TablePrefix != "" && !tablePrefixRE().MatchString(p.TablePrefix) {
			return fmt.Errorf("profile %q: invalid table_prefix %q: use letters, digits, '_', '.', '-'", name, p.TablePrefix)
		}
	case "":
		return fmt.Errorf("profile %q has no kind: set kind to local or aws", name)
	default:
		return fmt.Errorf("profile %q: unknown kind %q: use local or aws", name, p.Kind)
	}
	return nil
}

// ValidateControlURL checks a control API URL: https (http only on
// loopback, for tests and emulators) with a host and no query.
func ValidateControlURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" ||
		!(u.Scheme == "https" || u.Scheme == "http" && isLoopback(u.Hostname())) {
		return fmt.Errorf("invalid control_url %q: use the ControlApiUrl output of `snavio dispatch deploy`, such as https://abc123.lambda-url.eu-west-1.on.aws/", s)
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ValidateEndpoint checks an endpoint URL: http or https with a host.
func ValidateEndpoint(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("invalid endpoint %q: use a URL such as %s", s, DefaultLocalEndpoint)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("invalid endpoint %q: give only scheme, host and port, such as %s", s, DefaultLocalEndpoint)
	}
	return nil
}
