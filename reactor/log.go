package reactor

import (
	"context"
	"fmt"
	"log/slog"
)

// gnetLogger routes gnet's logging into slog. gnet's info lines (start-up
// banners) are demoted to debug.
type gnetLogger struct{ l *slog.Logger }

func (g gnetLogger) log(level slog.Level, format string, args ...any) {
	if g.l.Enabled(context.Background(), level) {
		g.l.Log(context.Background(), level, "gnet: "+fmt.Sprintf(format, args...))
	}
}

func (g gnetLogger) Debugf(format string, args ...any) { g.log(slog.LevelDebug, format, args...) }
func (g gnetLogger) Infof(format string, args ...any)  { g.log(slog.LevelDebug, format, args...) }
func (g gnetLogger) Warnf(format string, args ...any)  { g.log(slog.LevelWarn, format, args...) }
func (g gnetLogger) Errorf(format string, args ...any) { g.log(slog.LevelError, format, args...) }
func (g gnetLogger) Fatalf(format string, args ...any) { g.log(slog.LevelError, format, args...) }
