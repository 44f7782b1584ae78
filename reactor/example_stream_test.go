package reactor_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"strings"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/reactor"
)

// A server handler opens a stream to its client through its Peer (a
// handler.StreamOpener) and reads what the client's stream handler sends.
// It waits, so its route is Blocking: an inline handler must not.
func ExamplePeer_OpenStream() {
	reg := handler.NewRegistry()
	reg.HandleFunc("Logs/Collect", func(ctx context.Context, req, reply []byte) ([]byte, error) {
		peer := handler.CallFrom(ctx).Peer.(handler.StreamOpener)
		s, err := peer.OpenStream(ctx, "Client/Logs")
		if err != nil {
			return reply, err
		}
		s.CloseSend() // the server sends nothing
		logs, err := io.ReadAll(s)
		if err != nil {
			return reply, err
		}
		return fmt.Appendf(reply, "%d lines", strings.Count(string(logs), "\n")), s.Close()
	}, handler.Blocking())
	srv := reactor.New(reg, reactor.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown(context.Background())

	// The client serves the stream route the server opens.
	mine := handler.NewRegistry()
	mine.HandleStream("Client/Logs", func(ctx context.Context, s handler.Stream) error {
		_, err := io.WriteString(s, strings.Repeat("a log line\n", 10000))
		return err
	})
	c, err := client.Dial(context.Background(), srv.Addr().String(), client.Options{Handler: mine})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	reply, err := c.CallRaw(context.Background(), "Logs/Collect", nil, nil)
	fmt.Println(string(reply), err)
	// Output: 10000 lines <nil>
}
