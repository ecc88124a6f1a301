package route_test

import "github.com/snavio/snavio/internal/cli/route/routetest"

var t0 = routetest.T0
