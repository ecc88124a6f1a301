package dispatchcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/alerts"
	"github.com/snavio/snavio/internal/atomicfile"
	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/devserver"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/pkg/dispatch/shield"
)

// ServeOptions are the inputs of `snavio dispatch serve`.
type ServeOptions struct {
	DataDir            string
	Ephemeral          bool
	Listen             string
	Demo               bool
	ReadyFile          string
	SlowWorkers        int
	MemoryBudgetMiB    int
	Shadow             bool
	WebhookURL         string
	WebhookSecretFile  string
	TelemetryRetention time.Duration
	ArchiveRetention   time.Duration
	SnapshotInterval   time.Duration
	ShutdownTimeout    time.Duration
	SkewSampleRate     float64
	// Fsync is the flag as given: "always" or an interval; SyncEvery is
	// what validate made of it (0 for always).
	Fsync     string
	SyncEvery time.Duration

	// Email are the --alert-email-* flags; EmailConfig is what validate
	// made of them (nil: no email channel).
	Email       emailFlags
	EmailConfig *alerts.EmailConfig
	// AllowedHosts are the --allowed-host names.
	AllowedHosts []string
}

func newServeCmd(f *cmdutil.Factory, runF func(*ServeOptions) error) *cobra.Command {
	opts := &ServeOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run every dispatcher stage and job on this machine",
		Long: `Run the dispatcher locally: a PutEvents endpoint that the AWS SDK's
EventBridge client (and "snavio send") talks to by changing the endpoint,
the shield, fast and slow stages, local target queues with SQS semantics,
the telemetry outbox per tenant, the archive of accepted events, the
control API (/v1/), /metrics, /healthz and /readyz, and the background
jobs (snapshot generation, queue monitor, fairness rollups and auditor,
alert drain, retention purges).

State lives under the data directory (--data-dir, default the profile's
data_dir): the store file snavio.db and its write-ahead log snavio.db-wal/,
where every acknowledged write is synced before the acknowledgement (the
queues' messages live there; the rest is applied to the file in batches);
--ephemeral keeps it all in memory. The data directory also holds the
operator token (operator.token, 0600, made on first start), which local
profiles pick up, the snapshot signing key, and the delivery signing key
(delivery-signing.key, 0600) that every delivered message's signature
comes from (docs/security/delivery-signature.md).

--fsync chooses what a power loss can take. "always" (the default) syncs
the log (fdatasync) before any write is acknowledged: nothing acknowledged
is lost. Only a queue consumer's receive, delete or visibility change is
acknowledged once written and synced within 10ms: a power loss in between
delivers that message again (at least once, as SQS may). An interval, such
as 100ms, acknowledges every write once it is in the log file (in the OS's
page cache, which a killed or crashed server does not lose) and syncs
within the interval: a power loss or kernel crash can take the last
interval's writes, and nothing else. Where syncs are slow it carries about
1.5 times the commands a second (docs/store/embedded.md); /metrics shows
how long they take (snavio_store_log_sync_duration_seconds).

Every PutEvents must be signed (SigV4) with a tenant's ingress credentials
("snavio tenant credentials create"), and each entry's Source must be
<that tenant>/<service> (docs/security/ingress-auth.md). Requests whose
Host header is neither a loopback name, an IP address nor an
--allowed-host name are refused (421), so a web page cannot reach the
server through DNS rebinding.

It listens on 127.0.0.1 only unless told otherwise. SIGINT or SIGTERM stops
it gracefully: requests in flight finish, the slow stage finishes its
batch, alerts are drained, the store is closed.

It runs Go's garbage collector at GOGC=400 (the heap may grow to 5x the
live heap between collections: its live heap is small and it allocates
per command) unless the GOGC environment variable chooses another; the
banner says which.

--demo seeds a tenant "demo" with a service demo/app, queues demo-orders
and demo-orders-dlq, routes orders/create and orders/charge (strict
dedupe), their ACLs, a key (written to demo-app.key in the data
directory) and the tenant's ingress credentials (demo.credentials, which
snavio send picks up), and prints the lines to try next.

Alerts (docs/alerts.md) go to the dashboard log (GET /v1/alerts), and to
every channel configured here for all tenants: a signed webhook
(--alert-webhook) and email (--alert-email-smtp with --alert-email-from
and --alert-email-to). Email needs STARTTLS unless --alert-email-insecure
names a loopback relay; SMTP AUTH takes --alert-email-username and the
password from --alert-email-password-file or SNAVIO_ALERT_EMAIL_PASSWORD.
Critical alerts reach the dashboard log when every channel fails.

If the store's write-ahead log fails (a full or failing disk), every
write is refused, /readyz answers 503 with reason log_failed, and serve
stops with exit code 1 and one line saying so: run it under a supervisor
that restarts it (systemd Restart=on-failure, a container restart
policy); the restart recovers every acknowledged write.

Exit codes: 0 stopped cleanly, 1 failed to start or to stop cleanly (a
failed log included), 2 usage error.`,
		Example: `  # Try it: seed a demo tenant, then follow the printed "snavio send" line.
  snavio dispatch serve --demo

  # In memory, on a free port, telling a script when it is ready.
  snavio dispatch serve --ephemeral --listen 127.0.0.1:0 --ready-file /tmp/snavio.url

  # Acknowledge once written, sync every 100ms (a power loss can take 100ms).
  snavio dispatch serve --fsync 100ms

  # Durable, in a chosen directory, with a webhook for alerts.
  snavio dispatch serve --data-dir /var/lib/snavio \
      --alert-webhook https://ops.example.com/hook --alert-webhook-secret-file hook.secret

  # Email alerts through a relay (STARTTLS and AUTH; the password from a file).
  snavio dispatch serve --alert-email-smtp smtp.example.com:587 \
      --alert-email-from alerts@example.com --alert-email-to ops@example.com \
      --alert-email-username alerts --alert-email-password-file smtp.password`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runServe(cmd.Context(), f, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.DataDir, "data-dir", "", "directory for the store, operator token and signing key (default: the profile's data_dir)")
	fl.BoolVar(&opts.Ephemeral, "ephemeral", false, "keep the store in memory: nothing survives a restart")
	fl.IntVar(&opts.MemoryBudgetMiB, "memory-budget-mib", embedded.DefaultMemoryBudget>>20, "with --ephemeral: MiB the queued messages may hold; past 90% of it PutEvents answers 503 with Retry-After")
	fl.StringVar(&opts.Listen, "listen", server.DefaultListen, "address to listen on (port 0 picks a free port)")
	fl.BoolVar(&opts.Demo, "demo", false, "seed a demo tenant, route, ACL and key, and print how to send to it")
	fl.StringVar(&opts.ReadyFile, "ready-file", "", "write the server's URL to this file once it takes traffic (for scripts)")
	fl.IntVar(&opts.SlowWorkers, "slow-workers", 4, "concurrent slow-stage workers")
	fl.BoolVar(&opts.Shadow, "shadow", false, "record what rate limits and fairness would refuse, without refusing")
	fl.StringVar(&opts.WebhookURL, "alert-webhook", "", "deliver alerts to this URL (signed with --alert-webhook-secret-file)")
	fl.StringVar(&opts.WebhookSecretFile, "alert-webhook-secret-file", "", "file holding the webhook's signing secret")
	opts.Email.register(fl)
	fl.DurationVar(&opts.TelemetryRetention, "telemetry-retention", 24*time.Hour, "how long telemetry streams keep events")
	fl.DurationVar(&opts.ArchiveRetention, "archive-retention", 7*24*time.Hour, "how long the archive keeps accepted events")
	fl.DurationVar(&opts.SnapshotInterval, "snapshot-interval", 5*time.Minute, "how often registry snapshots are generated")
	fl.DurationVar(&opts.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a graceful stop may take")
	fl.StringVar(&opts.Fsync, "fsync", "always", `when the store's log is synced: "always", before each acknowledgement (a queue consumer's receive, delete or visibility change within 10ms), or an interval such as 100ms (acknowledged once written; a power loss can take the last interval)`)
	fl.StringArrayVar(&opts.AllowedHosts, "allowed-host", nil, "a host name clients reach the server by, besides loopback names and IP addresses (repeatable)")
	fl.Float64Var(&opts.SkewSampleRate, "skew-sample-rate", shield.DefaultSampleRate, "share of accepted commands that emit snavio.telemetry.skew_sample to their tenant, from 0 (none) to 1 (every one)")
	return cmd
}

func (o *ServeOptions) validate() error {
	if _, _, err := net.SplitHostPort(o.Listen); err != nil {
		return cmdutil.Usagef("--listen %q: want HOST:PORT, such as %s or 127.0.0.1:0", o.Listen, server.DefaultListen)
	}
	if o.MemoryBudgetMiB < 1 || o.MemoryBudgetMiB > 1<<20 {
		return cmdutil.Usagef("--memory-budget-mib %d: want 1 to %d (MiB), such as 256", o.MemoryBudgetMiB, 1<<20)
	}
	if o.SlowWorkers < 1 || o.SlowWorkers > 256 {
		return cmdutil.Usagef("--slow-workers %d: want 1 to 256", o.SlowWorkers)
	}
	for name, d := range map[string]time.Duration{
		"--telemetry-retention": o.TelemetryRetention, "--archive-retention": o.ArchiveRetention,
		"--snapshot-interval": o.SnapshotInterval, "--shutdown-timeout": o.ShutdownTimeout,
	} {
		if d <= 0 {
			return cmdutil.Usagef("%s %v: want a positive duration such as 30s or 24h", name, d)
		}
	}
	if !(o.SkewSampleRate >= 0 && o.SkewSampleRate <= 1) {
		return cmdutil.Usagef("--skew-sample-rate %v: want a share from 0 (no samples) to 1 (every accepted command), such as 0.01", o.SkewSampleRate)
	}
	d, err := devserver.ParseFsync(o.Fsync)
	if err != nil {
		return cmdutil.Usagef("--fsync %v", err)
	}
	o.SyncEvery = d
	if (o.WebhookURL == "") != (o.WebhookSecretFile == "") {
		return cmdutil.Usagef("--alert-webhook and --alert-webhook-secret-file go together: give both or neither")
	}
	if o.EmailConfig, err = o.Email.config(os.Getenv); err != nil {
		return err
	}
	return nil
}

// skewSampleRate maps the flag (0 disables) to serve.Options (0 is the
// default, a negative rate disables).
func skewSampleRate(flag float64) float64 {
	if flag == 0 {
		return -1
	}
	return flag
}

func runServe(ctx context.Context, f *cmdutil.Factory, o *ServeOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	p, err := f.Printer()
	if err != nil {
		return err
	}
	if o.DataDir == "" {
		s, err := f.Settings()
		if err != nil {
			return err
		}
		o.DataDir = s.DataDir
	}
	if o.DataDir == "" {
		return cmdutil.Usagef("no data directory: pass --data-dir DIR or set the profile's data_dir")
	}
	var secret []byte
	if o.WebhookSecretFile != "" {
		b, err := os.ReadFile(o.WebhookSecretFile)
		if err != nil {
			return cmdutil.Usagef("--alert-webhook-secret-file: %v", err)
		}
		if secret = []byte(strings.TrimSpace(string(b))); len(secret) < 16 {
			return cmdutil.Usagef("--alert-webhook-secret-file %s: the secret must have at least 16 bytes", o.WebhookSecretFile)
		}
	}
	gc := devserver.TuneGC(os.Getenv("GOGC"), os.Getenv("GOMEMLIMIT"))
	ctx, stop := cmdutil.InterruptContext(ctx)
	defer stop()
	s, err := devserver.Start(ctx, devserver.Options{
		DataDir: o.DataDir, Ephemeral: o.Ephemeral, MemoryBudget: int64(o.MemoryBudgetMiB) << 20, SyncEvery: o.SyncEvery, Listen: o.Listen, Demo: o.Demo,
		Logger: f.Logger(), SlowWorkers: o.SlowWorkers, Shadow: o.Shadow,
		WebhookURL: o.WebhookURL, WebhookSecret: secret, Email: o.EmailConfig, SkewSampleRate: skewSampleRate(o.SkewSampleRate),
		Jobs:         devserver.Schedule{Snapshot: o.SnapshotInterval, TelemetryRetention: o.TelemetryRetention, ArchiveRetention: o.ArchiveRetention},
		AllowedHosts: o.AllowedHosts,
	})
	if err != nil {
		return err
	}
	info := s.Info()
	info.GC = gc
	if err := printBanner(f.IOStreams.Out, p, info); err != nil {
		_ = s.Shutdown(context.Background())
		return err
	}
	if o.ReadyFile != "" {
		if err := writeReadyFile(o.ReadyFile, info.URL); err != nil {
			_ = s.Shutdown(context.Background())
			return err
		}
	}
	var failure error
	select {
	case <-ctx.Done():
	case failure = <-s.Failed():
	}
	stop()
	fmt.Fprintln(f.IOStreams.ErrOut, "stopping: draining requests in flight, the slow stage and alerts...")
	sctx, cancel := context.WithTimeout(context.Background(), o.ShutdownTimeout)
	defer cancel()
	err = s.Shutdown(sctx)
	if failure != nil && !errors.Is(err, failure) { // a failed log is both
		err = errors.Join(failure, err)
	}
	if o.ReadyFile != "" {
		_ = os.Remove(o.ReadyFile)
	}
	if err != nil {
		return fmt.Errorf("dispatch serve: %w", err)
	}
	fmt.Fprintln(f.IOStreams.ErrOut, "stopped cleanly")
	return nil
}

// writeReadyFile writes url atomically, so a script polling for the file
// never reads half of it.
func writeReadyFile(path, url string) error {
	if err := atomicfile.Write(path, []byte(url+"\n"), 0o644); err != nil {
		return fmt.Errorf("--ready-file: %w", err)
	}
	return nil
}

// printBanner says where state lives and what is served: a text banner on
// table output, the Info document otherwise.
func printBanner(w io.Writer, p *output.Printer, info devserver.Info) error {
	if p.Format() != output.Table {
		return p.PrintItem(info)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "snavio dispatch serve is running\n\n")
	fmt.Fprintf(&b, "  PutEvents   %s  (EventBridge endpoint: --endpoint-url %s)\n", info.URL, info.URL)
	fmt.Fprintf(&b, "  dashboard   %s  (sign in with a token)\n", info.DashboardURL)
	fmt.Fprintf(&b, "  control API %s\n", info.ControlAPIBaseURL)
	fmt.Fprintf(&b, "  health      %s/healthz  %s/readyz\n", info.URL, info.URL)
	fmt.Fprintf(&b, "  metrics     %s\n", info.MetricsURL)
	fmt.Fprintf(&b, "  state       %s\n", info.StorePath)
	if info.LogPath != "" {
		fmt.Fprintf(&b, "              %s (its write-ahead log)\n", info.LogPath)
	}
	switch info.Fsync {
	case "":
	case "always":
		fmt.Fprintf(&b, "  fsync       always: before each acknowledgement (a queue consumer's within 10ms)\n")
	default:
		fmt.Fprintf(&b, "  fsync       every %s: acknowledged once written; a power loss can take the last %s\n", info.Fsync, info.Fsync)
	}
	fmt.Fprintf(&b, "  data dir    %s\n", info.DataDir)
	created := ""
	if info.TokenCreated {
		created = " (created now)"
	}
	fmt.Fprintf(&b, "  operator    %s%s\n", info.OperatorToken, created)
	fmt.Fprintf(&b, "  caches      loaded from the %s\n", info.CachesLoadedFrom)
	if info.GC != "" {
		fmt.Fprintf(&b, "  gc          %s\n", info.GC)
	}
	if d := info.Demo; d != nil {
		fmt.Fprintf(&b, "\nDemo: source %s may send %s/%s and %s/%s (strict dedupe), %s each, to queue %s (DLQ %s).\n",
			d.Source, d.Target, d.Command, d.Target, d.Strict, d.RateLimit, d.Queue, d.DLQ)
		fmt.Fprintf(&b, "Its key is in %s; its ingress credentials (SigV4, access key %s) in %s,\n", d.KeyFile, d.AccessKeyID, d.CredentialsFile)
		fmt.Fprintf(&b, "which snavio send picks up from the data directory. Try, in another terminal:\n\n")
		fmt.Fprintf(&b, "  export SNAVIO_ENDPOINT_URL=%s SNAVIO_DATA_DIR=%s\n", info.URL, info.DataDir)
		fmt.Fprintf(&b, "  %s\n  %s\n  %s\n", d.TrySend, d.TryQueue, d.TryTail)
		fmt.Fprintf(&b, "\nAn AWS SDK or the AWS CLI signs with the same file:\n\n  %s\n", d.TryAWSCLI)
	}
	fmt.Fprintf(&b, "\nStop with Ctrl-C (drains in-flight work).\n")
	_, err := io.WriteString(w, b.String())
	return err
}
