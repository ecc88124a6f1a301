package tailcmd

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/output"
	tuitail "github.com/snavio/snavio/internal/tui/tail"
)

// printSink prints the records that pass the filter, one per line (JSON
// formats), per document (YAML) or per text line (table), and writes
// connection notices, gaps and resets to stderr.
type printSink struct {
	p        *output.Printer
	out      io.Writer
	errOut   io.Writer
	filter   tuitail.Filter
	endpoint string
	// gapWhy says why a gap's events were not read.
	gapWhy string

	header bool // the table header was written
	lost   bool // the connection is lost
	// acks, with --ack, acknowledges what was read (filtered out or not).
	acks *acker
}

// acker acknowledges the highest seq read at most once a second, when the
// stream goes quiet (a heartbeat) and at the end: one durable write per
// batch, not per event.
type acker struct {
	now        func() time.Time
	ack        func(seq uint64) error
	read, sent uint64
	last       time.Time
}

func (a *acker) saw(seq uint64) error {
	a.read = max(a.read, seq)
	if a.now().Sub(a.last) < time.Second {
		return nil
	}
	return a.flush()
}

func (a *acker) flush() error {
	if a.read <= a.sent {
		return nil
	}
	if err := a.ack(a.read); err != nil {
		return fmt.Errorf("acknowledging telemetry up to %d: %w", a.read, err)
	}
	a.sent, a.last = a.read, a.now()
	return nil
}

func (s *printSink) Record(r wire.TelemetryRecord) error {
	if err := s.print(r); err != nil {
		return err
	}
	if s.acks != nil {
		return s.acks.saw(r.Seq)
	}
	return nil
}

func (s *printSink) print(r wire.TelemetryRecord) error {
	e := DecodeEvent(r)
	if !s.filter.Match(&e) {
		return nil
	}
	switch s.p.Format() {
	case output.NDJSON, output.JSON:
		return s.p.PrintItem(r)
	case output.YAML:
		if _, err := io.WriteString(s.out, "---\n"); err != nil {
			return err
		}
		return s.p.Print(r)
	}
	if !s.header {
		s.header = true
		if _, err := io.WriteString(s.out, textLine("time", "tenant#seq", "type", "source", "target/command", "reason", "command_id")); err != nil {
			return err
		}
	}
	route := e.Target
	if e.Command != "" {
		route += "/" + e.Command
	}
	_, err := io.WriteString(s.out, textLine(e.Time.UTC().Format("2006-01-02T15:04:05.000Z"), fmt.Sprintf("%s#%d", e.Tenant, e.Seq),
		strings.TrimPrefix(e.Name, "snavio."), e.Source, route, e.Reason, e.CommandID))
	return err
}

// textLine is one line of -o table off a terminal: fixed-width columns
// that stay aligned however many lines follow, and "-" for an empty field.
func textLine(cols ...string) string {
	widths := []int{24, 16, 22, 24, 28, 22, 0}
	var b strings.Builder
	for i, c := range cols {
		if c == "" {
			c = "-"
		}
		if i == len(cols)-1 {
			b.WriteString(c)
			break
		}
		fmt.Fprintf(&b, "%-*s ", widths[i], c)
	}
	return strings.TrimRight(b.String(), " ") + "\n"
}

func (s *printSink) Heartbeat(time.Time) {
	if s.acks != nil {
		if err := s.acks.flush(); err != nil {
			fmt.Fprintln(s.errOut, "warning:", err)
		}
	}
}

func (s *printSink) Connection(connected bool, err error, retryIn time.Duration) {
	switch {
	case connected && s.lost:
		s.lost = false
		fmt.Fprintf(s.errOut, "tail: reconnected to %s; resuming after the last event read (nothing skipped or repeated)\n", s.endpoint)
	case !connected:
		s.lost = true
		fmt.Fprintf(s.errOut, "tail: lost the connection: %s; retrying in %s\n", short(err), retryIn)
	}
}

func (s *printSink) Gap(tenant string, from, to uint64) {
	why := s.gapWhy
	if why == "" {
		why = "aged out of the server's retention first"
	}
	if from == to {
		fmt.Fprintf(s.errOut, "tail: gap in tenant %s's stream: event #%d was not read; it %s\n", tenant, from, why)
		return
	}
	fmt.Fprintf(s.errOut, "tail: gap in tenant %s's stream: events #%d to #%d (%d) were not read; they %s\n", tenant, from, to, to-from+1, why)
}

func (s *printSink) Reset(at uint64) {
	fmt.Fprintf(s.errOut, "tail: the server's telemetry stream restarted (tail was past #%d: a server on an ephemeral store restarted?); reading it from its beginning\n", at)
}
