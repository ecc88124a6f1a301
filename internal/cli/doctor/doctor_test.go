package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/config"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/iostreams"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func TestEstimateSkew(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		sent, recv, server   time.Time
		wantSkew, wantUncert time.Duration
	}{
		{"in sync", t0, t0.Add(100 * time.Millisecond), t0.Add(50 * time.Millisecond), 0, 50 * time.Millisecond},
		{"local ahead", t0, t0.Add(200 * time.Millisecond), t0.Add(100*time.Millisecond - 40*time.Second), 40 * time.Second, 100 * time.Millisecond},
		{"local behind", t0, t0.Add(2 * time.Second), t0.Add(time.Second + 31*time.Second), -31 * time.Second, time.Second},
		{"zero rtt", t0, t0, t0.Add(-time.Second), time.Second, 0},
	} {
		skew, unc := EstimateSkew(tc.sent, tc.recv, tc.server)
		if skew != tc.wantSkew || unc != tc.wantUncert {
			t.Errorf("%s: EstimateSkew = %v ±%v, want %v ±%v", tc.name, skew, unc, tc.wantSkew, tc.wantUncert)
		}
	}
}

func TestJudgeSkewThresholds(t *testing.T) {
	w := 60 * time.Second
	for _, tc := range []struct {
		skew time.Duration
		want string
	}{
		{0, OK},
		{29999 * time.Millisecond, OK},
		{-29999 * time.Millisecond, OK},
		{30 * time.Second, Warn},
		{-30 * time.Second, Warn},
		{47999 * time.Millisecond, Warn},
		{48 * time.Second, Fail},
		{-48 * time.Second, Fail},
		{5 * time.Minute, Fail},
	} {
		c := JudgeSkew(tc.skew, 10*time.Millisecond, w)
		if c.Status != tc.want {
			t.Errorf("JudgeSkew(%v) = %s (%s), want %s", tc.skew, c.Status, c.Detail, tc.want)
		}
		if (c.Status == OK) != (c.Fix == "") {
			t.Errorf("JudgeSkew(%v): status %s with fix %q", tc.skew, c.Status, c.Fix)
		}
		if c.Status == Fail && (!strings.Contains(c.Detail, "rejected") || !strings.Contains(c.Fix, "NTP")) {
			t.Errorf("JudgeSkew(%v) fail does not say commands are rejected and to fix NTP: %+v", tc.skew, c)
		}
	}
	if c := JudgeSkew(-40*time.Second, 0, w); !strings.Contains(c.Detail, "behind") {
		t.Errorf("negative skew detail = %q", c.Detail)
	}
}

// dispatcher is a fake `dispatch serve`: it answers /healthz, /readyz and
// /v1/whoami, reading its time from server (a clock skewed from the
// local one) and moving the local fake clock by rtt during each request.
type dispatcher struct {
	local    *clock.Fake
	skew     time.Duration // server clock minus local clock
	rtt      time.Duration
	token    string
	notReady bool
	noWhoami bool
}

func (d *dispatcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.local.Advance(d.rtt / 2)
	serverNow := d.local.Now().Add(d.skew)
	d.local.Advance(d.rtt / 2)
	w.Header().Set("Date", serverNow.Format(http.TimeFormat))
	switch r.URL.Path {
	case "/healthz":
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	case "/readyz":
		if d.notReady {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":"not ready","error":"loading caches"}`))
			return
		}
		_, _ = w.Write([]byte(`{"status":"ready"}`))
	case string(platform.ProbeWhoami):
		if d.noWhoami {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+d.token {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"the bearer token is not valid","fix":"check the token"}`))
			return
		}
		_ = json.NewEncoder(w).Encode(wire.Whoami{Principal: "operator", Operator: true, ServerTime: serverNow})
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func options(t *testing.T, endpoint, token string, clk clock.Clock) *Options {
	t.Helper()
	dir := t.TempDir()
	paths := config.Paths{ConfigFile: filepath.Join(dir, "config.yaml"), DataDir: dir}
	s := &config.Settings{ConfigFile: paths.ConfigFile, ProfileName: "default", ProfileOrigin: config.FromDefault, Kind: config.KindLocal, EndpointURL: endpoint, DataDir: dir}
	env := func(k string) (string, bool) {
		if k == platform.TokenEnv && token != "" {
			return token, true
		}
		return "", false
	}
	return &Options{
		Paths:    func() (config.Paths, error) { return paths, nil },
		Config:   func() (*config.File, error) { return config.Load(paths.ConfigFile) },
		Settings: func() (*config.Settings, error) { return s, nil },
		Platform: func() (platform.Platform, error) { return platform.New(s, env) },
		Clock:    clk, Timeout: 5 * time.Second, ReplayWindow: DefaultReplayWindow,
	}
}

func statuses(r Report) map[string]Check {
	m := map[string]Check{}
	for _, c := range r.Checks {
		m[c.Name] = c
	}
	return m
}

func TestCheckAgainstAFakeDispatcher(t *testing.T) {
	for _, tc := range []struct {
		name   string
		d      dispatcher
		token  string
		want   map[string]string
		ok     bool
		detail string
	}{
		{"all ok", dispatcher{skew: -2 * time.Second, rtt: 40 * time.Millisecond, token: "tok"}, "tok",
			map[string]string{"config": OK, "profile": OK, "reachable": OK, "ready": OK, "credentials": OK, "clock skew": OK}, true, "2s ahead of"},
		{"skew warns", dispatcher{skew: 35 * time.Second, rtt: 10 * time.Millisecond, token: "tok"}, "tok",
			map[string]string{"credentials": OK, "clock skew": Warn}, true, "35s behind"},
		{"skew fails", dispatcher{skew: -50 * time.Second, rtt: 10 * time.Millisecond, token: "tok"}, "tok",
			map[string]string{"credentials": OK, "clock skew": Fail}, false, "50s ahead of"},
		{"bad token, skew from Date", dispatcher{skew: -50 * time.Second, token: "tok"}, "wrong",
			map[string]string{"credentials": Fail, "clock skew": Fail}, false, "Date header"},
		{"no whoami", dispatcher{token: "tok", noWhoami: true}, "tok",
			map[string]string{"credentials": Fail, "clock skew": OK}, false, "Date header"},
		{"not ready warns", dispatcher{token: "tok", notReady: true}, "tok",
			map[string]string{"ready": Warn, "credentials": OK}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local := clock.NewFake(t0)
			d := tc.d
			d.local = local
			srv := httptest.NewServer(&d)
			defer srv.Close()
			r := check(context.Background(), options(t, srv.URL, tc.token, local))
			got := statuses(r)
			for name, want := range tc.want {
				if got[name].Status != want {
					t.Errorf("%s = %+v, want %s", name, got[name], want)
				}
				if got[name].Status == Fail && got[name].Fix == "" {
					t.Errorf("%s failed without a fix", name)
				}
			}
			if r.OK != tc.ok {
				t.Errorf("OK = %v, want %v: %+v", r.OK, tc.ok, r.Checks)
			}
			if tc.detail != "" && !strings.Contains(got["clock skew"].Detail, tc.detail) {
				t.Errorf("clock skew detail = %q, want %q", got["clock skew"].Detail, tc.detail)
			}
		})
	}
}

func TestCheckUnreachableSkipsTheRest(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	r := check(context.Background(), options(t, url, "tok", clock.NewFake(t0)))
	got := statuses(r)
	if got["reachable"].Status != Fail || !strings.Contains(got["reachable"].Fix, "snavio dispatch serve") {
		t.Fatalf("reachable = %+v", got["reachable"])
	}
	for _, n := range []string{"ready", "credentials", "clock skew"} {
		if got[n].Status != Skip {
			t.Errorf("%s = %+v, want skip", n, got[n])
		}
	}
	if r.OK {
		t.Error("OK with an unreachable dispatcher")
	}
}

func TestCheckBadConfigAndProfile(t *testing.T) {
	o := options(t, "http://127.0.0.1:1", "", clock.NewFake(t0))
	o.Config = func() (*config.File, error) { return nil, errors.New("read config file x: bad YAML") }
	r := check(context.Background(), o)
	if c := statuses(r)["config"]; c.Status != Fail || c.Fix == "" || len(r.Checks) != 6 {
		t.Fatalf("config = %+v (%d checks)", c, len(r.Checks))
	}
	o = options(t, "http://127.0.0.1:1", "", clock.NewFake(t0))
	o.Settings = func() (*config.Settings, error) { return nil, errors.New(`profile "nope" is not in x`) }
	r = check(context.Background(), o)
	if c := statuses(r)["profile"]; c.Status != Fail || statuses(r)["reachable"].Status != Skip {
		t.Fatalf("profile = %+v", r.Checks)
	}
}

func TestRunPrintsAndFails(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	o := options(t, url, "tok", clock.NewFake(t0))
	ios, _, out, _ := iostreams.Test()
	o.Printer = func() (*output.Printer, error) {
		return output.NewPrinter(ios.Out, output.Table, output.NewStyles(ios.Out, false)), nil
	}
	err := Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "1 of 6 checks failed") {
		t.Fatalf("Run = %v", err)
	}
	if !strings.Contains(out.String(), "CHECK") || !strings.Contains(out.String(), "reachable") {
		t.Fatalf("table = %q", out.String())
	}
}
