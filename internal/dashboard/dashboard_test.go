package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/alerts"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// fakeAPI stands in for the control API's alert and telemetry reads: it
// answers from per-tenant data and records who asked, so the tests see
// that the dashboard calls it as the signed-in principal. (The real
// handlers' scoping is TestBrowser's, against a real dispatch serve.)
type fakeAPI struct {
	mu     sync.Mutex
	alerts map[string][]alerts.Alert
	telem  map[string][]wire.TelemetryRecord
	asked  []server.Principal
	// entered and release, when set, hold each /v1/alerts call until
	// release is closed, after saying so on entered.
	entered chan struct{}
	release chan struct{}
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, ok := server.PrincipalFrom(r.Context())
	if !ok {
		http.Error(w, "no principal", http.StatusUnauthorized)
		return
	}
	f.mu.Lock()
	f.asked = append(f.asked, p)
	f.mu.Unlock()
	var v any
	switch r.URL.Path {
	case "/v1/alerts":
		if f.entered != nil {
			f.entered <- struct{}{}
			<-f.release
		}
		var out []alerts.Alert
		for tenant, as := range f.alerts {
			if p.CanAccessTenant(tenant) {
				out = append(out, as...)
			}
		}
		v = map[string]any{"alerts": out}
	case "/v1/telemetry":
		page := wire.TelemetryPage{Records: []wire.TelemetryRecord{}}
		if r.URL.Query().Get("after") == "" { // a first read; later pages are empty
			for tenant, rs := range f.telem {
				if p.CanAccessTenant(tenant) {
					page.Records = append(page.Records, rs...)
				}
			}
		}
		v = page
	default:
		http.NotFound(w, r)
		return
	}
	b, _ := json.Marshal(v)
	_, _ = w.Write(b)
}

func (f *fakeAPI) principals() []server.Principal {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]server.Principal(nil), f.asked...)
}

// tokens is a fake authenticator: token -> principal; revoke deletes.
type tokens struct {
	mu sync.Mutex
	m  map[string]server.Principal
}

func (t *tokens) auth(_ context.Context, token string) (server.Principal, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.m[token]
	if !ok {
		return server.Principal{}, server.ErrUnknownToken
	}
	return p, nil
}

func (t *tokens) revoke(token string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, token)
}

type fixture struct {
	d      *Dashboard
	api    *fakeAPI
	tokens *tokens
	routes int
	clk    *clock.Fake
}

func newFixture(t *testing.T) *fixture { return newFixtureWith(t, Options{}) }

// newFixtureWith builds the dashboard with o's bounds.
func newFixtureWith(t *testing.T, o Options) *fixture {
	t.Helper()
	now := t0.Add(30 * time.Minute)
	f := &fixture{clk: clock.NewFake(now), api: &fakeAPI{
		alerts: map[string][]alerts.Alert{
			"demo":  {{Tenant: "demo", Event: "snavio.command.invalid", Critical: true, At: now.Add(-time.Minute), Summary: "demo-alert", Payload: json.RawMessage(`{}`)}},
			"other": {{Tenant: "other", Event: "snavio.command.invalid", Critical: true, At: now.Add(-time.Minute), Summary: "other-alert", Payload: json.RawMessage(`{}`)}},
		},
		telem: map[string][]wire.TelemetryRecord{
			"demo": {
				{Seq: 1, Tenant: "demo", At: now.Add(-2 * time.Minute), Event: json.RawMessage(`{"event":"snavio.command.delivered"}`)},
				{Seq: 2, Tenant: "demo", At: now.Add(-2 * time.Minute), Event: json.RawMessage(`{"event":"snavio.command.delivered"}`)},
			},
			"other": {{Seq: 1, Tenant: "other", At: now.Add(-time.Minute), Event: json.RawMessage(`{"event":"snavio.command.failed"}`)}},
		},
	}, tokens: &tokens{m: map[string]server.Principal{
		"demo-token": server.TenantPrincipal("demo"), "op-token": server.OperatorPrincipal(),
	}}}
	o.API, o.Authenticate, o.Clock = f.api, f.tokens.auth, f.clk
	o.Routes = func(context.Context) ([]RouteHealth, error) {
		f.routes++
		return []RouteHealth{{Target: "orders", Command: "create", Queue: "q", Health: "healthy"}}, nil
	}
	d, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	f.d = d
	return f
}

// do serves one request; form, when not nil, is a urlencoded POST body.
func (f *fixture) do(method, target string, form url.Values, cookie *http.Cookie, hdr map[string]string) *httptest.ResponseRecorder {
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	r := httptest.NewRequest(method, target, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != nil {
		r.AddCookie(cookie)
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	f.d.ServeHTTP(w, r)
	return w
}

// signIn signs in with token and returns the session cookie and the CSRF
// token of the page.
func (f *fixture) signIn(t *testing.T, token string) (*http.Cookie, string) {
	t.Helper()
	w := f.do("POST", "/ui/signin", url.Values{"token": {token}}, nil, nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/" {
		t.Fatalf("sign in: %d %s", w.Code, w.Body)
	}
	c := w.Result().Cookies()[0]
	sess, ok := f.d.sessions.Get(c.Value)
	if !ok {
		t.Fatal("no server-side session after sign-in")
	}
	return c, sess.CSRF
}

func TestSignInSetsAHardenedCookie(t *testing.T) {
	f := newFixture(t)
	c, _ := f.signIn(t, "demo-token")
	if c.Name != CookieName || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/" {
		t.Fatalf("cookie = %+v; want HttpOnly, SameSite=Strict, Path=/, not Secure over plain HTTP", c)
	}
	if strings.Contains(c.Value, "demo-token") {
		t.Fatal("the cookie carries the token")
	}
	// Over TLS the cookie is Secure.
	w := f.do("POST", "https://dash.example/ui/signin", url.Values{"token": {"demo-token"}}, nil, nil)
	if cs := w.Result().Cookies(); len(cs) != 1 || !cs[0].Secure {
		t.Fatalf("cookie over TLS = %+v; want Secure", cs)
	}
}

func TestSignInRefusesBadTokens(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		token string
		code  int
	}{
		{"", http.StatusBadRequest},
		{strings.Repeat("x", maxTokenLen+1), http.StatusBadRequest},
		{"not-a-token", http.StatusUnauthorized},
	} {
		w := f.do("POST", "/ui/signin", url.Values{"token": {tc.token}}, nil, nil)
		if w.Code != tc.code || len(w.Result().Cookies()) != 0 {
			t.Errorf("token %.20q: %d, cookies %v; want %d and none", tc.token, w.Code, w.Result().Cookies(), tc.code)
		}
	}
	if f.d.sessions.Len() != 0 {
		t.Fatalf("%d sessions after refused sign-ins", f.d.sessions.Len())
	}
}

func TestSignedOutPagesRedirectToSignIn(t *testing.T) {
	f := newFixture(t)
	for _, target := range []string{"/", "/?x=1"} {
		if w := f.do("GET", target, nil, nil, nil); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/signin" {
			t.Errorf("GET %s signed out: %d %s", target, w.Code, w.Header().Get("Location"))
		}
	}
	if w := f.do("GET", "/ui/events", nil, nil, nil); w.Code != http.StatusUnauthorized {
		t.Errorf("GET /ui/events signed out: %d, want 401", w.Code)
	}
	bogus := &http.Cookie{Name: CookieName, Value: "forged"}
	if w := f.do("GET", "/", nil, bogus, nil); w.Code != http.StatusSeeOther {
		t.Errorf("GET / with a forged cookie: %d, want 303", w.Code)
	}
}

func TestPostsNeedTheSessionsCSRFToken(t *testing.T) {
	f := newFixture(t)
	c, csrf := f.signIn(t, "demo-token")
	_, otherCSRF := f.signIn(t, "demo-token")
	key := alertKey(f.api.alerts["demo"][0])
	for _, tc := range []struct {
		name string
		form url.Values
		code int
	}{
		{"no token", url.Values{"alert": {key}}, http.StatusForbidden},
		{"another session's token", url.Values{"alert": {key}, "csrf": {otherCSRF}}, http.StatusForbidden},
		{"bad alert key", url.Values{"alert": {"<script>"}, "csrf": {csrf}}, http.StatusBadRequest},
		{"right token", url.Values{"alert": {key}, "csrf": {csrf}}, http.StatusSeeOther},
	} {
		if w := f.do("POST", "/ui/alerts/ack", tc.form, c, nil); w.Code != tc.code {
			t.Errorf("%s: %d %s; want %d", tc.name, w.Code, w.Body, tc.code)
		}
	}
	if !f.d.acks.has("tenant:demo", key) {
		t.Fatal("the acknowledged alert is not recorded")
	}
	// Sign-out needs it too.
	if w := f.do("POST", "/ui/signout", url.Values{}, c, nil); w.Code != http.StatusForbidden {
		t.Fatalf("sign-out without the CSRF token: %d", w.Code)
	}
}

func TestCrossOriginPostsAreRefused(t *testing.T) {
	f := newFixture(t)
	c, csrf := f.signIn(t, "demo-token")
	form := url.Values{"csrf": {csrf}}
	for _, hdr := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site"},
		{"Origin": "http://evil.example"},
	} {
		if w := f.do("POST", "/ui/signout", form, c, hdr); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "cross-origin request refused") {
			t.Errorf("sign-out with %v: %d %s; want 403", hdr, w.Code, w.Body)
		}
		if w := f.do("POST", "/ui/signin", url.Values{"token": {"demo-token"}}, nil, hdr); w.Code != http.StatusForbidden {
			t.Errorf("sign-in with %v: %d; want 403 (login CSRF)", hdr, w.Code)
		}
	}
	if _, ok := f.d.sessions.Get(c.Value); !ok {
		t.Fatal("a refused cross-origin sign-out ended the session")
	}
	// The same request from the dashboard's own page goes through.
	if w := f.do("POST", "/ui/signout", form, c, map[string]string{"Sec-Fetch-Site": "same-origin"}); w.Code != http.StatusSeeOther {
		t.Fatalf("same-origin sign-out: %d %s", w.Code, w.Body)
	}
}

func TestSignOutEndsTheSessionOnTheServer(t *testing.T) {
	f := newFixture(t)
	c, csrf := f.signIn(t, "demo-token")
	w := f.do("POST", "/ui/signout", url.Values{"csrf": {csrf}}, c, nil)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", w.Code)
	}
	if cs := w.Result().Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 {
		t.Fatalf("sign-out cookies = %+v; want the cookie deleted", cs)
	}
	// The old cookie, replayed, no longer works.
	if w := f.do("GET", "/", nil, c, nil); w.Code != http.StatusSeeOther {
		t.Fatalf("GET / with the signed-out cookie: %d", w.Code)
	}
}

func TestRevokedTokenEndsTheSession(t *testing.T) {
	f := newFixture(t)
	c, _ := f.signIn(t, "demo-token")
	if w := f.do("GET", "/", nil, c, nil); w.Code != http.StatusOK {
		t.Fatalf("GET /: %d", w.Code)
	}
	f.tokens.revoke("demo-token")
	if w := f.do("GET", "/", nil, c, nil); w.Code != http.StatusSeeOther {
		t.Fatalf("GET / after the token was revoked: %d, want 303 to sign-in", w.Code)
	}
	if f.d.sessions.Len() != 0 {
		t.Fatal("the revoked token's session is still stored")
	}
}

func TestTenantPageIsReadAsTheTenant(t *testing.T) {
	f := newFixture(t)
	c, _ := f.signIn(t, "demo-token")
	w := f.do("GET", "/", nil, c, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("GET /: %d %s", w.Code, w.Body)
	}
	body := w.Body.String()
	if !strings.Contains(body, "demo-alert") || strings.Contains(body, "other-alert") {
		t.Fatal("the tenant page does not show exactly the tenant's alerts")
	}
	if !strings.Contains(body, `id="total-delivered">2<`) || !strings.Contains(body, `id="total-failed">0<`) {
		t.Fatal("the tenant's chart does not count exactly its own outcomes")
	}
	if strings.Contains(body, `id="routes"`) || f.routes != 0 {
		t.Fatal("a tenant page read route health")
	}
	for _, p := range f.api.principals() {
		if p != server.TenantPrincipal("demo") {
			t.Fatalf("the dashboard called the API as %s for tenant:demo's page", p)
		}
	}
	for _, h := range []string{"Content-Security-Policy", "X-Frame-Options", "X-Content-Type-Options"} {
		if w.Header().Get(h) == "" {
			t.Errorf("missing %s", h)
		}
	}
}

func TestOperatorPageShowsRoutesAndEveryTenant(t *testing.T) {
	f := newFixture(t)
	c, _ := f.signIn(t, "op-token")
	w := f.do("GET", "/", nil, c, nil)
	body := w.Body.String()
	if w.Code != http.StatusOK || !strings.Contains(body, `id="routes"`) || f.routes != 1 {
		t.Fatalf("operator page: %d, routes read %d times", w.Code, f.routes)
	}
	if !strings.Contains(body, "demo-alert") || !strings.Contains(body, "other-alert") || !strings.Contains(body, `id="total-failed">1<`) {
		t.Fatal("the operator page does not show every tenant")
	}
}

func TestAcknowledgedAlertsAreReadForTheirPrincipalOnly(t *testing.T) {
	f := newFixture(t)
	c, csrf := f.signIn(t, "op-token")
	key := alertKey(f.api.alerts["demo"][0])
	f.do("POST", "/ui/alerts/ack", url.Values{"alert": {key}, "csrf": {csrf}}, c, nil)
	if got := f.do("GET", "/", nil, c, nil).Body.String(); !strings.Contains(got, `id="unread">1<`) {
		t.Fatal("the operator's unread count did not drop to 1")
	}
	dc, _ := f.signIn(t, "demo-token")
	if got := f.do("GET", "/", nil, dc, nil).Body.String(); !strings.Contains(got, `id="unread">1<`) {
		t.Fatal("the operator's acknowledgement changed the tenant's inbox")
	}
}

func TestAcksAreBounded(t *testing.T) {
	a := newAcks(2)
	for _, k := range []string{"a", "b", "a", "c"} {
		a.add("p", k)
	}
	if a.has("p", "a") || !a.has("p", "b") || !a.has("p", "c") || a.has("q", "b") {
		t.Fatal("acks keep the wrong keys")
	}
}

func TestNiceCeil(t *testing.T) {
	for n, want := range map[int]int{0: 2, 1: 2, 2: 2, 3: 5, 5: 5, 6: 10, 11: 20, 99: 100, 101: 200, 4999: 5000} {
		if got := niceCeil(n); got != want {
			t.Errorf("niceCeil(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestChartDrawsOneRectPerNonZeroCount(t *testing.T) {
	tp := Throughput{Start: t0, Counts: make([][]int, len(Outcomes)), Totals: make([]int, len(Outcomes))}
	for i := range tp.Counts {
		tp.Counts[i] = make([]int, 60)
	}
	tp.Counts[0][0], tp.Counts[0][59], tp.Counts[3][59] = 3, 1, 2
	svg := string(chartSVG(tp))
	if n := strings.Count(svg, "<rect "); n != 3 {
		t.Fatalf("%d bars, want 3", n)
	}
	if !strings.Contains(svg, "12:59 invalid: 2") || !strings.Contains(svg, "peak 3") {
		t.Fatalf("chart lacks its labels: %s", svg)
	}
}

// FuzzSignInAndAck: any form input gets a 4xx or a redirect, never a
// 5xx, and only the valid token makes a session.
func FuzzSignInAndAck(f *testing.F) {
	for _, s := range []string{"", "demo-token", "op-token", "\x00", strings.Repeat("a", 600), "%zz", "token=x&token=y"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, token, key string) {
		fx := newFixture(t)
		w := fx.do("POST", "/ui/signin", url.Values{"token": {token}}, nil, nil)
		valid := strings.TrimSpace(token) == "demo-token" || strings.TrimSpace(token) == "op-token"
		if w.Code >= 500 || w.Code == http.StatusForbidden || (w.Code == http.StatusSeeOther) != valid || (fx.d.sessions.Len() == 1) != valid {
			t.Fatalf("sign-in with %q: %d, %d sessions", token, w.Code, fx.d.sessions.Len())
		}
		c, csrf := fx.signIn(t, "demo-token")
		w = fx.do("POST", "/ui/alerts/ack", url.Values{"alert": {key}, "csrf": {csrf}}, c, nil)
		if w.Code != http.StatusSeeOther && w.Code != http.StatusBadRequest && w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("ack %q: %d", key, w.Code)
		}
	})
}

func TestPagesBeingRenderedAreBounded(t *testing.T) {
	f := newFixtureWith(t, Options{MaxPages: 1})
	c, _ := f.signIn(t, "demo-token")
	f.api.entered, f.api.release = make(chan struct{}), make(chan struct{})
	done := make(chan int)
	go func() { done <- f.do("GET", "/", nil, c, nil).Code }()
	<-f.api.entered // the first page is inside the API
	if w := f.do("GET", "/", nil, c, nil); w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("a second page at once: %d, want 503 with Retry-After", w.Code)
	}
	close(f.api.release)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("the first page: %d", code)
	}
}

// readEvent reads the stream until an event named name, or fails.
func readEvent(t *testing.T, sc *bufio.Scanner, name string) {
	t.Helper()
	for sc.Scan() {
		if sc.Text() == "event: "+name {
			return
		}
	}
	t.Fatalf("the stream ended without event %s: %v", name, sc.Err())
}

func TestLiveStreamEndsAtSignOutAndIsBounded(t *testing.T) {
	f := newFixtureWith(t, Options{MaxStreams: 1})
	srv := httptest.NewServer(f.d)
	defer srv.Close()
	c, _ := f.signIn(t, "demo-token")
	open := func() *http.Response {
		req, _ := http.NewRequest("GET", srv.URL+"/ui/events?alerts_since=2000-01-01T00:00:00Z", nil)
		req.AddCookie(c)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := open()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	readEvent(t, sc, "alert") // demo's alert, newer than alerts_since
	if second := open(); second.StatusCode != http.StatusServiceUnavailable {
		second.Body.Close()
		t.Fatalf("a second stream with MaxStreams 1: %d, want 503", second.StatusCode)
	}
	// A silent stream says it is alive every 15 s.
	f.clk.Advance(keepAlive)
	for sc.Scan() && sc.Text() != ": keep-alive" {
	}
	if sc.Err() != nil {
		t.Fatal(sc.Err())
	}
	f.d.sessions.Delete(c.Value)
	readEvent(t, sc, "signedout")
	for sc.Scan() { // its data line, then the end of the response
		if strings.HasPrefix(sc.Text(), "event:") {
			t.Fatalf("the stream went on after sign-out: %q", sc.Text())
		}
	}
}

func TestLiveStreamRefusesBadParameters(t *testing.T) {
	f := newFixture(t)
	c, _ := f.signIn(t, "demo-token")
	if w := f.do("GET", "/ui/events?alerts_since=yesterday", nil, c, nil); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "alerts_since") {
		t.Fatalf("bad alerts_since: %d %s", w.Code, w.Body)
	}
	if w := f.do("GET", "/ui/events", nil, c, map[string]string{"Last-Event-ID": "x"}); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "Last-Event-ID") {
		t.Fatalf("bad Last-Event-ID: %d %s", w.Code, w.Body)
	}
}

func TestStaticAssetsAreServedAndDirectoriesAreNot(t *testing.T) {
	f := newFixture(t)
	for target, want := range map[string]int{"/ui/static/app.js": 200, "/ui/static/app.css": 200, "/ui/static/": 404, "/ui/static/nope.js": 404, "/ui/nope": 404} {
		w := f.do("GET", target, nil, nil, nil)
		if w.Code != want {
			t.Errorf("GET %s: %d, want %d", target, w.Code, want)
		}
		if want == 200 && w.Header().Get("Cache-Control") == "" {
			t.Errorf("GET %s: no Cache-Control", target)
		}
	}
}
