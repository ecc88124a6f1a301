package devserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/snavio/snavio/internal/atomicfile"
	"github.com/snavio/snavio/internal/ingresscred"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// The demo: one producing service, two routes (one with strict dedupe),
// their queues and DLQs, the ACLs, and the service's key written to a
// 0600 key file that `snavio send --secret-file` reads.
const (
	DemoSource        = "demo/app"
	DemoTarget        = "orders"
	DemoCommand       = "create"
	DemoStrictCommand = "charge"
	DemoQueue         = "demo-orders"
	DemoDLQ           = "demo-orders-dlq"
	DemoKeyFile       = "demo-app.key"
	DemoTenant        = "demo"
	demoKeyVersion    = "hmac-v1"
)

// DemoInfo says what --demo seeded and how to try it.
type DemoInfo struct {
	Source  string `json:"source"`
	Target  string `json:"target"`
	Command string `json:"command"`
	Strict  string `json:"strict_command"`
	Queue   string `json:"queue"`
	DLQ     string `json:"dlq"`
	KeyFile string `json:"key_file"`
	// CredentialsFile holds the demo tenant's ingress credentials (AWS
	// shared-credentials format); AccessKeyID is the key in it.
	CredentialsFile string `json:"credentials_file"`
	AccessKeyID     string `json:"access_key_id"`
	TryAWSCLI       string `json:"try_aws_cli"`
	TrySend         string `json:"try_send"`
	TryTail         string `json:"try_tail"`
	TryQueue        string `json:"try_receive"`
	Reseeded        bool   `json:"reseeded"`
	RateLimit       string `json:"rate_limit"`
}

// demoKey is the key file format `snavio key create -o json` prints.
type demoKey struct {
	Source    string `json:"source"`
	VersionID string `json:"version_id"`
	Secret    []byte `json:"secret"`
}

// seedDemo registers the demo items that are missing, so restarting with
// --demo keeps what an earlier start seeded (and the key file stays
// valid).
func seedDemo(ctx context.Context, st *embedded.Store, dataDir string, clk clock.Clock) (*DemoInfo, error) {
	dlq, err := st.CreateQueue(ctx, localqueue.QueueConfig{Name: DemoDLQ})
	if err != nil {
		return nil, err
	}
	q, err := st.CreateQueue(ctx, localqueue.QueueConfig{Name: DemoQueue, DeadLetterQueue: DemoDLQ, MaxReceives: 5})
	if err != nil {
		return nil, err
	}
	reg := st.Registry()
	by := registry.Actor{Who: "snavio dispatch serve --demo", At: clk.Now()}
	now := clk.Now()
	rate := registry.RateLimit{Max: 100, IntervalSeconds: 1, Burst: 20}
	info := &DemoInfo{Source: DemoSource, Target: DemoTarget, Command: DemoCommand, Strict: DemoStrictCommand,
		Queue: DemoQueue, DLQ: DemoDLQ, KeyFile: filepath.Join(dataDir, DemoKeyFile), RateLimit: "100/s"}

	keyID := registry.KeyID(DemoSource)
	var key demoKey
	switch it, err := reg.Get(ctx, keyID, now); {
	case err == nil:
		// Seeded before: keep the key, rewrite the key file if it is gone.
		v := it.Key.Versions[len(it.Key.Versions)-1]
		key = demoKey{Source: DemoSource, VersionID: v.ID, Secret: v.Secret}
		info.Reseeded = true
	case errors.Is(err, registry.ErrNotFound):
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
		key = demoKey{Source: DemoSource, VersionID: demoKeyVersion, Secret: secret}
		k := registry.ServiceKey{Source: DemoSource, Versions: []registry.KeyVersion{{ID: demoKeyVersion, Secret: secret, ActivatedAt: now}}}
		if _, err := reg.Put(ctx, by, registry.Item{Key: &k}); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	for _, r := range []registry.Route{
		{Target: DemoTarget, Command: DemoCommand, QueueARN: q.ARN, DLQARN: dlq.ARN, Profile: registry.ProfileModerate, RateLimit: rate},
		{Target: DemoTarget, Command: DemoStrictCommand, QueueARN: q.ARN, DLQARN: dlq.ARN, Profile: registry.ProfileCritical, DedupeMode: registry.DedupeStrict, RateLimit: rate},
	} {
		if err := putIfMissing(ctx, reg, by, registry.Item{Route: &r}); err != nil {
			return nil, err
		}
		acl := registry.ACL{Source: DemoSource, Target: r.Target, Command: r.Command, Allow: true, Profile: r.Profile}
		if err := putIfMissing(ctx, reg, by, registry.Item{ACL: &acl}); err != nil {
			return nil, err
		}
	}
	b, err := json.MarshalIndent(key, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(info.KeyFile, append(b, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("writing the demo key file: %w", err)
	}
	info.TrySend = fmt.Sprintf("snavio send --source %s --target %s --command %s --payload '{\"sku\":\"A-1\",\"qty\":2}' --secret-file %s --wait",
		DemoSource, DemoTarget, DemoCommand, info.KeyFile)
	info.TryTail = "snavio tail --tenant demo"
	info.TryQueue = "snavio queue receive " + DemoQueue
	return info, nil
}

func putIfMissing(ctx context.Context, reg *embedded.Registry, by registry.Actor, it registry.Item) error {
	_, err := reg.Put(ctx, by, it)
	if errors.Is(err, registry.ErrConflict) {
		return nil // seeded by an earlier start (version 0 = create only)
	}
	return err
}

// seedDemoCredentials keeps the demo tenant's ingress credentials in
// <data dir>/demo.credentials, where `snavio send` finds them: the ones an
// earlier start wrote if the server still knows them, else new ones.
func seedDemoCredentials(info *DemoInfo, creds *server.FileCredentialStore, dataDir string) error {
	path := ingresscred.DefaultFile(dataDir, DemoTenant)
	info.CredentialsFile = path
	if k, err := ingresscred.ReadFile(path, DemoTenant); err == nil {
		if tenant, secret, ok := creds.Lookup(k.AccessKeyID); ok && tenant == DemoTenant && secret == k.SecretAccessKey {
			info.AccessKeyID = k.AccessKeyID
			info.TryAWSCLI = tryAWSCLI(path)
			return nil
		}
	}
	c, err := creds.Create(DemoTenant)
	if err != nil {
		return err
	}
	k := ingresscred.Key{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.Secret}
	if err := atomicfile.Write(path, ingresscred.Format(ingresscred.DefaultSection, k), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	info.AccessKeyID = c.AccessKeyID
	info.TryAWSCLI = tryAWSCLI(path)
	return nil
}

func tryAWSCLI(path string) string {
	return fmt.Sprintf(`AWS_SHARED_CREDENTIALS_FILE=%s aws events put-events --region us-east-1 --endpoint-url $SNAVIO_ENDPOINT_URL --entries '[{"Source":"%s","DetailType":"snavio.command-sent","Detail":"{}"}]'`, path, DemoSource)
}
