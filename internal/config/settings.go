package config

import (
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// Origin tells where a resolved setting came from.
type Origin string

// The origins, highest precedence first.
const (
	FromFlag    Origin = "flag"
	FromEnv     Origin = "env"
	FromFile    Origin = "profile"
	FromDefault Origin = "default"
)

// Setting is one resolved value and where it came from.
type Setting struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Origin Origin `json:"origin"`
	// Env is the environment variable that can set it.
	Env string `json:"env"`
}

// key describes one resolvable setting: its viper key, the global flag
// that sets it (if any) and the profile field it reads.
type key struct {
	name    string
	flag    string
	profile func(*Profile) string
}

// keys are the settings every command resolves, in display order. Each has
// an environment variable SNAVIO_<NAME>.
var keys = []key{
	{name: "output", flag: "output"},
	{name: "no_color", flag: "no-color"},
	{name: "endpoint_url", flag: "endpoint-url", profile: func(p *Profile) string { return p.Endpoint }},
	{name: "region", flag: "region", profile: func(p *Profile) string { return p.Region }},
	{name: "data_dir", profile: func(p *Profile) string { return p.DataDir }},
	{name: "credentials_file", profile: func(p *Profile) string { return p.CredentialsFile }},
	{name: "aws_profile", profile: func(p *Profile) string { return p.AWSProfile }},
	{name: "bus_name", profile: func(p *Profile) string { return p.BusName }},
	{name: "table_prefix", profile: func(p *Profile) string { return p.TablePrefix }},
	{name: "snapshot_bucket", profile: func(p *Profile) string { return p.SnapshotBucket }},
	{name: "role_arn", profile: func(p *Profile) string { return p.RoleARN }},
	{name: "env", profile: func(p *Profile) string { return p.Env }},
	{name: "control_url", profile: func(p *Profile) string { return p.ControlURL }},
	{name: "emit_role_arn", profile: func(p *Profile) string { return p.EmitRoleARN }},
	{name: "external_id", profile: func(p *Profile) string { return p.ExternalID }},
}

// EnvName returns the environment variable for a setting key.
func EnvName(key string) string { return "SNAVIO_" + upper(key) }

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// Settings are the values a command runs with, after precedence.
type Settings struct {
	// ConfigFile is the file that was read (it may not exist).
	ConfigFile string `json:"config_file"`
	// ProfileName is the selected profile and ProfileOrigin where the
	// selection came from.
	ProfileName   string `json:"profile"`
	ProfileOrigin Origin `json:"profile_origin"`
	// Kind is the profile's kind: local or aws.
	Kind string `json:"kind"`

	Output      string `json:"output"`
	NoColor     bool   `json:"no_color"`
	EndpointURL string `json:"endpoint_url"`
	Region      string `json:"region"`
	DataDir     string `json:"data_dir"`
	// CredentialsFile is the local profile's ingress credentials file.
	CredentialsFile string `json:"credentials_file"`
	AWSProfile      string `json:"aws_profile"`
	BusName         string `json:"bus_name"`
	TablePrefix     string `json:"table_prefix"`
	SnapshotBucket  string `json:"snapshot_bucket"`
	RoleARN         string `json:"role_arn"`
	Env             string `json:"env"`
	ControlURL      string `json:"control_url"`
	EmitRoleARN     string `json:"emit_role_arn"`
	ExternalID      string `json:"external_id"`

	// Values lists every setting with its origin, for `profile show`.
	Values []Setting `json:"settings"`
}

// Presentation is how output looks: the settings that come only from
// flags, the environment and defaults, never from a profile. Printing needs
// nothing else, so it never reads or validates the config file.
type Presentation struct {
	Output  string
	NoColor bool
}

// ResolvePresentation resolves -o/SNAVIO_OUTPUT and
// --no-color/SNAVIO_NO_COLOR. flags may be nil.
func ResolvePresentation(flags *pflag.FlagSet) (Presentation, error) {
	v := viper.NewWithOptions(viper.KeyDelimiter("\x00"))
	v.SetDefault("output", "")
	v.SetDefault("no_color", false)
	for _, k := range keys[:2] { // output, no_color
		if err := v.BindEnv(k.name, EnvName(k.name)); err != nil {
			return Presentation{}, fmt.Errorf("bind %s: %w", EnvName(k.name), err)
		}
		if f := lookup(flags, k.flag); f != nil {
			if err := v.BindPFlag(k.name, f); err != nil {
				return Presentation{}, fmt.Errorf("bind --%s: %w", k.flag, err)
			}
		}
	}
	noColor, err := strconv.ParseBool(orFalse(v.GetString("no_color")))
	if err != nil {
		return Presentation{}, fmt.Errorf("invalid %s=%q: use true or false", EnvName("no_color"), v.GetString("no_color"))
	}
	return Presentation{Output: v.GetString("output"), NoColor: noColor}, nil
}

// Resolve computes the settings from the global flags, the SNAVIO_*
// environment, the selected profile of file and the defaults, in that
// order of precedence. flags may be nil. paths supplies the default data
// directory.
func Resolve(file *File, flags *pflag.FlagSet, paths Paths) (*Settings, error) {
	s := &Settings{ConfigFile: paths.ConfigFile}

	// Which profile: --profile > SNAVIO_PROFILE > current_profile > "default".
	s.ProfileName, s.ProfileOrigin = DefaultProfileName, FromDefault
	if file.CurrentProfile != "" {
		s.ProfileName, s.ProfileOrigin = file.CurrentProfile, FromFile
	}
	if v := os.Getenv("SNAVIO_PROFILE"); v != "" {
		s.ProfileName, s.ProfileOrigin = v, FromEnv
	}
	if f := lookupChanged(flags, "profile"); f != nil {
		s.ProfileName, s.ProfileOrigin = f.Value.String(), FromFlag
	}
	prof, _, ok := file.Lookup(s.ProfileName)
	if !ok {
		return nil, fmt.Errorf("profile %q (from %s) is not in %s: run `snavio profile list` to see the profiles, or `snavio profile set %s --kind local` to create it", s.ProfileName, s.ProfileOrigin, paths.ConfigFile, s.ProfileName)
	}
	s.Kind = prof.Kind

	v := viper.NewWithOptions(viper.KeyDelimiter("\x00"))
	v.SetDefault("output", "")
	v.SetDefault("no_color", false)
	if prof.Kind == KindLocal {
		v.SetDefault("endpoint_url", DefaultLocalEndpoint)
		v.SetDefault("data_dir", paths.DataDir)
	} else {
		v.SetDefault("bus_name", DefaultBusName)
	}
	fromProfile := map[string]any{}
	for _, k := range keys {
		if k.profile != nil {
			if val := k.profile(prof); val != "" {
				fromProfile[k.name] = val
			}
		}
	}
	if err := v.MergeConfigMap(fromProfile); err != nil {
		return nil, fmt.Errorf("resolve profile %q: %w", s.ProfileName, err)
	}
	for _, k := range keys {
		if err := v.BindEnv(k.name, EnvName(k.name)); err != nil {
			return nil, fmt.Errorf("bind %s: %w", EnvName(k.name), err)
		}
		if k.flag != "" && flags != nil {
			if f := flags.Lookup(k.flag); f != nil {
				if err := v.BindPFlag(k.name, f); err != nil {
					return nil, fmt.Errorf("bind --%s: %w", k.flag, err)
				}
			}
		}
	}

	for _, k := range keys {
		origin := FromDefault
		switch {
		case k.flag != "" && lookupChanged(flags, k.flag) != nil:
			origin = FromFlag
		case os.Getenv(EnvName(k.name)) != "":
			origin = FromEnv
		case fromProfile[k.name] != nil:
			origin = FromFile
		}
		s.Values = append(s.Values, Setting{Key: k.name, Value: v.GetString(k.name), Origin: origin, Env: EnvName(k.name)})
	}

	pres, err := ResolvePresentation(flags)
	if err != nil {
		return nil, err
	}
	s.Output, s.NoColor = pres.Output, pres.NoColor
	s.EndpointURL = v.GetString("endpoint_url")
	s.Region = v.GetString("region")
	s.DataDir = v.GetString("data_dir")
	s.CredentialsFile = v.GetString("credentials_file")
	s.AWSProfile = v.GetString("aws_profile")
	s.BusName = v.GetString("bus_name")
	s.TablePrefix = v.GetString("table_prefix")
	s.SnapshotBucket = v.GetString("snapshot_bucket")
	s.RoleARN = v.GetString("role_arn")
	s.Env = v.GetString("env")
	s.ControlURL = v.GetString("control_url")
	s.EmitRoleARN = v.GetString("emit_role_arn")
	s.ExternalID = v.GetString("external_id")

	if s.EndpointURL != "" {
		if err := ValidateEndpoint(s.EndpointURL); err != nil {
			return nil, fmt.Errorf("endpoint URL (from %s): %w", s.origin("endpoint_url"), err)
		}
	}
	if s.Region != "" && !regionRE().MatchString(s.Region) {
		return nil, fmt.Errorf("invalid region %q (from %s): use an AWS region such as us-east-1", s.Region, s.origin("region"))
	}
	return s, nil
}

func orFalse(s string) string {
	if s == "" {
		return "false"
	}
	return s
}

// origin returns where the setting key came from.
func (s *Settings) origin(key string) Origin {
	for _, v := range s.Values {
		if v.Key == key {
			return v.Origin
		}
	}
	return FromDefault
}

func lookup(flags *pflag.FlagSet, name string) *pflag.Flag {
	if flags == nil || name == "" {
		return nil
	}
	return flags.Lookup(name)
}

func lookupChanged(flags *pflag.FlagSet, name string) *pflag.Flag {
	if flags == nil {
		return nil
	}
	if f := flags.Lookup(name); f != nil && f.Changed {
		return f
	}
	return nil
}

// SettingKeys returns the names of the settings every command resolves,
// each read from the environment variable EnvName(name).
func SettingKeys() []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.name
	}
	return out
}
