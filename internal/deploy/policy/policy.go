// Package policy holds snavio's IAM policy documents as typed values: the
// per-tenant emit role's trust and permission policies, the command bus's
// resource policy, and the statements the platform functions' roles are
// built from. The deployment stack and tenant on-boarding both render
// these; docs/deploy.md explains each condition.
package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Version is the policy language version every document uses.
const Version = "2012-10-17"

// Document is an IAM policy document.
type Document struct {
	Version   string      `json:"Version"`
	Statement []Statement `json:"Statement"`
}

// Statement is one statement of a Document. Action, Resource and the
// principal lists are always lists, so the JSON has one shape per field.
type Statement struct {
	Sid       string     `json:"Sid,omitempty"`
	Effect    Effect     `json:"Effect"`
	Principal *Principal `json:"Principal,omitempty"`
	Action    []string   `json:"Action"`
	Resource  []string   `json:"Resource,omitempty"`
	Condition Condition  `json:"Condition,omitempty"`
}

// Effect is Allow or Deny.
type Effect string

// The two effects.
const (
	Allow Effect = "Allow"
	Deny  Effect = "Deny"
)

// Principal names who a resource or trust policy speaks of. A Principal
// with Any set is the wildcard "*".
type Principal struct {
	AWS     []string
	Service []string
	Any     bool
}

// MarshalJSON writes "*" for Any, else an object of the non-empty lists.
func (p Principal) MarshalJSON() ([]byte, error) {
	if p.Any {
		return []byte(`"*"`), nil
	}
	m := map[string][]string{}
	if len(p.AWS) > 0 {
		m["AWS"] = p.AWS
	}
	if len(p.Service) > 0 {
		m["Service"] = p.Service
	}
	return json.Marshal(m)
}

// Condition maps an operator (StringEquals, ForAllValues:StringEquals,
// Null, ...) to its keys and their values.
type Condition map[string]map[string][]string

// JSON renders d indented, as the golden files and the AWS APIs take it.
func (d Document) JSON() ([]byte, error) { return json.MarshalIndent(d, "", "  ") }

// EmitBinding is one grant of an emit role: the tenant's role RoleARN may
// put events whose source is Source (`<tenant>/<service>`).
type EmitBinding struct {
	Source  string
	RoleARN string
}

// RoleName returns the name of the IAM role in arn (the last segment of
// its path), or an error naming what is wrong with it.
func RoleName(arn string) (string, error) {
	bad := fmt.Errorf("role ARN %q: want arn:aws:iam::<12-digit account>:role/<name>", arn)
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || (parts[1] != "aws" && parts[1] != "aws-cn" && parts[1] != "aws-us-gov") ||
		parts[2] != "iam" || parts[3] != "" || len(parts[4]) != 12 || strings.Trim(parts[4], "0123456789") != "" ||
		!strings.HasPrefix(parts[5], "role/") {
		return "", bad
	}
	segs := strings.Split(strings.TrimPrefix(parts[5], "role/"), "/")
	for _, s := range segs {
		if s == "" || strings.Trim(s, roleNameChars) != "" {
			return "", bad
		}
	}
	name := segs[len(segs)-1]
	if len(name) > 64 {
		return "", fmt.Errorf("role ARN %q: the role name is %d characters; IAM allows 64", arn, len(name))
	}
	return name, nil
}

// roleNameChars are the characters IAM allows in role names and paths.
const roleNameChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+=,.@-"

// EmitTrust is the emit role's trust policy: each tenant role may assume
// it, and only with a session named after itself. That session name is
// what EmitPermission's aws:userid condition binds sources to, so no
// other tenant role can take a session that passes it.
func EmitTrust(roleARNs []string) (Document, error) {
	if len(roleARNs) == 0 {
		return Document{}, errors.New("emit trust: no tenant role ARN: add at least one role that may send")
	}
	d := Document{Version: Version}
	seen := map[string]bool{}
	for _, arn := range roleARNs {
		name, err := RoleName(arn)
		if err != nil {
			return Document{}, fmt.Errorf("emit trust: %w", err)
		}
		if seen[arn] {
			continue
		}
		seen[arn] = true
		d.Statement = append(d.Statement, Statement{
			Sid:       fmt.Sprintf("Assume%d", len(d.Statement)+1),
			Effect:    Allow,
			Principal: &Principal{AWS: []string{arn}},
			Action:    []string{"sts:AssumeRole"},
			Condition: Condition{"StringEquals": {"sts:RoleSessionName": {name}}},
		})
	}
	return d, nil
}

// EmitPermission is the emit role's permission policy: one statement per
// binding, allowing PutEvents on bus only when every entry's source is
// the binding's (ForAllValues, since events:source has one value per
// entry of a batch), a source is present at all (Null false: ForAllValues
// over no values is true), and the caller's session is the binding's role
// (aws:userid ends in the session name EmitTrust forces).
func EmitPermission(busARN string, bindings []EmitBinding) (Document, error) {
	if len(bindings) == 0 {
		return Document{}, errors.New("emit permission: no source binding: add a service first")
	}
	d := Document{Version: Version}
	for _, b := range bindings {
		name, err := RoleName(b.RoleARN)
		if err != nil {
			return Document{}, fmt.Errorf("emit permission for %s: %w", b.Source, err)
		}
		if err := CheckSource(b.Source); err != nil {
			return Document{}, fmt.Errorf("emit permission: %w", err)
		}
		d.Statement = append(d.Statement, Statement{
			Sid:      fmt.Sprintf("PutEvents%d", len(d.Statement)+1),
			Effect:   Allow,
			Action:   []string{"events:PutEvents"},
			Resource: []string{busARN},
			Condition: Condition{
				"ForAllValues:StringEquals": {"events:source": {b.Source}},
				"Null":                      {"events:source": {"false"}},
				"StringLike":                {"aws:userid": {"*:" + name}},
			},
		})
	}
	return d, nil
}

// idChars are the characters of tenant and service ids (the envelope's rule).
const idChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"

// CheckSource validates an events:source value, `<tenant>/<service>`.
func CheckSource(s string) error {
	tenant, service, ok := strings.Cut(s, "/")
	if !ok || !validID(tenant) || !validID(service) {
		return fmt.Errorf("source %q: want <tenant>/<service>, each 1-64 of letters, digits, '.', '_' or '-'", s)
	}
	return nil
}

func validID(s string) bool { return len(s) >= 1 && len(s) <= 64 && strings.Trim(s, idChars) == "" }

// BusPolicy is the command bus's static resource policy: PutEvents is
// allowed to the account's emit roles (roles whose ARN matches
// emitRolePattern) and denied to every other principal, so that no other
// identity in the account can put commands on the bus, whatever its own
// policies say.
func BusPolicy(accountRoot, busARN, emitRolePattern string) Document {
	return Document{Version: Version, Statement: []Statement{
		{
			Sid:       "EmitRolesMayPut",
			Effect:    Allow,
			Principal: &Principal{AWS: []string{accountRoot}},
			Action:    []string{"events:PutEvents"},
			Resource:  []string{busARN},
			Condition: Condition{"ArnLike": {"aws:PrincipalArn": {emitRolePattern}}},
		},
		{
			Sid:       "OnlyEmitRolesMayPut",
			Effect:    Deny,
			Principal: &Principal{Any: true},
			Action:    []string{"events:PutEvents"},
			Resource:  []string{busARN},
			Condition: Condition{"ArnNotLike": {"aws:PrincipalArn": {emitRolePattern}}},
		},
	}}
}

// LambdaTrust lets the Lambda service assume a function's role.
func LambdaTrust() Document {
	return Document{Version: Version, Statement: []Statement{{
		Effect:    Allow,
		Principal: &Principal{Service: []string{"lambda.amazonaws.com"}},
		Action:    []string{"sts:AssumeRole"},
	}}}
}

// Allowing is a statement allowing actions on resources.
func Allowing(sid string, actions []string, resources ...string) Statement {
	return Statement{Sid: sid, Effect: Allow, Action: actions, Resource: resources}
}
