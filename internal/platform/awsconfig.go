package platform

import (
	"context"
	"errors"
	"fmt"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// loadAWSConfig is the SDK configuration of an aws profile: its region and
// AWS profile, and its role assumed when it names one. Service endpoints
// come from the SDK's own settings (AWS_ENDPOINT_URL_<SERVICE>).
func loadAWSConfig(ctx context.Context, t Target) (awssdk.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if t.Region != "" {
		opts = append(opts, awsconfig.WithRegion(t.Region))
	}
	if t.AWSProfile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(t.AWSProfile))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return cfg, &Error{Msg: fmt.Sprintf("cannot load the AWS configuration (aws_profile %q): %v; check ~/.aws/config and ~/.aws/credentials, or the profile's aws_profile", t.AWSProfile, err), Err: err}
	}
	if cfg.Region == "" {
		return cfg, errors.New("no AWS region: set one with --region, SNAVIO_REGION, the profile's region, or the AWS profile's region")
	}
	if t.RoleARN != "" {
		cfg.Credentials = awssdk.NewCredentialsCache(stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), t.RoleARN))
	}
	return cfg, nil
}
