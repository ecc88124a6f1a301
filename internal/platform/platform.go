// Package platform is what the CLI talks to, chosen by the profile's kind:
// a running `snavio dispatch serve` (local) or the AWS services directly
// (aws). Commands depend on the Client interface only; clients open no
// connection and load no SDK configuration until a method needs it.
package platform

import (
	"errors"
	"fmt"

	"github.com/snavio/snavio/internal/config"
)

// Target is the resolved description of where commands go.
type Target struct {
	Kind           string `json:"kind"`
	Endpoint       string `json:"endpoint,omitempty"`
	Region         string `json:"region,omitempty"`
	DataDir        string `json:"data_dir,omitempty"`
	AWSProfile     string `json:"aws_profile,omitempty"`
	BusName        string `json:"bus_name,omitempty"`
	TablePrefix    string `json:"table_prefix,omitempty"`
	SnapshotBucket string `json:"snapshot_bucket,omitempty"`
	RoleARN        string `json:"role_arn,omitempty"`
	// CredentialsFile is a local profile's ingress credentials file.
	CredentialsFile string `json:"credentials_file,omitempty"`
}

// Client is the platform a command operates on. Operations are added here
// as the commands that need them are built; each is implemented for both
// kinds.
type Client interface {
	// Target describes the resolved platform.
	Target() Target
	// API returns the control-API client of a local profile (a running
	// `snavio dispatch serve`).
	API() (*API, error)
}

// New returns the client for s's profile kind. lookupEnv reads the
// environment (os.LookupEnv in production; nil: none).
func New(s *config.Settings, lookupEnv func(string) (string, bool)) (Client, error) {
	t := Target{
		Kind:           s.Kind,
		Endpoint:       s.EndpointURL,
		Region:         s.Region,
		DataDir:        s.DataDir,
		AWSProfile:     s.AWSProfile,
		BusName:        s.BusName,
		TablePrefix:    s.TablePrefix,
		SnapshotBucket: s.SnapshotBucket,
		RoleARN:        s.RoleARN,

		CredentialsFile: s.CredentialsFile,
	}
	switch s.Kind {
	case config.KindLocal:
		if t.Endpoint == "" {
			return nil, fmt.Errorf("profile %q has no endpoint: set one with `snavio profile set %s --endpoint URL`", s.ProfileName, s.ProfileName)
		}
		return &local{target: t, api: NewAPI(t.Endpoint, LocalToken(lookupEnv, t.DataDir), nil)}, nil
	case config.KindAWS:
		return &aws{target: t}, nil
	default:
		return nil, fmt.Errorf("profile %q: unknown kind %q: use local or aws", s.ProfileName, s.Kind)
	}
}

type local struct {
	target Target
	api    *API
}

func (c *local) Target() Target { return c.target }

func (c *local) API() (*API, error) { return c.api, nil }

type aws struct{ target Target }

func (c *aws) Target() Target { return c.target }

func (c *aws) API() (*API, error) {
	return nil, errors.New("this command talks to a `snavio dispatch serve` control API, and the profile is kind aws; switch to a local profile (`snavio profile use default`, the built-in one, or another local profile in `snavio profile list`)")
}
