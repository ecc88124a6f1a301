package devserver

import (
	"context"
	"net/http"
	"time"

	"github.com/snavio/snavio/internal/dashboard"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// dashboardUI builds the web dashboard (docs/dashboard.md) over the
// control API handler api: the server calls it with its authenticator.
func (s *Serve) dashboardUI(api http.Handler) func(*server.Authenticator) http.Handler {
	return func(auth *server.Authenticator) http.Handler {
		d, err := dashboard.New(dashboard.Options{API: api, Authenticate: auth.Authenticate, Routes: s.routeHealth, Clock: s.clk, Logger: s.log})
		if err != nil { // only a broken embedded template, which the tests catch
			s.log.Error("the dashboard cannot start", "err", err)
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "the dashboard cannot start: "+err.Error(), http.StatusInternalServerError)
			})
		}
		return d
	}
}

// routeHealth reads every route's queue now, with the queue monitor's
// last verdict on it.
func (s *Serve) routeHealth(ctx context.Context) ([]dashboard.RouteHealth, error) {
	data, err := s.store.Registry().Load(ctx, s.clk.Now(), registry.KindRoute)
	if err != nil {
		return nil, err
	}
	stats, err := s.store.ListQueues(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]dashboard.RouteHealth, 0, len(data.Routes))
	for _, r := range data.Routes {
		rh := dashboard.RouteHealth{Target: r.Target, Command: r.Command, Queue: r.QueueARN, ExpectedDrain: time.Duration(r.DrainSeconds()) * time.Second}
		for _, q := range stats {
			if q.ARN == r.QueueARN {
				rh.Queue, rh.Depth, rh.InFlight, rh.OldestAge = q.QueueConfig.Name, q.Visible, q.InFlight, q.OldestAge
			}
		}
		if st, ok := s.monitor.Last(r.QueueARN); ok {
			rh.Health, rh.Reason = string(st.Health), st.Reason
		}
		out = append(out, rh)
	}
	return out, nil
}
