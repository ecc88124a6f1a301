package replaycmd

import (
	"fmt"
	"io"
	"time"

	"charm.land/bubbles/v2/progress"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// progressView shows a running replay on stderr: on a terminal a bar
// (bubbles/progress, rendered statically: no terminal program runs) with
// counts and an ETA, redrawn in place; otherwise one plain line at most
// every plainEvery, and the last.
type progressView struct {
	w     io.Writer
	tty   bool
	clk   clock.Clock
	bar   progress.Model
	began time.Time
	base  int // commands done when this run began (a resume's earlier runs)
	last  time.Time
	drawn bool
}

const plainEvery = time.Second

func newProgress(w io.Writer, tty bool, clk clock.Clock) *progressView {
	return &progressView{w: w, tty: tty, clk: clk, bar: progress.New(progress.WithDefaultBlend(), progress.WithWidth(30), progress.WithoutPercentage())}
}

func done(a wire.ReplayAudit) int { return a.SentCount + a.Failed + a.Held }

func (p *progressView) start(a wire.ReplayAudit) {
	p.began, p.base = p.clk.Now(), done(a)
	fmt.Fprintf(p.w, "replay %s: %d command(s) planned from %s\n", a.ID, a.Planned, a.Origin)
}

// eta estimates the time left from this run's pace.
// eta estimates the time left from this run's pace, and never below what
// the rate limit allows.
func (p *progressView) eta(a wire.ReplayAudit) (time.Duration, bool) {
	n := done(a) - p.base
	el := p.clk.Now().Sub(p.began)
	left := a.Planned - done(a)
	if n <= 0 || left <= 0 {
		return 0, false
	}
	eta := el * time.Duration(left) / time.Duration(n)
	if a.Rate > 0 {
		eta = max(eta, time.Duration(float64(left)/a.Rate*float64(time.Second)))
	}
	return eta.Round(time.Second), true
}

// Line is the text of a progress update.
func (p *progressView) line(a wire.ReplayAudit, final bool) string {
	s := fmt.Sprintf("sent %d/%d", a.SentCount, a.Planned)
	if a.Failed > 0 {
		s += fmt.Sprintf(", refused %d", a.Failed)
	}
	if a.Held > 0 {
		s += fmt.Sprintf(", held %d", a.Held)
	}
	if a.Refused > 0 {
		s += fmt.Sprintf(", refused as never replayable %d", a.Refused)
	}
	if eta, ok := p.eta(a); ok && !final {
		s += ", ETA " + eta.String()
	}
	return s
}

func (p *progressView) update(a wire.ReplayAudit) {
	now := p.clk.Now()
	if p.tty {
		frac := 1.0
		if a.Planned > 0 {
			frac = min(1, float64(done(a))/float64(a.Planned))
		}
		fmt.Fprintf(p.w, "\r\x1b[K%s %3.0f%%  %s", p.bar.ViewAs(frac), frac*100, p.line(a, a.Status != wire.ReplayRunning))
		p.drawn = true
		return
	}
	if !p.last.IsZero() && now.Sub(p.last) < plainEvery {
		return
	}
	p.last = now
	fmt.Fprintf(p.w, "replay %s: %s\n", a.ID, p.line(a, false))
}

// finish ends the progress display; a is the final audit (zero if the
// stream ended early).
func (p *progressView) finish(a wire.ReplayAudit) {
	if p.tty {
		if a.ID != "" {
			p.update(a)
		}
		if p.drawn {
			fmt.Fprintln(p.w)
		}
		return
	}
	if a.ID != "" {
		fmt.Fprintf(p.w, "replay %s: %s: %s\n", a.ID, a.Status, p.line(a, true))
	}
}
