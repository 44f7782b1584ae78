package reactor_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/reactor"
)

// The suite on the standard library transport: with RPCD_TEST_STD=1,
// newServer sets Options.StdTransport, so that every connection of plain
// TCP is served by a goroutine of its own, as on Windows, and
// TestSuiteOverStdTransport runs the end-to-end tests again so.

var overStd = os.Getenv("RPCD_TEST_STD") == "1"

// topPassed matches the line of a test that passed, not of a subtest.
var topPassed = regexp.MustCompile(`(?m)^--- PASS: Test`)

// TestTransport: a server says what serves its connections: epoll loops
// on Linux, kqueue loops on macOS and the BSDs, and the standard library
// transport on Windows, over TLS, and with Options.StdTransport, which
// serves calls as the loops do.
func TestTransport(t *testing.T) {
	loops, std := "kqueue event loops", "goroutine per connection"
	switch runtime.GOOS {
	case "linux":
		loops = "epoll event loops"
	case "windows":
		loops = std
	}
	for _, tc := range []struct {
		name string
		opts reactor.Options
		want string
	}{
		{"default", reactor.Options{Loops: 2}, loops},
		{"StdTransport", reactor.Options{Loops: 2, StdTransport: true}, std},
		{"TLS", reactor.Options{Loops: 2, TLS: serverTLS(t)}, std},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.opts.TLS == nil && (overStd || overTLS) {
				tc.want = std // newServer serves so
			}
			s := start(t, builtinRegistry(), tc.opts)
			wantLoops := 2
			if tc.want == std {
				wantLoops = 0
			}
			if got := s.Transport(); got != tc.want || s.Loops() != wantLoops {
				t.Fatalf("Transport %q, Loops %d; want %q, %d", got, s.Loops(), tc.want, wantLoops)
			}
			if tc.opts.TLS != nil {
				return // TestMutualTLS calls it
			}
			c := dial(t, s, client.Options{})
			if reply, err := c.CallRaw(ctxT(t), builtin.EchoPacket, []byte("x"), nil); err != nil || string(reply) != "x" {
				t.Fatalf("a call: %q, %v", reply, err)
			}
		})
	}
}

// TestSuiteOverStdTransport runs the end-to-end suite again with every
// server on the standard library transport (Options.StdTransport), as
// every server is on Windows.
func TestSuiteOverStdTransport(t *testing.T) {
	if overStd || overTLS || overWS {
		t.Skip("already over another transport")
	}
	if testing.Short() {
		t.Skip("the suite on the standard library transport runs in a process of its own")
	}
	suite := []string{
		"TestTransport",
		"TestBuiltinRoutes", "TestManyCallers", "TestLargePayloads", "TestEveryErrorCode",
		"TestUnknownRouteAndBadArguments", "TestHandlerPanic", "TestCallContext",
		"TestClientCancelReachesHandler", "TestDeadlineExceeded", "TestBlockingInflightLimit",
		"TestNotify", "TestFutures", "TestPipelinedRequests", "TestBadPeerIsolated",
		"TestShutdownAnswersCallsInFlight", "TestShutdownTimeout", "TestStartErrors",
		"TestFrameTimeout", "TestIdleTimeout", "TestKeepAlive", "TestMaxConns", "TestPeerThatNeverReads",
		"TestCancelFloodBounded", "TestOneByteSegments", "TestReplyToGoneClient", "TestHugeLengthNoBuffering",
		"TestBigHeaderHoldsLittle", "TestShutdownUnderLoad", "TestShutdownRightAfterConnect",
		"TestAuthentication", "TestHelloWithoutAuthenticator", "TestAuthorization", "TestClientCredentials",
		"TestReverseCall", "TestReverseCallRules", "TestPushToAll", "TestPushToSlowClient", "TestPeerCodec",
		"TestPubSub", "TestPubSubFanOut", "TestPubSubLimits", "TestResubscribeOnReconnect",
		"TestStatsCounts", "TestStatsRefusedAndSlow", "TestRunnerEveryPath",
		"TestStreamUpload", "TestStreamDownload", "TestStreamBothWays", "TestStreamFlowControl",
		"TestStreamWindowEnforced", "TestStreamRawRules", "TestStreamCancel", "TestStreamConnectionLoss",
		"TestStreamShutdown", "TestStreamsManyAtOnce", "TestStreamMaxStreams", "TestStreamFromServer",
		"TestStreamMiddleware",
		"TestCompression", "TestCompressionNotAsked", "TestCompressionRefused", "TestCompressionCluster",
		"TestCompressionWithCredentials", "TestStreamCompression", "TestStreamCompressionRaw", "TestPubSubCompression",
		"TestPipelinedReaderNotCut", "TestClientPipelinesLargeCalls", "TestHalfCloseAnswersAll", "TestClosedPeerCancelsCalls",
		"TestGoAwayOutlivesUnreadInput", "TestFrameOutcomes", "TestNoCallsToAPeerGoingAway", "TestCancelledBeforeItRan",
		"TestTopicPermissions", "TestTopicRefusalsOnTheWire", "TestTopicsWithoutIdentity",
		"TestInlineHandlerCallingOut", "TestWatchdog", "TestInlineRouteMoves",
		"TestMaxConnAge", "TestMaxConnAgeOff", "TestMaxConnAgeSpreadsCalls",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^("+strings.Join(suite, "|")+")$", "-test.v")
	cmd.Env = append(os.Environ(), "RPCD_TEST_STD=1")
	out, err := cmd.CombinedOutput()
	passed := len(topPassed.FindAll(out, -1))
	if err != nil || passed < len(suite) {
		t.Fatalf("the suite on the standard library transport: %v; %d of %d tests passed\n%s", err, passed, len(suite), out)
	}
	t.Logf("%d tests passed on the standard library transport", passed)
}
