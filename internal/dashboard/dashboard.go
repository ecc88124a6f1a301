// Package dashboard is the web dashboard of `snavio dispatch serve`
// (docs/dashboard.md): server-rendered pages at / and under /ui/, from
// assets embedded in the binary. A tenant sees its alerts inbox, its live
// telemetry and its throughput; the operator sees route health and
// throughput across tenants.
//
// Every piece of data comes from the control API's own handlers, called
// in-process as the signed-in principal: the dashboard has no other way to
// read the store, so its scoping is the control API's.
package dashboard

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

//go:embed assets
var assets embed.FS

// CookieName is the session cookie.
const CookieName = "snavio_session"

// RouteHealth is one route's queue as the operator's page shows it.
type RouteHealth struct {
	Target, Command, Queue string
	Depth, InFlight        int
	OldestAge              time.Duration
	ExpectedDrain          time.Duration
	// Health is the queue monitor's last verdict ("" before its first
	// sample), Reason why.
	Health, Reason string
}

// Options configure the dashboard.
type Options struct {
	// API is the control API's handler, without authentication: the
	// dashboard calls it in-process with the principal in the context.
	// Required.
	API http.Handler
	// Authenticate resolves a bearer token (server.Authenticator's).
	// Required.
	Authenticate func(ctx context.Context, token string) (server.Principal, error)
	// Routes reads route health for the operator's page. Nil: no table.
	Routes func(ctx context.Context) ([]RouteHealth, error)
	// Clock defaults to the system clock.
	Clock clock.Clock
	// Sessions bound the session store.
	Sessions SessionOptions
	// LiveWait is how long the live stream waits for telemetry before it
	// looks for new alerts again (default 1 s).
	LiveWait time.Duration
	// MaxStreams bounds the live streams open at once (default 64), and
	// MaxPages the pages being rendered at once (default 16): both read
	// through the control API's handlers, beside its own in-flight bound.
	MaxStreams, MaxPages int
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Dashboard serves the UI.
type Dashboard struct {
	o        Options
	sessions *Sessions
	acks     *acks
	pages    *template.Template
	static   http.Handler
	origin   *http.CrossOriginProtection
	streams  chan struct{}
	pagesIn  chan struct{}
	handler  http.Handler
}

// New returns the dashboard.
func New(o Options) (*Dashboard, error) {
	if o.API == nil || o.Authenticate == nil {
		return nil, errors.New("dashboard: Options.API and Options.Authenticate are required (the control API handler and the server's authenticator)")
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LiveWait <= 0 {
		o.LiveWait = time.Second
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = 64
	}
	if o.MaxPages <= 0 {
		o.MaxPages = 16
	}
	pages, err := template.New("").Funcs(template.FuncMap{"age": age}).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(assets, "assets/static")
	if err != nil {
		return nil, err
	}
	d := &Dashboard{o: o, sessions: NewSessions(o.Sessions, o.Clock), acks: newAcks(2000), pages: pages,
		static: http.StripPrefix("/ui/static/", http.FileServerFS(static)), origin: http.NewCrossOriginProtection(),
		streams: make(chan struct{}, o.MaxStreams), pagesIn: make(chan struct{}, o.MaxPages)}
	d.origin.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "cross-origin request refused: the dashboard takes form posts from its own pages only; reload the dashboard and submit again", http.StatusForbidden)
	}))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", d.home)
	mux.HandleFunc("GET /ui/signin", d.signinForm)
	mux.HandleFunc("POST /ui/signin", d.signin)
	mux.HandleFunc("POST /ui/signout", d.withSession(d.signout))
	mux.HandleFunc("POST /ui/alerts/ack", d.withSession(d.ack))
	mux.HandleFunc("GET /ui/events", d.withSession(d.events))
	mux.Handle("GET /ui/static/", d.cached(d.static))
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such dashboard page: "+r.URL.Path+"; the dashboard is at /", http.StatusNotFound)
	})
	d.handler = d.origin.Handler(mux)
	return d, nil
}

// ServeHTTP refuses cross-origin state changes (Origin and
// Sec-Fetch-Site), sets the security headers and serves the page.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	d.handler.ServeHTTP(w, r)
}

// cached serves embedded assets, cacheable for an hour (they change only
// with the binary), and no directory listings.
func (d *Dashboard) cached(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") { // no directory listings
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "private, max-age=3600")
		next.ServeHTTP(w, r)
	})
}

// signedIn is a request's session and principal.
type signedIn struct {
	id   string
	sess Session
	p    server.Principal
}

// current returns the request's live session, authenticating its token
// again (a revoked token ends the session).
func (d *Dashboard) current(r *http.Request) (signedIn, bool) {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return signedIn{}, false
	}
	sess, ok := d.sessions.Get(c.Value)
	if !ok {
		return signedIn{}, false
	}
	p, err := d.o.Authenticate(r.Context(), sess.Token)
	if err != nil {
		if errors.Is(err, server.ErrUnknownToken) {
			d.sessions.Delete(c.Value)
		}
		return signedIn{}, false
	}
	return signedIn{id: c.Value, sess: sess, p: p}, true
}

// withSession serves next for a signed-in request; a POST must also carry
// the session's CSRF token. Others go to the sign-in page (or get 401 on
// the event stream).
func (d *Dashboard) withSession(next func(http.ResponseWriter, *http.Request, signedIn)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		si, ok := d.current(r)
		if !ok {
			if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/ui/events") {
				http.Redirect(w, r, "/ui/signin", http.StatusSeeOther)
				return
			}
			http.Error(w, "not signed in, or the session ended: sign in again at /ui/signin", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			if !parseForm(w, r) {
				return
			}
			got := r.PostFormValue("csrf")
			if subtle.ConstantTimeCompare([]byte(got), []byte(si.sess.CSRF)) != 1 {
				http.Error(w, "form field csrf: missing or not this session's; reload the dashboard and submit again", http.StatusForbidden)
				return
			}
		}
		next(w, r, si)
	}
}

func (d *Dashboard) cookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode}
}

func (d *Dashboard) render(w http.ResponseWriter, status int, name string, data any) {
	var b strings.Builder
	if err := d.pages.ExecuteTemplate(&b, name, data); err != nil {
		d.o.Logger.Error("dashboard: rendering a page failed", "page", name, "err", err)
		http.Error(w, "rendering the page failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

type signinPage struct{ Error string }

func (d *Dashboard) signinForm(w http.ResponseWriter, r *http.Request) {
	d.render(w, http.StatusOK, "signin.html", signinPage{})
}

// maxForm bounds a form's body: the dashboard's forms are a few fields.
const maxForm = 4 << 10

// parseForm reads a POST's form, or answers why it cannot.
func parseForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		status := http.StatusBadRequest
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		http.Error(w, "the form cannot be read ("+err.Error()+"); submit it from the dashboard's page", status)
		return false
	}
	return true
}

// maxTokenLen bounds the token field: tokens are well under it.
const maxTokenLen = 512

func (d *Dashboard) signin(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" || len(token) > maxTokenLen {
		d.render(w, http.StatusBadRequest, "signin.html", signinPage{Error: "form field token: paste the operator token (operator.token in the data directory) or a tenant token from `snavio token create`"})
		return
	}
	if _, err := d.o.Authenticate(r.Context(), token); err != nil {
		status, msg := http.StatusUnauthorized, "That token is not valid: it may be mistyped, revoked, or from another data directory."
		if !errors.Is(err, server.ErrUnknownToken) {
			status, msg = http.StatusServiceUnavailable, "Tokens cannot be checked right now; retry, and see the server log if it persists."
		}
		d.render(w, status, "signin.html", signinPage{Error: msg})
		return
	}
	id, _ := d.sessions.Create(token)
	http.SetCookie(w, d.cookie(r, id, 0))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (d *Dashboard) signout(w http.ResponseWriter, r *http.Request, si signedIn) {
	d.sessions.Delete(si.id)
	http.SetCookie(w, d.cookie(r, "", -1))
	http.Redirect(w, r, "/ui/signin", http.StatusSeeOther)
}

func (d *Dashboard) ack(w http.ResponseWriter, r *http.Request, si signedIn) {
	key := r.PostFormValue("alert")
	if !validKey(key) {
		http.Error(w, "form field alert: not an alert key; acknowledge from the dashboard's inbox", http.StatusBadRequest)
		return
	}
	d.acks.add(si.p.String(), key)
	http.Redirect(w, r, "/#alerts", http.StatusSeeOther)
}

func (d *Dashboard) home(w http.ResponseWriter, r *http.Request) {
	si, ok := d.current(r)
	if !ok {
		http.Redirect(w, r, "/ui/signin", http.StatusSeeOther)
		return
	}
	select {
	case d.pagesIn <- struct{}{}:
		defer func() { <-d.pagesIn }()
	default:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many dashboard pages are being rendered on this server; reload in a moment", http.StatusServiceUnavailable)
		return
	}
	page, err := d.page(r.Context(), si)
	if err != nil {
		d.o.Logger.Error("dashboard: reading the page's data failed", "principal", si.p.String(), "err", err)
		http.Error(w, "reading the dashboard's data failed: "+err.Error()+"; reload, and see the server log if it persists", http.StatusInternalServerError)
		return
	}
	d.render(w, http.StatusOK, "page.html", page)
}

// age formats a duration for a table cell.
func age(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}
