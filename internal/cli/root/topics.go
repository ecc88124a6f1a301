package root

import (
	"github.com/spf13/cobra"
)

// helpTopics are `snavio help <topic>` pages: commands with no run function
// that cobra lists under "Additional help topics".
func helpTopics() []*cobra.Command {
	return []*cobra.Command{
		{
			Use:   "exit-codes",
			Short: "Exit codes of snavio commands",
			Long: `snavio exits with one of these codes:

  0  OK: the command did what it was asked.
  1  Error: the command failed; one line on stderr says what, with which
     input, and what to do (add -v for the underlying detail).
  2  Usage error: an unknown command or flag, a missing or malformed
     argument, an invalid flag value. Nothing was changed.
  3  Changes pending or differences found, for commands that compare state
     and were asked to report it (route apply --detailed-exitcode,
     snapshot diff).

snavio send --wait follows the command it sent until the dispatcher
decides, and exits with its outcome:

  0  Delivered (snavio.command.delivered).
  4  Invalid (snavio.command.invalid): the dispatcher rejected the message
     itself (schema, signature, replay window, key version, ban, an id
     reused with another payload). The reason is printed; resending the
     same message will not help.
  5  Failed (snavio.command.failed): a valid command was not dispatched
     (route-missing, acl-deny, rate-limit-exceeded, fairness-violation,
     delivery-failure). The reason and the retry hints (retry_after_ms,
     throttle_until) are printed.
  6  Duplicate (snavio.command.duplicate): strict dedupe dropped the
     command; its id was already delivered.
  7  Timeout: no outcome within --wait. The command was put on the bus;
     its fate is unknown (follow it with snavio tail).

and snavio send, with or without --wait:

  8  Not accepted: the bus refused the PutEvents entry, so nothing was
     put. Retrying with the same --id is safe.

snavio bench uses the same codes for a whole run, the first that applies:
8 when the bus refused any entry (or a PutEvents call failed); with
--wait, 4 when any command was invalid, 5 failed, 6 a duplicate, 7 had no
outcome in time; 0 when all were accepted (and delivered); 1 when it was
interrupted.`,
		},
		{
			Use:   "config",
			Short: "The configuration file and its profiles",
			Long: `snavio reads $XDG_CONFIG_HOME/snavio/config.yaml (~/.config/snavio/config.yaml
when XDG_CONFIG_HOME is unset), or the file named by --config or SNAVIO_CONFIG.
It holds named profiles; the current one is used unless --profile or
SNAVIO_PROFILE names another.

  current_profile: local
  profiles:
    local:
      kind: local                       # a running "snavio dispatch serve"
      endpoint: http://127.0.0.1:8787
      data_dir: /home/me/.local/share/snavio
    prod:
      kind: aws                         # the AWS services directly
      region: eu-west-1
      aws_profile: platform-admin       # profile in ~/.aws/config
      bus_name: snavio-command-bus
      table_prefix: snavio-prod
      snapshot_bucket: snavio-prod-snapshots
      role_arn: arn:aws:iam::123456789012:role/snavio-prod-operator   # the control API as the operator
      env: prod                         # dispatch deploy --env
      control_url: https://abc123.lambda-url.eu-west-1.on.aws/
      emit_role_arn: arn:aws:iam::123456789012:role/snavio/prod/emit/snavio-prod-emit-acme
      external_id: acme-ext-1           # if the emit role asks one

Manage it with "snavio profile list|use|show|set|delete" rather than by hand;
snavio writes the file atomically with mode 0600. Unknown keys are errors.

A built-in local profile named "default" (endpoint http://127.0.0.1:8787,
data under $XDG_DATA_HOME/snavio) always exists unless the file defines its
own: it is current when nothing else is, and "snavio profile use default"
switches back to it. "snavio profile set" changes the current profile only
with --use.

Every setting resolves with the precedence:

  flag  >  SNAVIO_* environment variable  >  profile  >  default

"snavio profile show" prints each resolved value and where it came from.`,
		},
		{
			Use:   "environment",
			Short: "Environment variables snavio reads",
			Long: `  SNAVIO_CONFIG           config file (like --config)
  SNAVIO_PROFILE          profile to use (like --profile)
  SNAVIO_OUTPUT           output format: table, json, yaml or ndjson (like -o)
  SNAVIO_ENDPOINT_URL     platform endpoint (like --endpoint-url)
  SNAVIO_REGION           AWS region (like --region)
  SNAVIO_NO_COLOR         true disables colour (like --no-color)
  SNAVIO_DATA_DIR         data directory of a local profile
  SNAVIO_AWS_PROFILE      AWS shared-config profile of an aws profile
  SNAVIO_BUS_NAME         EventBridge bus of an aws profile
  SNAVIO_TABLE_PREFIX     DynamoDB table prefix of an aws profile
  SNAVIO_SNAPSHOT_BUCKET  snapshot bucket of an aws profile
  SNAVIO_ROLE_ARN         role to assume for an aws profile
  SNAVIO_ENV              deployment environment of an aws profile
  SNAVIO_CONTROL_URL      control API Function URL of an aws profile
  SNAVIO_EMIT_ROLE_ARN    emit role send assumes on an aws profile
  SNAVIO_EXTERNAL_ID      external id for assuming roles on an aws profile
  SNAVIO_CREDENTIALS_FILE ingress credentials (AWS shared-credentials format) a
                          local profile signs PutEvents with (like the
                          profile's credentials_file)
  SNAVIO_TOKEN            bearer token for the control API of a local profile
                          (a tenant token; default: the operator token in the
                          data directory)
  SNAVIO_SECRET           snavio send: the HMAC secret in base64 (instead of
                          --secret-file), with SNAVIO_KEY_VERSION
  SNAVIO_KEY_VERSION      snavio send: the key version of SNAVIO_SECRET
  SNAVIO_ALERT_EMAIL_PASSWORD
                          dispatch serve: the SMTP AUTH password of the email
                          alert channel (instead of --alert-email-password-file)
  SNAVIO_FORCE_TTY        1 treats stdout and stderr as terminals
  NO_COLOR                any non-empty value disables colour (no-color.org)
  XDG_CONFIG_HOME         base of the default config file location
  XDG_DATA_HOME           base of the default data directory
  GOGC                    garbage collector target of dispatch serve (default 400:
                          the heap grows to 5x the live heap between collections)`,
		},
	}
}
