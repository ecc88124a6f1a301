package controlapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
)

// IAMCaller is the IAM identity a Lambda Function URL with AWS_IAM auth
// verified (its requestContext.authorizer.iam): the caller's ARN, account
// and unique id.
type IAMCaller struct {
	UserARN, AccountID, CallerID string
}

type iamCallerKey struct{}

// WithIAMCaller returns ctx carrying the request's verified IAM caller
// (the Lambda host puts it there; IAMAuth reads it).
func WithIAMCaller(ctx context.Context, c IAMCaller) context.Context {
	return context.WithValue(ctx, iamCallerKey{}, c)
}

// IAMCallerFrom returns the IAM caller ctx carries.
func IAMCallerFrom(ctx context.Context) (IAMCaller, bool) {
	c, ok := ctx.Value(iamCallerKey{}).(IAMCaller)
	return c, ok
}

// Roles is the naming rule of the roles the control API maps to
// principals; stack.Names implements it.
type Roles interface {
	OperatorRole() string
	TenantRole(tenant string) (string, error)
}

// IAMAuth is the Authenticator behind a Function URL (docs/control-api.md,
// "On AWS: who is who"): the verified caller must be a session of a role
// of Account, and the role's name says the principal: Roles.OperatorRole
// is the operator, Roles.TenantRole(t) is tenant t, anything else is
// refused.
type IAMAuth struct {
	// Account is the 12-digit account of the function (and of the roles).
	Account string
	Roles   Roles
}

// Authenticate maps the request's IAM caller to its principal; a refusal
// is an *Error (401 no or foreign identity, 403 an identity that maps to
// no principal), naming the role to assume.
func (a IAMAuth) Authenticate(r *http.Request) (server.Principal, error) {
	c, ok := IAMCallerFrom(r.Context())
	if !ok {
		return server.Principal{}, Refuse(http.StatusUnauthorized, "the request carries no IAM identity",
			"call the Function URL signed with SigV4 (service lambda) as "+a.hint())
	}
	p, err := a.Principal(c)
	if err != nil {
		return server.Principal{}, err
	}
	return p, nil
}

// hint names the roles to assume.
func (a IAMAuth) hint() string {
	tenant, _ := a.Roles.TenantRole("<tenant>")
	return "a session of role " + a.Roles.OperatorRole() + " (the operator) or " + tenant + " (a tenant) in account " + a.Account
}

// Principal is the mapping: c's principal, or an *Error saying why none.
func (a IAMAuth) Principal(c IAMCaller) (server.Principal, error) {
	role, account, err := roleOf(c.UserARN)
	switch {
	case c.UserARN == "":
		return server.Principal{}, Refuse(http.StatusUnauthorized, "the request carries no IAM identity", "call the Function URL signed with SigV4 as "+a.hint())
	case err != nil:
		return server.Principal{}, Refuse(http.StatusForbidden, fmt.Sprintf("IAM identity %.200q: %v", c.UserARN, err), "assume "+a.hint())
	case account != a.Account || (c.AccountID != "" && c.AccountID != a.Account):
		return server.Principal{}, Refuse(http.StatusForbidden, fmt.Sprintf("IAM identity %.200q is not of this platform's account", c.UserARN), "assume "+a.hint())
	case role == a.Roles.OperatorRole():
		return server.OperatorPrincipal(), nil
	}
	if t, ok := a.tenantOf(role); ok {
		return server.TenantPrincipal(t), nil
	}
	return server.Principal{}, Refuse(http.StatusForbidden, fmt.Sprintf("role %.80q maps to no principal of this platform", role), "assume "+a.hint())
}

// tenantOf inverts Roles.TenantRole: the tenant whose control role is
// named role. The prefix is TenantRole("")'s; the candidate must be a
// tenant id and name exactly role again.
func (a IAMAuth) tenantOf(role string) (string, bool) {
	prefix, err := a.Roles.TenantRole("")
	if err != nil || prefix == "" {
		return "", false
	}
	t, ok := strings.CutPrefix(role, prefix)
	if !ok || !envelope.ValidTenant(t) {
		return "", false
	}
	if again, err := a.Roles.TenantRole(t); err != nil || again != role {
		return "", false
	}
	return t, true
}

// roleOf returns the role name and account of a role session's ARN
// (arn:<partition>:sts::<account>:assumed-role/<name>/<session>) or a
// role's ARN (arn:<partition>:iam::<account>:role/<path/><name>). IAM
// users, the root user, federated users and anything else are refused.
func roleOf(arn string) (role, account string, err error) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || !strings.HasPrefix(parts[1], "aws") || parts[3] != "" {
		return "", "", fmt.Errorf("not an IAM ARN")
	}
	account, res := parts[4], parts[5]
	if len(account) != 12 || strings.Trim(account, "0123456789") != "" {
		return "", "", fmt.Errorf("the account %.20q is not 12 digits", account)
	}
	switch {
	case parts[2] == "sts" && strings.HasPrefix(res, "assumed-role/"):
		name, session, ok := strings.Cut(strings.TrimPrefix(res, "assumed-role/"), "/")
		if !ok || name == "" || session == "" || strings.Contains(session, "/") {
			return "", "", fmt.Errorf("a malformed role session")
		}
		return name, account, nil
	case parts[2] == "iam" && strings.HasPrefix(res, "role/"):
		path := strings.TrimPrefix(res, "role/")
		name := path[strings.LastIndexByte(path, '/')+1:]
		if name == "" {
			return "", "", fmt.Errorf("a role ARN without a name")
		}
		return name, account, nil
	}
	return "", "", fmt.Errorf("not a role session: users, the root user and federated users are not mapped")
}
