package interop_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/reactor"
)

// TestPythonClient runs internal/interop/python/test_interop.py, a client written from
// docs/protocol.md alone, against an in-process rpcd server: the built-in
// routes, and the test routes of registerCallBack, through which the server
// calls the client back; and against a second one with topic permissions
// (startTopicsServer), whose address it finds in $RPCD_INTEROP_TOPICS.
func TestPythonClient(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH; skipping the Python interop test")
	}

	reg := handler.NewRegistry()
	builtin.Register(reg)
	registerCallBack(reg)
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

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, scriptPath(t), s.Addr().String())
	cmd.Env = append(os.Environ(), "RPCD_INTEROP_TOPICS="+startTopicsServer(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python interop test failed: %v\n%s", err, out)
	}
	t.Logf("python interop test output:\n%s", out)
}

// startTopicsServer serves the built-in routes with topic permissions until
// the test ends, and returns its address: tokA authenticates alice, a
// reader, who may subscribe to orders.> and publish nowhere; tokW wendy, a
// writer, who may publish to orders.>.
func startTopicsServer(t *testing.T) string {
	topics, err := auth.Topics(map[string]auth.TopicRules{
		"reader": {Subscribe: auth.TopicList{Allow: []string{"orders.>"}}},
		"writer": {Publish: auth.TopicList{Allow: []string{"orders.>"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := handler.NewRegistry()
	builtin.Register(reg)
	s := reactor.New(reg, reactor.Options{
		Authenticator: auth.Tokens{
			"tokA": {Subject: "alice", Roles: []string{"reader"}},
			"tokW": {Subject: "wendy", Roles: []string{"writer"}},
		},
		Topics: topics,
	})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatalf("start the server with topic permissions: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s.Addr().String()
}

// CallMeBack is what Interop/CallMeBack takes: the server calls Route on
// the calling client with Payload, labelled Raw (Peer.CallRaw), or JSON when
// JSON is set (Peer.Call; Payload is then one JSON value). DeadlineMS, when
// set, bounds that call; CancelAfterMS, when set, cancels it that many
// milliseconds after it was sent. In the request's JSON, Payload is base64.
type CallMeBack struct {
	Route         string `json:"route"`
	Payload       []byte `json:"payload"`
	JSON          bool   `json:"json"`
	DeadlineMS    int    `json:"deadline_ms"`
	CancelAfterMS int    `json:"cancel_after_ms"`
}

// CalledBack is what Interop/CallMeBack answers: the client's reply, or the
// error the server's call got (Code 0 when the client answered a Response).
type CalledBack struct {
	Reply       []byte `json:"reply"`
	Code        int    `json:"code"`
	Message     string `json:"message"`
	Unprocessed bool   `json:"unprocessed"`
}

// Push is what Interop/Push takes: one one-way message to Route on the
// calling client per payload, in the order given; Raw (Peer.NotifyRaw), or
// JSON when JSON is set (Peer.Notify; each payload one JSON value).
type Push struct {
	Route    string   `json:"route"`
	Payloads [][]byte `json:"payloads"`
	JSON     bool     `json:"json"`
}

// registerCallBack adds the routes through which test_interop.py has the
// server call the client back, for this test only: Interop/CallMeBack (a
// Request from the server, answered by the client's handler; Blocking, as a
// handler that waits for its peer must be) and Interop/Push (one-way
// messages, which need not wait; it answers how many it sent).
func registerCallBack(reg *handler.Registry) {
	reg.Handle("Interop/CallMeBack", handler.Func(func(ctx context.Context, in CallMeBack) (CalledBack, error) {
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
	reg.Handle("Interop/Push", handler.Func(func(ctx context.Context, in Push) (int, error) {
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
}

// scriptPath is python/test_interop.py next to this test file.
func scriptPath(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		// go test runs in the package directory, which holds this file.
		file = "interop_test.go"
	}
	p, err := filepath.Abs(filepath.Join(filepath.Dir(file), "python", "test_interop.py"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
