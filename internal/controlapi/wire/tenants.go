package wire

import (
	"fmt"
	"strings"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/envelope"
)

// CheckTenant validates a tenant id given as input (named by what, such as
// "--tenant"), with the fix in the error.
func CheckTenant(what, tenant string) error {
	if tenant == "" {
		return fmt.Errorf("%s is empty: name the tenant, the part of its sources before '/' (demo for demo/app)", what)
	}
	if !envelope.ValidTenant(tenant) {
		return fmt.Errorf("%s %q is not a tenant id: use "+envelope.TenantRule+" (the part of a source before '/')", what, tenant)
	}
	return nil
}

// Tenant tokens (/v1/tokens).
const (
	// TokenIDPrefix starts every token id.
	TokenIDPrefix = "tok_"
	// TokenIDHexLen is the number of hex digits after the prefix.
	TokenIDHexLen = 12
	// TokenNotice goes with an issued token.
	TokenNotice = "this token is shown once and never again: hand it to the tenant now (it goes in SNAVIO_TOKEN); revoke it with `snavio token revoke ID`"
)

// CheckTokenID validates a token id given as input (named by what).
func CheckTokenID(what, id string) error {
	hexPart, ok := strings.CutPrefix(id, TokenIDPrefix)
	if !ok || len(hexPart) != TokenIDHexLen || strings.Trim(hexPart, "0123456789abcdef") != "" {
		return fmt.Errorf("%s %q is not a token id: ids are %s followed by %d lowercase hex digits; list them with `snavio token list`", what, id, TokenIDPrefix, TokenIDHexLen)
	}
	return nil
}

// TokenIssueRequest is the body of POST /v1/tokens.
type TokenIssueRequest struct {
	// Tenant is the one tenant the token acts as: the part of a bus
	// source before '/'.
	Tenant string `json:"tenant"`
}

// Token is an issued token as listed: never the secret, nor its digest.
type Token struct {
	ID      string    `json:"id"`
	Tenant  string    `json:"tenant"`
	Created time.Time `json:"created"`
}

// TokenIssued is the answer of POST /v1/tokens: the only answer that
// carries a token.
type TokenIssued struct {
	Token
	// Secret is the bearer token itself.
	Secret string `json:"token"`
	Notice string `json:"notice"`
}

// TokenList is the answer of GET /v1/tokens.
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

// TokenRevoked is the answer of DELETE /v1/tokens/{id}.
type TokenRevoked struct {
	Token
	Revoked bool `json:"revoked"`
}

// Ingress credentials (/v1/credentials).
const (
	// AccessKeyIDPrefix starts every ingress access key id.
	AccessKeyIDPrefix = "SNVK"
	// AccessKeyIDRandLen is the number of base32 characters after it.
	AccessKeyIDRandLen = 16
	// CredentialNotice goes with a created credential.
	CredentialNotice = "the secret access key is shown once and never again: give it to the tenant's producers now (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY); revoke it with `snavio tenant credentials revoke ACCESS_KEY_ID`"
)

// ValidAccessKeyID reports whether s is an ingress access key id:
// AccessKeyIDPrefix and AccessKeyIDRandLen characters of A-Z and 2-7.
func ValidAccessKeyID(s string) bool {
	rest, ok := strings.CutPrefix(s, AccessKeyIDPrefix)
	if !ok || len(rest) != AccessKeyIDRandLen {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// CheckAccessKeyID validates an access key id given as input (named by
// what).
func CheckAccessKeyID(what, id string) error {
	if !ValidAccessKeyID(id) {
		return fmt.Errorf("%s %q is not an ingress access key id: ids are %s followed by 16 characters of A-Z and 2-7; list them with `snavio tenant credentials list`", what, id, AccessKeyIDPrefix)
	}
	return nil
}

// CredentialCreateRequest is the body of POST /v1/credentials.
type CredentialCreateRequest struct {
	// Tenant is the tenant whose sources the credential may put.
	Tenant string `json:"tenant"`
}

// Credential is a credential as listed: never the secret.
type Credential struct {
	AccessKeyID string    `json:"access_key_id"`
	Tenant      string    `json:"tenant"`
	Created     time.Time `json:"created"`
}

// CredentialCreated is the answer of POST /v1/credentials: the only answer
// that carries a secret.
type CredentialCreated struct {
	Credential
	SecretAccessKey string `json:"secret_access_key"`
	Notice          string `json:"notice"`
}

// CredentialList is the answer of GET /v1/credentials.
type CredentialList struct {
	Credentials []Credential `json:"credentials"`
}

// CredentialRevoked is the answer of DELETE /v1/credentials/{id}.
type CredentialRevoked struct {
	Credential
	Revoked bool `json:"revoked"`
}

// DeliveryKey is the answer of GET /v1/delivery-keys/{target}: what a
// target's consumer needs to verify its messages.
type DeliveryKey struct {
	Target string `json:"target"`
	// KeyID is the value of the snavio.signature_key attribute the
	// target's messages carry.
	KeyID string `json:"key_id"`
	// Key is the HMAC-SHA256 key, base64url without padding.
	Key    string `json:"key"`
	Scheme string `json:"scheme"`
	// Routes counts the routes delivering to the target.
	Routes int `json:"routes"`
}

// ExplainRequest is the body of POST /v1/explain: the bus source and the
// event detail (the signed envelope) exactly as they would be put on the
// bus.
type ExplainRequest struct {
	Source string `json:"source"`
	Detail string `json:"detail"`
}
