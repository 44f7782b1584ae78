package python_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/reactor"
)

// TestServerCalls runs clients/python/tests/test_server_calls.py, the
// Python package's tests of what `rpcd serve` cannot exercise, against an
// in-process server with the built-in routes and the test routes of
// registerTestRoutes: the server's calls to the client and its pushes, and a
// handler that shows whether the client's Cancel and deadline reached it.
// The address goes to Python in $RPCD_PY_CALLBACK_ADDR. The rest of the
// package's tests run against `rpcd serve` on their own (.ci/run).
func TestServerCalls(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH; skipping the Python client's tests of calls from the server")
	}
	reg := handler.NewRegistry()
	builtin.Register(reg)
	registerTestRoutes(reg)
	s := reactor.New(reg, reactor.Options{})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "-v", "test_server_calls")
	cmd.Dir = testsDir(t)
	cmd.Env = append(os.Environ(), "RPCD_PY_CALLBACK_ADDR="+s.Addr().String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python tests failed: %v\n%s", err, out)
	}
	t.Logf("python tests:\n%s", out)
}

// CallMeBack is what PyTest/CallMeBack takes: the server calls Route on the
// calling client with Payload, labelled Raw, or JSON when JSON is set
// (Payload is then one JSON value). DeadlineMS, when set, bounds that call;
// CancelAfterMS, when set, cancels it that many milliseconds after it was
// sent. In JSON, Payload is base64.
type CallMeBack struct {
	Route         string `json:"route"`
	Payload       []byte `json:"payload"`
	JSON          bool   `json:"json"`
	DeadlineMS    int    `json:"deadline_ms"`
	CancelAfterMS int    `json:"cancel_after_ms"`
}

// CalledBack is what PyTest/CallMeBack answers: the client's reply, or the
// error the server's call got (Code 0 when the client answered a Response).
type CalledBack struct {
	Reply       []byte `json:"reply"`
	Code        int    `json:"code"`
	Message     string `json:"message"`
	Unprocessed bool   `json:"unprocessed"`
}

// Push is what PyTest/Push takes: one one-way message to Route on the
// calling client per payload, in order; Raw, or JSON when JSON is set.
type Push struct {
	Route    string   `json:"route"`
	Payloads [][]byte `json:"payloads"`
	JSON     bool     `json:"json"`
}

// WaitState is what PyTest/WaitState answers about the last PyTest/Wait:
// "waiting" while it runs, then its context's error ("context canceled",
// "context deadline exceeded"); DeadlineMS is what was left of its deadline
// when it started, -1 for none.
type WaitState struct {
	State      string `json:"state"`
	DeadlineMS int64  `json:"deadline_ms"`
}

// registerTestRoutes adds the routes test_server_calls.py uses:
// PyTest/CallMeBack (a Request from the server to the client, Blocking as a
// handler that waits for its peer must be), PyTest/Push (one-way messages),
// and PyTest/Wait with PyTest/WaitState (a Blocking handler that waits for
// its context to end, and what ended it).
func registerTestRoutes(reg *handler.Registry) {
	reg.Handle("PyTest/CallMeBack", handler.Func(func(ctx context.Context, in CallMeBack) (CalledBack, error) {
		peer := handler.CallFrom(ctx).Peer
		if in.DeadlineMS > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(in.DeadlineMS)*time.Millisecond)
			defer cancel()
		}
		if in.CancelAfterMS > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			t := time.AfterFunc(time.Duration(in.CancelAfterMS)*time.Millisecond, cancel)
			defer t.Stop()
		}
		var out CalledBack
		var err error
		if in.JSON {
			var reply json.RawMessage
			err = peer.Call(ctx, in.Route, json.RawMessage(in.Payload), &reply)
			out.Reply = reply
		} else {
			out.Reply, err = peer.CallRaw(ctx, in.Route, in.Payload, nil)
		}
		if err != nil {
			out.Code = int(handler.CodeOf(err))
			out.Message = handler.MessageOf(err)
			out.Unprocessed = handler.IsUnprocessed(err)
		}
		return out, nil
	}), handler.Blocking())
	reg.Handle("PyTest/Push", handler.Func(func(ctx context.Context, in Push) (int, error) {
		peer := handler.CallFrom(ctx).Peer
		for i, p := range in.Payloads {
			var err error
			if in.JSON {
				err = peer.Notify(ctx, in.Route, json.RawMessage(p))
			} else {
				err = peer.NotifyRaw(ctx, in.Route, p)
			}
			if err != nil {
				return i, err
			}
		}
		return len(in.Payloads), nil
	}))

	var mu sync.Mutex
	var last WaitState
	reg.Handle("PyTest/Wait", handler.Func(func(ctx context.Context, _ struct{}) (struct{}, error) {
		left := int64(-1)
		if dl, ok := ctx.Deadline(); ok {
			left = time.Until(dl).Milliseconds()
		}
		mu.Lock()
		last = WaitState{State: "waiting", DeadlineMS: left}
		mu.Unlock()
		<-ctx.Done()
		mu.Lock()
		last.State = ctx.Err().Error()
		mu.Unlock()
		return struct{}{}, ctx.Err()
	}), handler.Blocking())
	reg.Handle("PyTest/WaitState", handler.Func(func(context.Context, struct{}) (WaitState, error) {
		mu.Lock()
		defer mu.Unlock()
		return last, nil
	}))
}

// testsDir is tests/ next to this file.
func testsDir(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		file = "python_test.go" // go test runs in the package directory
	}
	p, err := filepath.Abs(filepath.Join(filepath.Dir(file), "tests"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
