package send

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	keycmd "github.com/snavio/snavio/internal/cli/key"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

// Environment variables of the signing key.
const (
	// SecretEnv holds a key's secret in base64.
	SecretEnv = "SNAVIO_SECRET"
	// KeyVersionEnv names the version of SecretEnv's key (e.g. hmac-v1).
	KeyVersionEnv = "SNAVIO_KEY_VERSION"
)

// maxPayloadBytes bounds a payload read from a file or standard input:
// the bus refuses events over 256 KiB, the envelope included.
const maxPayloadBytes = envelope.DefaultMaxBytes

// maxSecretFileBytes bounds a --secret-file (a tenant config lists every
// service of a tenant, each with up to three versions).
const maxSecretFileBytes = 4 << 20

// Built is a signed command ready to put on the bus.
type Built struct {
	Envelope envelope.Envelope
	// Detail is the envelope's wire form: the EventBridge event detail.
	Detail []byte
}

// Build returns the signed envelope of a command from source, made at now
// and signed with key: the producer code path, the one the replayer uses
// and the dispatcher verifies. id "" means a new random UUID. The result is
// checked with the dispatcher's own parser, so a command the dispatcher
// would refuse for its shape or size is refused here with the same reason.
func Build(source, target, command, id string, payload []byte, key *signing.Key, now time.Time) (Built, error) {
	v := jsontext.Value(append([]byte(nil), payload...))
	if err := v.Canonicalize(); err != nil {
		return Built{}, cmdutil.Usagef("--payload is not valid JSON: %s; give a JSON value such as '{\"order\":\"o-42\"}'", strings.TrimPrefix(err.Error(), "jsontext: "))
	}
	if id == "" {
		var err error
		if id, err = newUUID(); err != nil {
			return Built{}, err
		}
	}
	env := envelope.New(strings.ToLower(id), now, target, command, v)
	if err := key.SignEnvelope(&env, source); err != nil {
		return Built{}, fmt.Errorf("signing the command: %w", err)
	}
	detail, err := env.AppendJSON(nil)
	if err != nil {
		return Built{}, fmt.Errorf("encoding the command: %w", err)
	}
	if _, _, err := envelope.NewParser(envelope.Limits{}).Parse(detail, nil); err != nil {
		return Built{}, cmdutil.Usagef("the dispatcher would reject this command: %v", err)
	}
	return Built{Envelope: env, Detail: detail}, nil
}

// newUUID returns a random (version 4) UUID in lowercase.
func newUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating a command id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// ReadPayload returns the payload that --payload names: the JSON itself,
// @FILE, or @- (or -) for standard input.
func ReadPayload(arg string, stdin io.Reader) ([]byte, error) {
	switch {
	case arg == "-" || arg == "@-":
		b, err := io.ReadAll(io.LimitReader(stdin, maxPayloadBytes+1))
		if err != nil {
			return nil, fmt.Errorf("reading the payload from standard input: %w", err)
		}
		if len(b) > maxPayloadBytes {
			return nil, cmdutil.Usagef("the payload on standard input is over 256 KiB, the bus's limit for a whole event; send a reference to the data instead")
		}
		return b, nil
	case strings.HasPrefix(arg, "@"):
		path := arg[1:]
		if path == "" {
			return nil, cmdutil.Usagef("--payload @ names no file: give @FILE, or @- for standard input")
		}
		b, err := readBounded(path, maxPayloadBytes)
		if err != nil {
			return nil, cmdutil.Usagef("--payload %s: %v", arg, err)
		}
		return b, nil
	default:
		return []byte(arg), nil
	}
}

// readBounded reads a regular file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, plainPathError(err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, errors.New("is a directory; give a file")
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, plainPathError(err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("is over %d KiB", limit>>10)
	}
	return b, nil
}

// plainPathError drops the path an *fs.PathError repeats (the caller names
// the input already).
func plainPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// KeySource says where a signing key came from (printed with -v, never the
// secret).
type KeySource string

// Key sources, in the order they are tried.
const (
	FromSecretFile   KeySource = "secret-file"
	FromEnv          KeySource = "env"
	FromTenantConfig KeySource = "tenant-config"
)

// KeyFromFile reads the signing key of source from a --secret-file: a
// tenant-config document (`snavio tenant-config -o json`) or a key file
// ({"source","version_id","secret"} with the secret in base64, as `snavio
// key create -o json` prints it). version, when set, picks that version
// from a tenant config; otherwise the one to sign with at now. The file
// must not be readable by group or others.
func KeyFromFile(path, source, version string, now time.Time) (*signing.Key, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, cmdutil.Usagef("--secret-file %s: %v", path, plainPathError(err))
	}
	if fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("--secret-file %s is readable by others (mode %v): run chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := readBounded(path, maxSecretFileBytes)
	if err != nil {
		return nil, cmdutil.Usagef("--secret-file %s: %v", path, err)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, cmdutil.Usagef("--secret-file %s is not a JSON object: use the output of `snavio tenant-config -o json` or `snavio key create -o json`", path)
	}
	if _, ok := probe["services"]; ok {
		tc, err := keys.ParseTenantConfig(b)
		if err != nil {
			return nil, cmdutil.Usagef("--secret-file %s: %v", path, err)
		}
		return KeyFromTenantConfig(&tc, source, version, now, "--secret-file "+path)
	}
	// The key file is exactly what `snavio key create -o json` prints, so it
	// is decoded into that type: a field added there cannot break this.
	var kf keycmd.Secret
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&kf); err != nil || kf.VersionID == "" || len(kf.Secret) == 0 {
		return nil, cmdutil.Usagef("--secret-file %s: want a key {\"source\",\"version_id\",\"secret\"} (secret in base64) or a tenant config", path)
	}
	if kf.Source != "" && kf.Source != source {
		return nil, cmdutil.Usagef("--secret-file %s holds the key of %s, not of --source %s", path, kf.Source, source)
	}
	if version != "" && version != kf.VersionID {
		return nil, cmdutil.Usagef("--secret-file %s holds key version %s, not --key-version %s", path, kf.VersionID, version)
	}
	return newKey(kf.VersionID, kf.Secret, "--secret-file "+path)
}

// KeyFromTenantConfig picks source's key from a tenant config: version if
// set (current, previous or next), else the one to sign with at now.
func KeyFromTenantConfig(tc *keys.TenantConfig, source, version string, now time.Time, origin string) (*signing.Key, error) {
	if version == "" {
		k, err := tc.SigningKey(source, now)
		if err != nil {
			return nil, fmt.Errorf("%s: %s", origin, strings.TrimPrefix(err.Error(), "keys: "))
		}
		return k, nil
	}
	for _, s := range tc.Services {
		if s.Source != source {
			continue
		}
		var have []string
		for _, ki := range []*keys.KeyInfo{s.Current, s.Previous, s.Next} {
			if ki == nil {
				continue
			}
			if ki.VersionID == version {
				return newKey(ki.VersionID, ki.Secret, origin)
			}
			have = append(have, ki.VersionID)
		}
		return nil, cmdutil.Usagef("%s has no key version %s for %s (it has %s)", origin, version, source, strings.Join(have, ", "))
	}
	return nil, fmt.Errorf("%s: tenant %s has no keys for %s; create them with `snavio key create --service %s` or check --source", origin, tc.Tenant, source, source)
}

// KeyFromEnv reads the key from SNAVIO_SECRET (base64) and its version
// from version or SNAVIO_KEY_VERSION. ok is false when SNAVIO_SECRET is
// not set.
func KeyFromEnv(getenv func(string) string, version string) (k *signing.Key, ok bool, err error) {
	s := strings.TrimSpace(getenv(SecretEnv))
	if s == "" {
		return nil, false, nil
	}
	secret, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, true, cmdutil.Usagef("%s is not base64 (%v): give the secret as `snavio key create` prints it", SecretEnv, err)
	}
	if version == "" {
		version = strings.TrimSpace(getenv(KeyVersionEnv))
	}
	if version == "" {
		return nil, true, cmdutil.Usagef("%s needs its key version: set %s or --key-version (e.g. hmac-v1)", SecretEnv, KeyVersionEnv)
	}
	k, err = newKey(version, secret, SecretEnv)
	return k, true, err
}

func newKey(version string, secret []byte, origin string) (*signing.Key, error) {
	k, err := signing.NewKey(version, secret)
	if err != nil {
		return nil, cmdutil.Usagef("%s: signing key %s: %s", origin, version, strings.TrimPrefix(err.Error(), "signing: "))
	}
	return k, nil
}
