package reactor_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/reactor"
	"github.com/rpcd/rpcd/ws"
)

// The suite over WebSocket: with RPCD_TEST_WS=1, start serves each server
// on WebSocket too (ws.Handler at /ws, on an HTTP server of its own), and
// dial and dialRaw connect that way, one frame a message;
// TestSuiteOverWebSocket runs the end-to-end tests again so.

var overWS = os.Getenv("RPCD_TEST_WS") == "1"

// wsURLs maps each server started over WebSocket to its URL.
var wsURLs sync.Map // *reactor.Server -> string

// serveWS serves s over WebSocket until the test ends, and returns its URL.
func serveWS(t testing.TB, s *reactor.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(ws.Path, ws.Handler(s, ws.Options{}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	url := "ws://" + ln.Addr().String() + ws.Path
	wsURLs.Store(s, url)
	return url
}

// wsDial is a client.Options Dial to s over WebSocket, serving s so if it
// is not yet (a test that starts its server itself).
func wsDial(t testing.TB, s *reactor.Server) func(ctx context.Context, addr string) (net.Conn, error) {
	url, ok := wsURLs.Load(s)
	if !ok {
		url = serveWS(t, s)
	}
	return func(ctx context.Context, _ string) (net.Conn, error) {
		return ws.Dial(ctx, url.(string), nil)
	}
}

// TestSuiteOverWebSocket runs the end-to-end suite again with every
// connection over WebSocket, served by ws.Handler through ServeConn.
func TestSuiteOverWebSocket(t *testing.T) {
	if overWS || overTLS || overStd {
		t.Skip("already over another transport")
	}
	if testing.Short() {
		t.Skip("the suite over WebSocket runs in a process of its own")
	}
	suite := []string{
		"TestBuiltinRoutes", "TestManyCallers", "TestLargePayloads", "TestEveryErrorCode",
		"TestUnknownRouteAndBadArguments", "TestHandlerPanic", "TestCallContext",
		"TestClientCancelReachesHandler", "TestDeadlineExceeded", "TestBlockingInflightLimit",
		"TestNotify", "TestFutures", "TestPipelinedRequests", "TestBadPeerIsolated",
		"TestShutdownAnswersCallsInFlight", "TestShutdownTimeout", "TestShutdownUnderLoad",
		"TestKeepAlive", "TestMaxConnAge", "TestCancelFloodBounded", "TestReplyToGoneClient",
		"TestAuthentication", "TestAuthorization",
		"TestReverseCall", "TestReverseCallRules", "TestPushToAll",
		"TestPubSub", "TestPubSubFanOut", "TestClientCredentials",
		"TestStreamUpload", "TestStreamDownload", "TestStreamBothWays", "TestStreamFlowControl",
		"TestStreamCancel", "TestStreamShutdown", "TestStreamsManyAtOnce", "TestStreamFromServer",
		"TestCompression", "TestStreamCompression", "TestPubSubCompression",
		"TestPipelinedReaderNotCut", "TestClientPipelinesLargeCalls", "TestFrameOutcomes", "TestNoCallsToAPeerGoingAway",
		"TestCancelledBeforeItRan", "TestTopicPermissions", "TestInlineHandlerCallingOut",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^("+strings.Join(suite, "|")+")$", "-test.v")
	cmd.Env = append(os.Environ(), "RPCD_TEST_WS=1")
	out, err := cmd.CombinedOutput()
	passed := len(topPassed.FindAll(out, -1))
	if err != nil || passed < len(suite) {
		t.Fatalf("the suite over WebSocket: %v; %d of %d tests passed\n%s", err, passed, len(suite), out)
	}
	t.Logf("%d tests passed over WebSocket", passed)
}
