package ratelimit

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rpcd/rpcd/handler"
)

// ParseLimits parses limits as rpcd serve's rate-limit setting writes them:
// "ROUTE=RATE[:BURST],...", RATE in calls a second, BURST a whole number
// of calls (one second's worth if not given), ROUTE a route or Any ("*").
// An empty list gives nil, no limit.
//
//	ParseLimits("Math/Sum=1000:100,*=50000")
func ParseLimits(list string) (map[string]Limit, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	limits := map[string]Limit{}
	for _, item := range strings.Split(list, ",") {
		route, spec, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return nil, fmt.Errorf("rpcd: ratelimit: %q is not ROUTE=RATE[:BURST]", item)
		}
		if route != Any && handler.ValidRoute(route) != nil {
			return nil, fmt.Errorf("rpcd: ratelimit: %q is no route, want Controller/Action or *", route)
		}
		if _, dup := limits[route]; dup {
			return nil, fmt.Errorf("rpcd: ratelimit: route %s twice", route)
		}
		rateText, burstText, hasBurst := strings.Cut(spec, ":")
		var l Limit
		var err error
		if l.Rate, err = strconv.ParseFloat(rateText, 64); err != nil || !(l.Rate > 0) || math.IsInf(l.Rate, 0) {
			return nil, fmt.Errorf("rpcd: ratelimit: %s: rate %q, want calls a second above 0", route, rateText)
		}
		if hasBurst {
			if l.Burst, err = strconv.Atoi(burstText); err != nil || l.Burst < 1 {
				return nil, fmt.Errorf("rpcd: ratelimit: %s: burst %q, want 1 or more", route, burstText)
			}
		}
		limits[route] = l
	}
	return limits, nil
}
