// Package ingresscred finds the ingress credentials a producer signs
// PutEvents with (SigV4) when it talks to a local `snavio dispatch serve`,
// and reads and writes them in the AWS shared-credentials format, so the
// same file serves snavio, the AWS CLI and any AWS SDK
// (AWS_SHARED_CREDENTIALS_FILE).
//
// Precedence, first match wins (docs/security/ingress-auth.md):
//
//  1. a file given on the command line (send --credentials-file)
//  2. AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, both set
//  3. the profile's credentials_file (or SNAVIO_CREDENTIALS_FILE)
//  4. <data_dir>/<tenant>.credentials, which `dispatch serve --demo` writes
//
// In a file, the section named after the tenant is used if present, else
// [default].
package ingresscred

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Key is an access key id and its secret.
type Key struct {
	AccessKeyID     string
	SecretAccessKey string
}

// Environment variables of the AWS SDKs and CLI.
const (
	EnvAccessKeyID     = "AWS_ACCESS_KEY_ID"
	EnvSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
)

// DefaultSection is the section AWS tools read when no profile is named.
const DefaultSection = "default"

// FileSuffix names the default credentials file of a tenant in a data
// directory: <tenant>.credentials.
const FileSuffix = ".credentials"

// DefaultFile returns <dataDir>/<tenant>.credentials.
func DefaultFile(dataDir, tenant string) string {
	return filepath.Join(dataDir, tenant+FileSuffix)
}

// maxFileBytes bounds a credentials file read.
const maxFileBytes = 1 << 20

// Parse reads an AWS shared-credentials file: [section] headers, key = value
// lines, '#' and ';' comments. It returns each section's access key id and
// secret (sections without both are left out) and refuses what is not in
// that shape, naming the line.
func Parse(b []byte) (map[string]Key, error) {
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("%d bytes, more than a credentials file holds (%d)", len(b), maxFileBytes)
	}
	out := map[string]Key{}
	partial := map[string]Key{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxFileBytes)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			if !strings.HasSuffix(line, "]") {
				return nil, fmt.Errorf("line %d: a section header is [name]", n)
			}
			section = strings.TrimSpace(line[1 : len(line)-1])
			section = strings.TrimSpace(strings.TrimPrefix(section, "profile "))
			if section == "" {
				return nil, fmt.Errorf("line %d: the section has no name", n)
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: want key = value", n)
		}
		if section == "" {
			return nil, fmt.Errorf("line %d: a key before any [section]", n)
		}
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		cur := partial[section]
		switch k {
		case "aws_access_key_id":
			cur.AccessKeyID = v
		case "aws_secret_access_key":
			cur.SecretAccessKey = v
		}
		partial[section] = cur
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for s, k := range partial {
		if k.AccessKeyID != "" && k.SecretAccessKey != "" {
			out[s] = k
		}
	}
	return out, nil
}

// Format renders k as a one-section credentials file.
func Format(section string, k Key) []byte {
	return []byte(fmt.Sprintf("[%s]\naws_access_key_id = %s\naws_secret_access_key = %s\n", section, k.AccessKeyID, k.SecretAccessKey))
}

// ReadFile reads the key for tenant from the credentials file at path: its
// [tenant] section, else [default]. The file must not be readable by group
// or others.
func ReadFile(path, tenant string) (Key, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Key{}, err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return Key{}, fmt.Errorf("credentials file %s has mode %04o, readable by others; run: chmod 600 %s", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Key{}, err
	}
	keys, err := Parse(b)
	if err != nil {
		return Key{}, fmt.Errorf("credentials file %s: %w; it should hold [default] with aws_access_key_id and aws_secret_access_key", path, err)
	}
	if k, ok := keys[tenant]; ok && tenant != "" {
		return k, nil
	}
	if k, ok := keys[DefaultSection]; ok {
		return k, nil
	}
	return Key{}, fmt.Errorf("credentials file %s has no [%s] or [%s] section with aws_access_key_id and aws_secret_access_key; create one with `snavio tenant credentials create --tenant %s --credentials-file FILE`", path, tenant, DefaultSection, tenant)
}

// Input are the places Resolve looks, in precedence order.
type Input struct {
	// Tenant is the tenant of the source being sent.
	Tenant string
	// FlagFile is a file given on the command line.
	FlagFile string
	// Getenv reads the environment.
	Getenv func(string) string
	// ProfileFile is the profile's credentials_file (or
	// SNAVIO_CREDENTIALS_FILE), and ProfileOrigin where it came from.
	ProfileFile string
	// DataDir is the local profile's data directory.
	DataDir string
}

// constError is a constant error, so the sentinel needs no variable.
type constError string

func (e constError) Error() string { return string(e) }

// errNone is wrapped when no source has credentials.
const errNone = constError("no ingress credentials")

// IsNone reports whether err says no credentials were found anywhere.
func IsNone(err error) bool { return errors.Is(err, errNone) }

// Resolve finds the key to sign with and says where it came from.
func Resolve(in Input) (Key, string, error) {
	if in.FlagFile != "" {
		k, err := ReadFile(in.FlagFile, in.Tenant)
		if err != nil {
			return Key{}, "", fmt.Errorf("--credentials-file: %w", err)
		}
		return k, "--credentials-file " + in.FlagFile, nil
	}
	getenv := in.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	id, secret := strings.TrimSpace(getenv(EnvAccessKeyID)), strings.TrimSpace(getenv(EnvSecretAccessKey))
	switch {
	case id != "" && secret != "":
		return Key{AccessKeyID: id, SecretAccessKey: secret}, EnvAccessKeyID, nil
	case id != "" || secret != "":
		return Key{}, "", fmt.Errorf("only one of %s and %s is set; set both (from `snavio tenant credentials create`), or neither to use a credentials file", EnvAccessKeyID, EnvSecretAccessKey)
	}
	if in.ProfileFile != "" {
		k, err := ReadFile(in.ProfileFile, in.Tenant)
		if err != nil {
			return Key{}, "", fmt.Errorf("the profile's credentials_file: %w", err)
		}
		return k, "credentials_file " + in.ProfileFile, nil
	}
	if in.DataDir != "" && in.Tenant != "" {
		p := DefaultFile(in.DataDir, in.Tenant)
		k, err := ReadFile(p, in.Tenant)
		if err == nil {
			return k, p, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return Key{}, "", err
		}
	}
	return Key{}, "", fmt.Errorf("%w for tenant %q: set %s and %s, pass --credentials-file FILE, or set the profile's credentials_file (create them with `snavio tenant credentials create --tenant %s --credentials-file FILE`)",
		errNone, in.Tenant, EnvAccessKeyID, EnvSecretAccessKey, in.Tenant)
}

// Sign signs req, whose body is body, as an EventBridge client does
// (SigV4 for service "events" in region, at t), with the AWS SDK's own
// signer: for tools and tests that build PutEvents requests by hand.
func Sign(req *http.Request, body []byte, k Key, region string, at time.Time) error {
	sum := sha256.Sum256(body)
	return v4.NewSigner().SignHTTP(req.Context(), aws.Credentials{AccessKeyID: k.AccessKeyID, SecretAccessKey: k.SecretAccessKey},
		req, hex.EncodeToString(sum[:]), SigningService, region, at)
}

// SigningService is the SigV4 service name of EventBridge.
const SigningService = "events"
