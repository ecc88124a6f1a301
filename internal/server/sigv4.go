package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/snavio/snavio/internal/ingresscred"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// Whole-request authentication failures, with the codes AWS JSON services
// answer (docs/security/ingress-auth.md has the mapping).
const (
	ErrCodeMissingAuthToken    = "MissingAuthenticationTokenException"
	ErrCodeIncompleteSignature = "IncompleteSignatureException"
	ErrCodeUnrecognizedClient  = "UnrecognizedClientException"
	ErrCodeInvalidSignature    = "InvalidSignatureException"
)

// SigV4 constants of the ingress.
const (
	// DefaultMaxSkew is how far X-Amz-Date may be from the server's clock,
	// as on AWS.
	DefaultMaxSkew = 5 * time.Minute

	sigV4Algorithm = "AWS4-HMAC-SHA256"
	amzDateFormat  = "20060102T150405Z"
	scopeDateLen   = 8
	signatureLen   = 64
	maxSignedHdrs  = 32
)

// CredentialLookup resolves an access key id to its tenant and secret. It
// must be safe for concurrent use and fast: the ingress calls it on every
// PutEvents.
type CredentialLookup interface {
	Lookup(accessKeyID string) (tenant, secret string, ok bool)
}

// Caller is who signed a PutEvents request.
type Caller struct {
	AccessKeyID string
	Tenant      string
}

// SigV4Verifier checks the AWS Signature Version 4 of PutEvents requests
// against the ingress credentials. It does not implement the algorithm: it
// rebuilds the canonical request from what was received (the signed
// headers only, the body's SHA-256, the credential scope and X-Amz-Date),
// signs it with the AWS SDK's own signer and compares the signatures in
// constant time.
type SigV4Verifier struct {
	creds   CredentialLookup
	clock   clock.Clock
	maxSkew time.Duration
	signer  *v4.Signer
	service string // the SigV4 service name signatures must be scoped to
}

// NewSigV4Verifier returns a verifier. maxSkew 0 means DefaultMaxSkew.
func NewSigV4Verifier(creds CredentialLookup, clk clock.Clock, maxSkew time.Duration) (*SigV4Verifier, error) {
	switch {
	case creds == nil:
		return nil, errors.New("server: NewSigV4Verifier needs the credential store; pass the server's FileCredentialStore")
	case clk == nil:
		return nil, errors.New("server: NewSigV4Verifier needs a clock; pass clock.System()")
	case maxSkew < 0:
		return nil, fmt.Errorf("server: SigV4 clock skew %v is negative; pass 0 for the default %v", maxSkew, DefaultMaxSkew)
	case maxSkew == 0:
		maxSkew = DefaultMaxSkew
	}
	return &SigV4Verifier{creds: creds, clock: clk, maxSkew: maxSkew, signer: v4.NewSigner(), service: ingresscred.SigningService}, nil
}

// ForService returns a verifier like v for requests signed for another
// AWS service, such as "sqs" for the SQS API of the local queues.
func (v *SigV4Verifier) ForService(service string) *SigV4Verifier {
	c := *v
	c.service = service
	return &c
}

// sigV4Header is a parsed Authorization header.
type sigV4Header struct {
	accessKeyID, date, region, service string
	signedHeaders                      string
	signature                          string
}

func incomplete(msg string) *awsError {
	return &awsError{Status: http.StatusBadRequest, Type: ErrCodeIncompleteSignature, Reason: "incomplete_signature", Message: msg}
}

func invalidSignature(reason, msg string) *awsError {
	return &awsError{Status: http.StatusBadRequest, Type: ErrCodeInvalidSignature, Reason: reason, Message: msg}
}

// parseSigV4Header parses `AWS4-HMAC-SHA256 Credential=AKID/DATE/REGION/
// SERVICE/aws4_request, SignedHeaders=a;b, Signature=HEX`.
func parseSigV4Header(h string) (sigV4Header, *awsError) {
	var out sigV4Header
	rest, ok := strings.CutPrefix(h, sigV4Algorithm+" ")
	if !ok {
		alg, _, _ := strings.Cut(h, " ")
		return out, incomplete(fmt.Sprintf("Authorization header requires the %s algorithm, not %q; sign with SigV4 (any AWS SDK or the AWS CLI does)", sigV4Algorithm, truncate(alg, 40)))
	}
	var cred string
	var haveCred, haveSH, haveSig bool
	for _, part := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return out, incomplete(fmt.Sprintf("Authorization header has a malformed part %q; it needs Credential=, SignedHeaders= and Signature=", truncate(part, 40)))
		}
		switch k {
		case "Credential":
			cred, haveCred = v, !haveCred
		case "SignedHeaders":
			out.signedHeaders, haveSH = v, !haveSH
		case "Signature":
			out.signature, haveSig = v, !haveSig
		default:
			return out, incomplete(fmt.Sprintf("Authorization header has an unknown part %q; it takes Credential=, SignedHeaders= and Signature= once each", truncate(k, 40)))
		}
	}
	switch {
	case !haveCred:
		return out, incomplete("Authorization header requires 'Credential' parameter (once).")
	case !haveSH:
		return out, incomplete("Authorization header requires 'SignedHeaders' parameter (once).")
	case !haveSig:
		return out, incomplete("Authorization header requires 'Signature' parameter (once).")
	}
	scope := strings.Split(cred, "/")
	if len(scope) != 5 || scope[0] == "" || scope[2] == "" || scope[3] == "" {
		return out, incomplete("Credential must be ACCESS_KEY_ID/YYYYMMDD/REGION/SERVICE/aws4_request, not " + truncate(cred, 120))
	}
	if scope[4] != "aws4_request" {
		return out, invalidSignature("bad_scope", fmt.Sprintf("Credential should be scoped with a valid terminator: 'aws4_request', not '%s'.", truncate(scope[4], 40)))
	}
	out.accessKeyID, out.date, out.region, out.service = scope[0], scope[1], scope[2], scope[3]
	if len(out.signature) != signatureLen || strings.Trim(out.signature, "0123456789abcdef") != "" {
		return out, incomplete("Signature must be 64 lowercase hex digits")
	}
	names := strings.Split(out.signedHeaders, ";")
	if len(names) > maxSignedHdrs {
		return out, incomplete(fmt.Sprintf("SignedHeaders lists %d headers, more than this ingress reads (%d)", len(names), maxSignedHdrs))
	}
	for i, n := range names {
		if n == "" || n != strings.ToLower(n) || (i > 0 && names[i-1] >= n) {
			return out, incomplete("SignedHeaders must be lowercase header names, sorted, separated by ';', not " + truncate(out.signedHeaders, 120))
		}
	}
	return out, nil
}

// Verify checks r's SigV4 signature over body and returns who signed it,
// or the AWS error to answer with (and, once the Authorization header
// parses, the access key id it names, and its tenant if known).
func (v *SigV4Verifier) Verify(r *http.Request, body []byte) (Caller, *awsError) {
	auth := r.Header.Values("Authorization")
	if len(auth) == 0 {
		if q := r.URL.Query(); q.Has("X-Amz-Signature") || q.Has("X-Amz-Credential") {
			return Caller{}, incomplete("presigned URLs are not accepted here; sign PutEvents with an Authorization header (any AWS SDK or the AWS CLI does)")
		}
		return Caller{}, &awsError{Status: http.StatusForbidden, Type: ErrCodeMissingAuthToken, Reason: "unauthenticated",
			Message: "Missing Authentication Token: sign PutEvents with SigV4 using the tenant's ingress credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; create them with `snavio tenant credentials create`)"}
	}
	if len(auth) > 1 {
		return Caller{}, incomplete("the request has more than one Authorization header; send one")
	}
	h, aerr := parseSigV4Header(auth[0])
	if aerr != nil {
		return Caller{}, aerr
	}
	// Refusals from here on name the key that was tried, for the reports.
	who := Caller{AccessKeyID: h.accessKeyID}
	dates := r.Header.Values("X-Amz-Date")
	if len(dates) != 1 {
		return who, incomplete("Authorization header requires existence of a 'X-Amz-Date' header (exactly one); this ingress takes the signing time from it")
	}
	at, err := time.Parse(amzDateFormat, dates[0])
	if err != nil {
		return who, incomplete(fmt.Sprintf("X-Amz-Date %q is not an ISO 8601 basic date-time such as 20260102T150405Z", truncate(dates[0], 40)))
	}
	if h.date != dates[0][:scopeDateLen] {
		return who, invalidSignature("bad_scope", fmt.Sprintf("Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '%s' != '%s', from '%s'.", truncate(h.date, 16), dates[0][:scopeDateLen], dates[0]))
	}
	if h.service != v.service {
		return who, invalidSignature("bad_scope", fmt.Sprintf("Credential should be scoped to correct service: '%s'.", v.service))
	}
	now := v.clock.Now().UTC()
	if at.Before(now.Add(-v.maxSkew)) {
		return who, invalidSignature("signature_expired", fmt.Sprintf("Signature expired: %s is now earlier than %s (%s - %d min.); check the client's clock",
			dates[0], now.Add(-v.maxSkew).Format(amzDateFormat), now.Format(amzDateFormat), int(v.maxSkew/time.Minute)))
	}
	if at.After(now.Add(v.maxSkew)) {
		return who, invalidSignature("signature_expired", fmt.Sprintf("Signature not yet current: %s is still later than %s (%s + %d min.); check the client's clock",
			dates[0], now.Add(v.maxSkew).Format(amzDateFormat), now.Format(amzDateFormat), int(v.maxSkew/time.Minute)))
	}
	tenant, secret, ok := v.creds.Lookup(h.accessKeyID)
	who.Tenant = tenant
	if !ok {
		return who, &awsError{Status: http.StatusBadRequest, Type: ErrCodeUnrecognizedClient, Reason: "unknown_access_key",
			Message: "The security token included in the request is invalid: no ingress credential has this access key id (it may be mistyped, revoked, or from another data directory)"}
	}
	sum := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(sum[:])
	if got := r.Header.Values("X-Amz-Content-Sha256"); len(got) > 1 || len(got) == 1 && got[0] != payloadHash {
		return who, invalidSignature("bad_signature", "The provided 'x-amz-content-sha256' header does not match what was computed; sign the SHA-256 of the body as sent")
	}
	want, aerr := v.expected(r, &h, secret, payloadHash, at)
	if aerr != nil {
		return who, aerr
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(h.signature)) != 1 {
		return who, invalidSignature("bad_signature", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
	}
	return Caller{AccessKeyID: h.accessKeyID, Tenant: tenant}, nil
}

// expected signs a copy of r holding only its signed parts with the SDK's
// signer and returns the signature it computed.
func (v *SigV4Verifier) expected(r *http.Request, h *sigV4Header, secret, payloadHash string, at time.Time) (string, *awsError) {
	c := &http.Request{
		Method: r.Method,
		URL:    &url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery},
		Host:   r.Host,
		Header: make(http.Header, 4),
	}
	var sawHost, sawDate bool
	for n := range strings.SplitSeq(h.signedHeaders, ";") {
		switch n {
		case "host":
			sawHost = true
			continue
		case "content-length":
			if r.ContentLength <= 0 {
				return "", invalidSignature("bad_signature", "content-length is signed but the request has no Content-Length; send the body with one")
			}
			c.ContentLength = r.ContentLength
			continue
		case "x-amz-date":
			sawDate = true
		case "authorization", "user-agent", "x-amzn-trace-id", "expect", "transfer-encoding":
			return "", invalidSignature("bad_signature", "the header "+n+" is signed; AWS signers never sign it, so this ingress cannot verify it: sign without it")
		}
		k := http.CanonicalHeaderKey(n)
		vals := r.Header.Values(k)
		if len(vals) == 0 {
			return "", invalidSignature("bad_signature", "the signed header "+truncate(n, 60)+" is not in the request; send every header listed in SignedHeaders")
		}
		c.Header[k] = vals
	}
	if !sawHost {
		return "", invalidSignature("bad_signature", "'Host' must be a 'SignedHeader' in the AWS Authorization.")
	}
	if !sawDate {
		return "", invalidSignature("bad_signature", "'X-Amz-Date' must be a 'SignedHeader' in the AWS Authorization.")
	}
	err := v.signer.SignHTTP(context.Background(), aws.Credentials{AccessKeyID: h.accessKeyID, SecretAccessKey: secret},
		c, payloadHash, h.service, h.region, at)
	if err != nil { // the SDK's signer fails only on a nil request
		return "", invalidSignature("bad_signature", "the signature could not be computed: "+err.Error())
	}
	got := c.Header.Get("Authorization")
	sh, sig := signedPart(got)
	if sh != h.signedHeaders {
		// The SDK signs a header set of its own choosing; if it differs
		// from the client's, the signatures cannot match.
		return "", invalidSignature("bad_signature", "The request signature we calculated does not match the signature you provided: the signed headers differ ("+truncate(h.signedHeaders, 120)+" sent, "+sh+" expected).")
	}
	return sig, nil
}

// signedPart returns the SignedHeaders and Signature of an Authorization
// header the SDK built.
func signedPart(auth string) (signedHeaders, signature string) {
	for _, p := range strings.Split(auth, ",") {
		p = strings.TrimSpace(p)
		if s, ok := strings.CutPrefix(p, "SignedHeaders="); ok {
			signedHeaders = s
		} else if s, ok := strings.CutPrefix(p, "Signature="); ok {
			signature = s
		}
	}
	return signedHeaders, signature
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
