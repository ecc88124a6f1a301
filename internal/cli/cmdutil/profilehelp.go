package cmdutil

// ControlAPIHelp ends the help of the command groups that call the
// control API: what they reach on each kind of profile.
const ControlAPIHelp = `On a local profile the command calls the control API of "snavio dispatch
serve" with a bearer token (SNAVIO_TOKEN, else the operator token in the
profile's data_dir). On an aws profile it calls the control API's Function
URL (the profile's control_url) signed with SigV4 as the profile's IAM
identity: the role_arn role when set (the operator role snavio-<env>-operator
or a tenant's control role snavio-<env>-tenant-<tenant>), else the AWS
credentials of aws_profile or the environment.`
