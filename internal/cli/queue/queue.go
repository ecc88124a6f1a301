// Package queue implements `snavio queue list|get|create|receive|delete|purge`
// over the queue API of a running `snavio dispatch serve`
// (internal/controlapi) on a local profile, and over SQS on an aws one.
package queue

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/completion"
	"github.com/snavio/snavio/internal/config"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// Deps are what every queue command needs, as lazy providers.
type Deps struct {
	Platform func() (platform.Platform, error)
	Printer  func() (*output.Printer, error)
	// ErrOut receives human notes (never results); In and CanPrompt serve
	// purge's confirmation.
	ErrOut    io.Writer
	In        io.Reader
	CanPrompt func() bool
	// IsTTY reports whether stdout is a terminal (the receive table wraps
	// long bodies there).
	IsTTY func() bool
}

// NewDeps returns the production dependencies of f.
func NewDeps(f *cmdutil.Factory) Deps {
	return Deps{Platform: f.Platform, Printer: f.Printer, ErrOut: f.IOStreams.ErrOut, In: f.IOStreams.In, CanPrompt: f.IOStreams.CanPrompt, IsTTY: f.IOStreams.IsStdoutTTY}
}

// NewCmd builds `snavio queue`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue <command>",
		Short: "List, create, receive from and purge the target queues",
		Long: `On a local profile, the queues of "snavio dispatch serve" stand in for the
target teams' SQS Standard queues: at-least-once delivery, a visibility
timeout, receipt handles, and redrive to a dead-letter queue after a
maximum number of receives (the DLQ copy carries snavio.dlq.reason,
snavio.dlq.source_queue and snavio.dlq.receive_count). Any token may list
queues (names, settings and counts, never messages); create, receive,
delete and purge need the operator token.

On an aws profile the commands act on SQS directly, in the profile's
region with its credentials (aws_profile, role_arn): the target teams own
their queues on AWS, so what you may do is what IAM allows you. Flags
without an SQS meaning (--max-depth) are usage errors there.`,
		Example: `  snavio queue create mailer-dlq
  snavio queue create mailer --dlq mailer-dlq --max-receives 5
  snavio queue list
  snavio queue get mailer
  snavio queue receive mailer --wait 20s --delete
  snavio queue purge mailer-dlq --yes
  snavio queue list --prefix billing- --profile prod`,
		Args: cobra.ArbitraryArgs,
		RunE: cmdutil.GroupRunE,
	}
	d := NewDeps(f)
	cmd.AddCommand(NewCmdList(d, nil), NewCmdGet(d, nil), NewCmdCreate(d, nil), NewCmdReceive(d, nil), NewCmdDelete(d, nil), NewCmdPurge(d, nil))
	return cmd
}

func mapErr(err error) error { return cmdutil.MapAPIError(err, "snavio queue list") }

// onAWS reports a platform that acts on SQS.
func onAWS(api platform.Platform) bool { return api.Target().Kind == config.KindAWS }

// sqsMaxReceiptLen bounds an SQS receipt handle (SQS's own limit).
const sqsMaxReceiptLen = 1024

// prefixLister lists queues by name prefix on the service's side (SQS's
// QueueNamePrefix); other platforms are filtered here.
type prefixLister interface {
	ListQueuesPrefix(ctx context.Context, prefix, after string, limit int) (wire.QueueList, error)
}

// completeQueue completes a first argument with the names of the profile's
// queues, and nothing on any failure.
func completeQueue(d Deps) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return queueNames(cmd.Context(), d, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completionLimit bounds the queues a completion reads from SQS (each
// one a GetQueueAttributes).
const completionLimit = 50

// queueNames lists the queues whose names start with prefix.
func queueNames(ctx context.Context, d Deps, prefix string) []string {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completion.Timeout)
	defer cancel()
	api, err := d.Platform()
	if err != nil {
		return nil
	}
	var l wire.QueueList
	if pl, ok := api.(prefixLister); ok {
		l, err = pl.ListQueuesPrefix(ctx, prefix, "", completionLimit)
	} else {
		l, err = api.ListQueues(ctx, "", wire.QueueMaxPage)
	}
	if err != nil {
		return nil
	}
	var out []string
	for _, q := range l.Queues {
		if strings.HasPrefix(q.Name, prefix) {
			out = append(out, q.Name)
		}
	}
	return out
}

// checkQueueArg validates a QUEUE argument before any request.
func checkQueueArg(name string) error {
	if err := wire.CheckQueueName("queue", name); err != nil {
		return &cmdutil.UsageError{Err: err}
	}
	return nil
}

// seconds converts a duration flag to whole seconds in [0, max].
func seconds(flag string, d, max time.Duration) (int, error) {
	if d < 0 || d > max {
		return 0, cmdutil.Usagef("--%s %v: must be 0s to %v", flag, d, max)
	}
	if d%time.Second != 0 {
		return 0, cmdutil.Usagef("--%s %v: must be whole seconds, such as 30s", flag, d)
	}
	return int(d / time.Second), nil
}

// Queues is a list of queues with their counts.
type Queues []wire.QueueInfo

// TableHeader implements output.Tabular.
func (Queues) TableHeader() []string {
	return []string{"name", "visible", "in flight", "oldest", "dlq", "max receives", "visibility", "max depth"}
}

// TableRows implements output.Tabular.
func (qs Queues) TableRows() [][]string {
	rows := make([][]string, len(qs))
	for i, q := range qs {
		mr := ""
		if q.MaxReceives > 0 {
			mr = strconv.Itoa(q.MaxReceives)
		}
		depth := "-"
		if q.MaxDepth > 0 {
			depth = strconv.Itoa(q.MaxDepth)
		}
		rows[i] = []string{q.Name, strconv.Itoa(q.Visible), strconv.Itoa(q.InFlight), age(q.OldestAgeSeconds), q.DeadLetterQueue, mr,
			age(q.VisibilityTimeoutSeconds), depth}
	}
	return rows
}

func age(secs float64) string {
	if secs <= 0 {
		return "-"
	}
	return (time.Duration(secs * float64(time.Second))).Round(time.Second).String()
}

// ListOptions are the inputs of `snavio queue list`.
type ListOptions struct {
	Deps
	Prefix string
	// Registered lists the queues routes name instead of every queue.
	Registered bool
}

// NewCmdList builds `snavio queue list`.
func NewCmdList(d Deps, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{Deps: d}
	cmd := &cobra.Command{
		Use:     "list [--prefix P | --registered]",
		Aliases: []string{"ls"},
		Short:   "List the queues with their visible, in-flight and oldest-message counts",
		Long: `List every queue (or those whose name starts with --prefix) with its counts
(visible is SQS's ApproximateNumberOfMessages, in flight
ApproximateNumberOfMessagesNotVisible, oldest ApproximateAgeOfOldestMessage)
and settings.

On an aws profile: the SQS queues of the profile's account and region
(ListQueues with --prefix as QueueNamePrefix, every page), each with
GetQueueAttributes. SQS's API has no oldest-message age (it is a CloudWatch
metric) and no depth limit: both show "-".

--registered lists the queues the registry's routes name instead, target
queues and dead-letter queues, on both kinds of profile: the routes the
credential may read (a tenant's own), each queue read by name and held to
the route's ARN. A queue that cannot be read, or whose ARN is not the
route's (another account or region than the profile's), is named on
stderr with its routes, and the command exits 1 after printing the others.`,
		Example: `  snavio queue list
  snavio queue list --prefix mailer -o json
  snavio queue list --registered
  snavio queue list --registered --profile prod -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Prefix != "" {
				if err := wire.CheckQueueName("--prefix", opts.Prefix); err != nil {
					return &cmdutil.UsageError{Err: err}
				}
			}
			if opts.Prefix != "" && opts.Registered {
				return cmdutil.Usagef("--prefix and --registered: give one (--registered lists the queues the routes name)")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			if opts.Registered {
				return runListRegistered(cmd.Context(), opts)
			}
			return runList(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Prefix, "prefix", "", "only the queues whose name starts with this")
	cmd.Flags().BoolVar(&opts.Registered, "registered", false, "list the queues the routes name (targets and DLQs) instead")
	return cmd
}

// runListRegistered lists the target and dead-letter queues of the routes
// the credential may read, each read by name and held to the route's ARN.
func runListRegistered(ctx context.Context, o *ListOptions) error {
	api, err := o.Platform()
	if err != nil {
		return err
	}
	routes, err := api.ListRegistry(ctx, registry.KindRoute, platform.RegistryFilter{})
	if err != nil {
		return cmdutil.MapAPIError(err, "snavio queue list --registered")
	}
	named := map[string][]string{} // queue ARN -> "target/command" of its routes
	for _, it := range routes {
		rt := it.Route
		if rt == nil {
			continue
		}
		for _, arn := range []string{rt.QueueARN, rt.DLQARN} {
			if arn != "" {
				named[arn] = append(named[arn], rt.Target+"/"+rt.Command)
			}
		}
	}
	out := Queues{}
	var unreadable []string
	for _, arn := range slices.Sorted(maps.Keys(named)) {
		name := arn[strings.LastIndexByte(arn, ':')+1:]
		q, err := api.GetQueue(ctx, name)
		switch {
		case err != nil:
			fmt.Fprintf(o.ErrOut, "queue %s (routes %s): %v\n", arn, strings.Join(named[arn], ", "), cmdutil.MapAPIError(err, "snavio queue list --registered"))
			unreadable = append(unreadable, name)
		case q.ARN != arn:
			fmt.Fprintf(o.ErrOut, "queue %s (routes %s): the profile's queue %s is %s, another queue: read it with a profile of the route's account and region\n", arn, strings.Join(named[arn], ", "), name, q.ARN)
			unreadable = append(unreadable, name)
		default:
			out = append(out, q)
		}
	}
	p, err := o.Printer()
	if err != nil {
		return err
	}
	if err := p.Print(out); err != nil {
		return err
	}
	if len(unreadable) > 0 {
		return fmt.Errorf("%d of %d registered queues could not be read here: %s", len(unreadable), len(named), strings.Join(unreadable, ", "))
	}
	return nil
}

func runList(ctx context.Context, o *ListOptions) error {
	api, err := o.Platform()
	if err != nil {
		return err
	}
	out := Queues{}
	after := ""
	for {
		var page wire.QueueList
		if pl, ok := api.(prefixLister); ok {
			page, err = pl.ListQueuesPrefix(ctx, o.Prefix, after, wire.QueueMaxPage)
		} else {
			page, err = api.ListQueues(ctx, after, wire.QueueMaxPage)
		}
		if err != nil {
			return mapErr(err)
		}
		for _, q := range page.Queues {
			if strings.HasPrefix(q.Name, o.Prefix) {
				out = append(out, q)
			}
		}
		if page.Next == nil || *page.Next <= after {
			break
		}
		if len(out) >= wire.QueueMaxCount {
			// An SQS account can hold more: say where the list stopped.
			fmt.Fprintf(o.ErrOut, "listed the first %d queues, up to %s: narrow the list with --prefix\n", len(out), out[len(out)-1].Name)
			break
		}
		after = *page.Next
	}
	p, err := o.Printer()
	if err != nil {
		return err
	}
	return p.Print(out)
}

// GetOptions are the inputs of `snavio queue get`.
type GetOptions struct {
	Deps
	Queue string
}

// NewCmdGet builds `snavio queue get`.
func NewCmdGet(d Deps, runF func(context.Context, *GetOptions) error) *cobra.Command {
	opts := &GetOptions{Deps: d}
	return &cobra.Command{
		Use:   "get QUEUE",
		Short: "Show one queue's counts and settings",
		Long: `Show one queue as "snavio queue list" does: visible, in-flight and oldest
counts, its dead-letter queue and max receives, visibility timeout and max
depth. On an aws profile it is SQS's GetQueueAttributes of the queue.`,
		Example: `  snavio queue get mailer
  snavio queue get mailer -o json --profile prod`,
		Args:              cmdutil.ExactArgs(1, "a QUEUE name"),
		ValidArgsFunction: completeQueue(d),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Queue = args[0]
			if err := checkQueueArg(opts.Queue); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runGet(cmd.Context(), opts)
		},
	}
}

func runGet(ctx context.Context, o *GetOptions) error {
	api, err := o.Platform()
	if err != nil {
		return err
	}
	q, err := api.GetQueue(ctx, o.Queue)
	if err != nil {
		return mapErr(err)
	}
	p, err := o.Printer()
	if err != nil {
		return err
	}
	if p.Format() == output.Table {
		return p.Print(Queues{q})
	}
	return p.Print(q)
}

// CreateOptions are the inputs of `snavio queue create`.
type CreateOptions struct {
	Deps
	Name              string
	DLQ               string
	MaxReceives       int
	VisibilityTimeout time.Duration
	MaxDepth          int
}

// NewCmdCreate builds `snavio queue create`.
func NewCmdCreate(d Deps, runF func(context.Context, *CreateOptions) error) *cobra.Command {
	opts := &CreateOptions{Deps: d}
	cmd := &cobra.Command{
		Use:   "create NAME [--dlq QUEUE --max-receives N] [--visibility-timeout 30s] [--max-depth N]",
		Short: "Create a standard queue, optionally redriving to a dead-letter queue",
		Long: `Create a local queue. Creating a queue that exists with the same settings
is a no-op (exit 0, "created": false); with other settings it is an error.

Names are 1 to 80 letters, digits, - and _. FIFO queues (names ending in
.fifo) are refused: Snavio delivers to standard queues only. A dead-letter
queue must exist first; with --dlq, a message received --max-receives times
(1 to 1000, default 5) without being deleted moves to the DLQ at its next
receive.

On an aws profile: SQS's CreateQueue, with SQS-managed encryption, 1 MiB
messages (a delivered command weighs a little over 256 KiB at most) and,
with --dlq, a RedrivePolicy to the DLQ's ARN. SQS refuses a queue that
exists with other settings. --max-depth has no SQS meaning there.`,
		Example: `  snavio queue create mailer-dlq
  snavio queue create mailer --dlq mailer-dlq --max-receives 5 --visibility-timeout 60s
  snavio queue create audit --max-depth 1000000 -o json`,
		Args: cmdutil.ExactArgs(1, "a queue NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if _, err := opts.request(); err != nil {
				return &cmdutil.UsageError{Err: err}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runCreate(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.DLQ, "dlq", "", "dead-letter queue (must exist)")
	_ = cmd.RegisterFlagCompletionFunc("dlq", func(c *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return queueNames(c.Context(), d, toComplete), cobra.ShellCompDirectiveNoFileComp
	})
	fl.IntVar(&opts.MaxReceives, "max-receives", 0, fmt.Sprintf("with --dlq: receives before a message moves to the DLQ (1 to 1000; default %d)", wire.QueueDefaultMaxReceives))
	fl.DurationVar(&opts.VisibilityTimeout, "visibility-timeout", 0, "how long a received message stays invisible (0s to 12h; default 30s)")
	fl.IntVar(&opts.MaxDepth, "max-depth", 0, fmt.Sprintf("most messages the queue holds (default %d)", wire.QueueDefaultMaxDepth))
	return cmd
}

func (o *CreateOptions) request() (wire.QueueCreateRequest, error) {
	vt, err := seconds("visibility-timeout", o.VisibilityTimeout, wire.QueueMaxVisibilityTimeout)
	if err != nil {
		return wire.QueueCreateRequest{}, err
	}
	req := wire.QueueCreateRequest{Name: o.Name, DeadLetterQueue: o.DLQ, MaxReceives: o.MaxReceives, VisibilityTimeoutSeconds: vt, MaxDepth: o.MaxDepth}
	if _, err := req.Normalize(); err != nil {
		return wire.QueueCreateRequest{}, err
	}
	return req, nil
}

func runCreate(ctx context.Context, o *CreateOptions) error {
	req, err := o.request()
	if err != nil {
		return &cmdutil.UsageError{Err: err}
	}
	api, err := o.Platform()
	if err != nil {
		return err
	}
	if onAWS(api) && o.MaxDepth != 0 {
		return cmdutil.Usagef("--max-depth %d: an SQS queue has no depth limit; leave --max-depth out on an aws profile", o.MaxDepth)
	}
	res, err := api.CreateQueue(ctx, req)
	if err != nil {
		return mapErr(err)
	}
	p, err := o.Printer()
	if err != nil {
		return err
	}
	return p.Print(res)
}

// ReceiveOptions are the inputs of `snavio queue receive`.
type ReceiveOptions struct {
	Deps
	Queue             string
	Max               int
	VisibilityTimeout time.Duration
	Wait              time.Duration
	Delete            bool
}

// Messages are received messages, printed with their attributes and
// receipt handles (a list in JSON; messageTable in a table).
type Messages []wire.QueueMessage

// TableWrap is the width a terminal's receive table fits in: long bodies
// are wrapped under their label to stay inside it.
const TableWrap = 160

// messageTable lays messages out as one block of FIELD VALUE lines per
// message, a blank line between blocks: a message's body and attributes
// are too long for columns side by side. Wrap > 0 (a terminal) wraps the
// body to fit that many columns; 0 (piped) keeps it on one line to copy.
type messageTable struct {
	ms   Messages
	wrap int
}

// TableHeader implements output.Tabular: the labels are in the rows.
func (messageTable) TableHeader() []string { return nil }

// labelWidth is the widest label plus the table's gap.
const labelWidth = len("RECEIPT HANDLE") + 3

// TableRows implements output.Tabular.
func (t messageTable) TableRows() [][]string {
	var rows [][]string
	for i, m := range t.ms {
		if i > 0 {
			rows = append(rows, []string{"", ""})
		}
		rows = append(rows, []string{"ID", m.ID}, []string{"RECEIVES", strconv.Itoa(m.ReceiveCount)},
			[]string{"SENT AT", m.SentAt.UTC().Format(time.RFC3339)}, []string{"RECEIPT HANDLE", m.ReceiptHandle})
		keys := make([]string, 0, len(m.Attributes))
		for k := range m.Attributes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for j, k := range keys {
			label := ""
			if j == 0 {
				label = "ATTRIBUTES"
			}
			rows = append(rows, []string{label, k + "=" + m.Attributes[k]})
		}
		body := m.Body
		if m.BodyEncoding == "base64" {
			body = "base64:" + body
		}
		for j, line := range wrapRunes(body, t.wrap-labelWidth) {
			label := ""
			if j == 0 {
				label = "BODY"
			}
			rows = append(rows, []string{label, line})
		}
	}
	return rows
}

// wrapRunes cuts s into lines of at most width runes (s whole when width
// is not positive), at rune boundaries, keeping s's bytes as they are.
func wrapRunes(s string, width int) []string {
	if width <= 0 {
		return []string{s}
	}
	var out []string
	for utf8.RuneCountInString(s) > width {
		cut := 0
		for range width {
			_, n := utf8.DecodeRuneInString(s[cut:])
			cut += n
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return append(out, s)
}

// NewCmdReceive builds `snavio queue receive`.
func NewCmdReceive(d Deps, runF func(context.Context, *ReceiveOptions) error) *cobra.Command {
	opts := &ReceiveOptions{Deps: d}
	cmd := &cobra.Command{
		Use:   "receive QUEUE [--max N] [--wait 20s] [--visibility-timeout D] [--delete]",
		Short: "Receive messages, printing their bodies, attributes and receipt handles",
		Long: `Receive up to --max messages (1 to 10) and print each with its id, receive
count, sent time, attributes (command.source and the other attributes the
dispatcher set) and receipt handle. Received messages stay invisible for
the visibility timeout (default: the queue's), then become visible again
unless deleted: delete them with "snavio queue delete QUEUE HANDLE", or
pass --delete to delete them once they are printed.

--wait long-polls like SQS: when no message is visible, wait up to that long
(at most 20s) for one. An empty result prints nothing (a note on stderr in
a table, [] in JSON) and exits 0. The table shows one block per message;
on a terminal, long bodies are wrapped to fit 160 columns.`,
		Example: `  snavio queue receive mailer
  snavio queue receive mailer --max 10 --wait 20s -o json
  snavio queue receive mailer-dlq --delete -o ndjson`,
		Args:              cmdutil.ExactArgs(1, "a QUEUE name"),
		ValidArgsFunction: completeQueue(d),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Queue = args[0]
			if _, err := opts.request(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runReceive(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&opts.Max, "max", 1, "most messages to receive (1 to 10)")
	fl.DurationVar(&opts.VisibilityTimeout, "visibility-timeout", 0, "invisibility of the received messages (default: the queue's)")
	fl.DurationVar(&opts.Wait, "wait", 0, "long poll: wait up to this long for a message (at most 20s)")
	fl.BoolVar(&opts.Delete, "delete", false, "delete the messages after printing them")
	return cmd
}

func (o *ReceiveOptions) request() (wire.QueueReceiveRequest, error) {
	if err := checkQueueArg(o.Queue); err != nil {
		return wire.QueueReceiveRequest{}, err
	}
	if o.Max < 1 || o.Max > wire.QueueMaxReceiveBatch {
		return wire.QueueReceiveRequest{}, cmdutil.Usagef("--max %d: must be 1 to %d", o.Max, wire.QueueMaxReceiveBatch)
	}
	vt, err := seconds("visibility-timeout", o.VisibilityTimeout, wire.QueueMaxVisibilityTimeout)
	if err != nil {
		return wire.QueueReceiveRequest{}, err
	}
	wait, err := seconds("wait", o.Wait, wire.QueueMaxWait)
	if err != nil {
		return wire.QueueReceiveRequest{}, err
	}
	return wire.QueueReceiveRequest{Max: o.Max, VisibilityTimeoutSeconds: vt, WaitSeconds: wait}, nil
}

func runReceive(ctx context.Context, o *ReceiveOptions) error {
	req, err := o.request()
	if err != nil {
		return err
	}
	api, err := o.Platform()
	if err != nil {
		return err
	}
	got, err := api.ReceiveMessages(ctx, o.Queue, req)
	if err != nil {
		return mapErr(err)
	}
	p, err := o.Printer()
	if err != nil {
		return err
	}
	// Print first, delete after: a message is never deleted unseen.
	var v any = Messages(got.Messages)
	if p.Format() == output.Table {
		if len(got.Messages) == 0 {
			_, err := fmt.Fprintf(o.ErrOut, "No message in %s is visible now.\n", o.Queue)
			return err
		}
		wrap := 0
		if o.IsTTY != nil && o.IsTTY() {
			wrap = TableWrap
		}
		v = messageTable{ms: got.Messages, wrap: wrap}
	}
	if err := p.Print(v); err != nil {
		return err
	}
	if !o.Delete || len(got.Messages) == 0 {
		return nil
	}
	handles := make([]string, len(got.Messages))
	for i, m := range got.Messages {
		handles[i] = m.ReceiptHandle
	}
	res, err := deleteHandles(ctx, api, o.Queue, handles)
	if err != nil {
		return err
	}
	if failed := failures(res); len(failed) > 0 {
		return fmt.Errorf("printed %d messages but could not delete %d of them: %s; they will be received again after their visibility timeout",
			len(handles), len(failed), strings.Join(failed, "; "))
	}
	fmt.Fprintf(o.ErrOut, "deleted %d message(s) from %s\n", len(handles), o.Queue)
	return nil
}

// deleteHandles deletes handles in batches of queueapi.MaxDeleteBatch.
func deleteHandles(ctx context.Context, api platform.Platform, queue string, handles []string) ([]wire.QueueDeleteOutcome, error) {
	var out []wire.QueueDeleteOutcome
	for len(handles) > 0 {
		n := min(len(handles), wire.QueueMaxDeleteBatch)
		res, err := api.DeleteMessages(ctx, queue, wire.QueueDeleteRequest{ReceiptHandles: handles[:n]})
		if err != nil {
			return out, mapErr(err)
		}
		out = append(out, res.Results...)
		handles = handles[n:]
	}
	return out, nil
}

func failures(res []wire.QueueDeleteOutcome) []string {
	var out []string
	for _, r := range res {
		if !r.Deleted {
			out = append(out, r.Code+": "+r.Error)
		}
	}
	return out
}

// DeleteOptions are the inputs of `snavio queue delete`.
type DeleteOptions struct {
	Deps
	Queue    string
	Receipts []string
}

// Outcomes are the results of a delete.
type Outcomes []wire.QueueDeleteOutcome

// TableHeader implements output.Tabular.
func (Outcomes) TableHeader() []string { return []string{"receipt handle", "deleted", "error"} }

// TableRows implements output.Tabular.
func (os Outcomes) TableRows() [][]string {
	rows := make([][]string, len(os))
	for i, o := range os {
		rows[i] = []string{o.ReceiptHandle, strconv.FormatBool(o.Deleted), o.Error}
	}
	return rows
}

// maxDeleteArgs bounds the handles one invocation takes.
const maxDeleteArgs = 1000

// NewCmdDelete builds `snavio queue delete`.
func NewCmdDelete(d Deps, runF func(context.Context, *DeleteOptions) error) *cobra.Command {
	opts := &DeleteOptions{Deps: d}
	return &cobra.Command{
		Use:   "delete QUEUE RECEIPT_HANDLE...",
		Short: "Delete received messages by their receipt handles",
		Long: `Delete messages with the receipt handles a receive printed. Only the latest
receive's handle is valid: if the visibility timeout expired and the message
was received again, the old handle is stale and the message stays.

On an aws profile it is SQS's DeleteMessageBatch, 10 handles a request;
an invalid handle is invalid_receipt, other failures keep SQS's code.

Exit codes: 0 every message deleted; 1 any handle was stale or invalid (the
table says which) or the request failed; 2 bad arguments.`,
		Example: `  snavio queue delete mailer r1.6f1c...
  snavio queue receive mailer -o json | jq -r '.[].receipt_handle' | xargs snavio queue delete mailer`,
		ValidArgsFunction: completeQueue(d),
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return cmdutil.Usagef("%q needs a QUEUE and at least one RECEIPT_HANDLE; see `%s --help`", cmd.CommandPath(), cmd.CommandPath())
			}
			if len(args)-1 > maxDeleteArgs {
				return cmdutil.Usagef("%d receipt handles: pass at most %d per invocation", len(args)-1, maxDeleteArgs)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Queue, opts.Receipts = args[0], args[1:]
			if err := checkQueueArg(opts.Queue); err != nil {
				return err
			}
			maxLen := wire.QueueMaxReceiptLen
			if api, err := opts.Platform(); err == nil && onAWS(api) {
				maxLen = sqsMaxReceiptLen
			}
			for i, h := range opts.Receipts {
				if h == "" || len(h) > maxLen {
					return cmdutil.Usagef("receipt handle %d is empty or longer than %d bytes: pass the handles a receive printed", i+1, maxLen)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runDelete(cmd.Context(), opts)
		},
	}
}

func runDelete(ctx context.Context, o *DeleteOptions) error {
	api, err := o.Platform()
	if err != nil {
		return err
	}
	res, err := deleteHandles(ctx, api, o.Queue, o.Receipts)
	if err != nil {
		return err
	}
	p, err := o.Printer()
	if err != nil {
		return err
	}
	if err := p.Print(Outcomes(res)); err != nil {
		return err
	}
	if failed := failures(res); len(failed) > 0 {
		return fmt.Errorf("%d of %d messages not deleted: %s", len(failed), len(res), strings.Join(failed, "; "))
	}
	return nil
}

// PurgeOptions are the inputs of `snavio queue purge`.
type PurgeOptions struct {
	Deps
	Queue string
	Yes   bool
}

// NewCmdPurge builds `snavio queue purge`.
func NewCmdPurge(d Deps, runF func(context.Context, *PurgeOptions) error) *cobra.Command {
	opts := &PurgeOptions{Deps: d}
	cmd := &cobra.Command{
		Use:   "purge QUEUE [--yes]",
		Short: "Delete every message of a queue, visible or in flight",
		Long: `Delete every message of a queue. There is no undo: on a terminal, purge
asks you to type the queue's name; elsewhere (scripts, CI) it needs --yes
and never prompts.

On an aws profile it is SQS's PurgeQueue: SQS allows one purge of a queue
every 60 s and finishes it within that minute, and reports no count, so
"purged" is SQS's approximate count (visible, in flight and delayed) just
before.`,
		Example: `  snavio queue purge mailer-dlq
  snavio queue purge mailer-dlq --yes -o json`,
		Args:              cmdutil.ExactArgs(1, "a QUEUE name"),
		ValidArgsFunction: completeQueue(d),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Queue = args[0]
			if err := checkQueueArg(opts.Queue); err != nil {
				return err
			}
			if !opts.Yes && !opts.CanPrompt() {
				return cmdutil.Usagef("purge deletes every message of %s and cannot be undone: pass --yes to confirm (no prompt without a terminal)", opts.Queue)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runPurge(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "purge without asking")
	return cmd
}

// errNotConfirmed: the operator did not confirm the purge.
var errNotConfirmed = errors.New("not confirmed")

func runPurge(ctx context.Context, o *PurgeOptions) error {
	api, err := o.Platform()
	if err != nil {
		return err
	}
	if !o.Yes {
		in, err := api.GetQueue(ctx, o.Queue)
		if err != nil {
			return mapErr(err)
		}
		fmt.Fprintf(o.ErrOut, "Purge %d visible and %d in-flight messages of %s? This cannot be undone.\nType the queue name to confirm: ", in.Visible, in.InFlight, o.Queue)
		line, err := bufio.NewReader(io.LimitReader(o.In, 1024)).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading the confirmation: %w", err)
		}
		if strings.TrimSpace(line) != o.Queue {
			return fmt.Errorf("purge of %s %w (the typed name did not match): nothing was deleted", o.Queue, errNotConfirmed)
		}
	}
	res, err := api.PurgeQueue(ctx, o.Queue)
	if err != nil {
		return mapErr(err)
	}
	p, err := o.Printer()
	if err != nil {
		return err
	}
	return p.Print(res)
}
