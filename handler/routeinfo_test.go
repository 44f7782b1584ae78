package handler_test

import (
	"strings"
	"testing"

	"github.com/rpcd/rpcd/handler"
)

// TestRouteNotes: RouteInfo.Notes says where each route runs and what the
// watchdog saw of it.
func TestRouteNotes(t *testing.T) {
	for _, tc := range []struct {
		info handler.RouteInfo
		want string
	}{
		{handler.RouteInfo{Name: "A/Inline"}, ""},
		{handler.RouteInfo{Name: "A/Blocking", Blocking: true}, "blocking"},
		{handler.RouteInfo{Name: "A/Moved", Blocking: true, Moved: true, Overruns: 9}, "blocking, moved from the event loop, 9 inline overruns"},
		{handler.RouteInfo{Name: "A/Pinned", Inline: true, Overruns: 1}, "pinned inline, 1 inline overrun"},
		{handler.RouteInfo{Name: "A/Stream", Stream: true}, "stream"},
	} {
		if got := strings.Join(tc.info.Notes(), ", "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.info.Name, got, tc.want)
		}
	}
}
