package client_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"strings"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/reactor"
)

// streamServer starts a server with a stream route that answers the
// SHA-256 of what it is sent, and the built-in ones (Bench/StreamSource
// among them).
func streamServer() (addr string, stop func()) {
	reg := handler.NewRegistry()
	builtin.Register(reg)
	reg.HandleStream("File/Sum", func(ctx context.Context, s handler.Stream) error {
		h := sha256.New()
		if _, err := io.Copy(h, s); err != nil { // to the client's CloseSend
			return err
		}
		_, err := fmt.Fprintf(s, "%x", h.Sum(nil))
		return err
	})
	srv := reactor.New(reg, reactor.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		log.Fatal(err)
	}
	return srv.Addr().String(), func() { srv.Shutdown(context.Background()) }
}

// An upload: the client writes (Write waits whenever the server's window
// is spent), ends its direction with CloseSend, and reads the answer.
func ExampleClient_OpenStream_upload() {
	addr, stop := streamServer()
	defer stop()
	c, err := client.Dial(context.Background(), addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel() // ends the stream, should it still be open
	s, err := c.OpenStream(ctx, "File/Sum")
	if err != nil {
		log.Fatal(err)
	}
	data := strings.NewReader(strings.Repeat("rpcd ", 1<<20)) // 5 MiB: many windows
	if _, err := io.Copy(s, data); err != nil {
		log.Fatal(err)
	}
	s.CloseSend()
	sum, err := io.ReadAll(s)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(sum[:16]), s.Close()) // Close: the handler's outcome
	// Output: 46ee5cbbd0e357ed <nil>
}

// A download: the client asks for a size, then reads until io.EOF.
func ExampleClient_OpenStream_download() {
	addr, stop := streamServer()
	defer stop()
	c, err := client.Dial(context.Background(), addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	s, err := c.OpenStream(context.Background(), builtin.StreamSource)
	if err != nil {
		log.Fatal(err)
	}
	s.Write(binary.BigEndian.AppendUint64(nil, 3<<20)) // 3 MiB, please
	s.CloseSend()
	n, err := io.Copy(io.Discard, s)
	fmt.Println(n, err, s.Close())
	// Output: 3145728 <nil> <nil>
}
