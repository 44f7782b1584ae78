package client_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/proto"
)

// TestCompressionPeer plays a server that speaks compression, to see the
// client's side of it: its Hello names the client's compression first;
// it expands a compressed call from the server before its handler runs,
// and refuses one that does not expand; its calls go compressed; a
// compressed reply is expanded, and one that does not expand fails its
// call with DataLoss.
func TestCompressionPeer(t *testing.T) {
	doc := bytes.Repeat([]byte("a compressible document; "), 400)
	gz := func(b []byte) []byte { return compression.Append(nil, b, proto.CompressionGzip) }
	served := make(chan error, 1)
	called := make(chan struct{}) // the server's calls are done: the client's may go
	addr := fakeServer(t, func(nc net.Conn) {
		served <- func() error {
			defer func() {
				select {
				case <-called:
				default:
					close(called)
				}
			}()
			hello, err := readFrame(nc)
			if err != nil {
				return err
			}
			if takes, _ := hello.Metadata.Get(proto.MetaCompression); hello.Kind != proto.KindHello || string(takes) != "gzip,zstd" {
				return errors.New("the Hello: " + hello.Kind.String() + " naming " + string(takes) + ", want gzip,zstd")
			}
			nc.Write(proto.AppendWelcome(nil, "", proto.CompressionGzip))

			// The server's calls: one that expands, one that does not.
			gzipped := proto.Header{Kind: proto.KindRequest, Flags: proto.Flags(0).WithCompression(proto.CompressionGzip)}
			gzipped.ID = 1
			nc.Write(proto.AppendFrame(nil, gzipped, "Client/Len", nil, gz(doc)))
			if f, err := readFrame(nc); err != nil || f.Kind != proto.KindResponse || string(f.Payload) != "10000" {
				return errors.New("the client's answer to a compressed call: " + f.Kind.String() + " " + string(f.Payload))
			}
			gzipped.ID = 2
			nc.Write(proto.AppendFrame(nil, gzipped, "Client/Len", nil, []byte("not gzip")))
			if f, err := readFrame(nc); err != nil || f.Kind != proto.KindError || f.Flags&proto.FlagUnprocessed == 0 {
				return errors.New("the client's answer to a call that does not expand: " + f.Kind.String())
			} else if code, _ := f.ErrorBody(); code != proto.CodeInvalidArgument {
				return errors.New("the client refused a call that does not expand with " + code.String())
			}

			close(called)
			// The client's calls: compressed; the first answered with bytes
			// that do not expand, the second with its payload, compressed.
			for i, answer := range [][]byte{[]byte("not gzip either"), nil} {
				f, err := readFrame(nc)
				if err != nil {
					return err
				}
				if f.Flags.Compression() != proto.CompressionGzip {
					return errors.New("the client's call went with flags " + f.Flags.String())
				}
				got, err := compression.Expand(nil, f.Payload, proto.CompressionGzip, 1<<20)
				if err != nil || !bytes.Equal(got, doc) {
					return errors.New("the client's call does not expand to what it sent")
				}
				if i == 1 {
					answer = f.Payload
				}
				h := proto.Header{Kind: proto.KindResponse, ID: f.ID, Flags: proto.Flags(0).WithCompression(proto.CompressionGzip)}
				nc.Write(proto.AppendFrame(nil, h, "", nil, answer))
			}
			return nil
		}()
		readFrame(nc) // until the client closes
	})

	reg := handler.NewRegistry()
	reg.HandleFunc("Client/Len", func(_ context.Context, req, reply []byte) ([]byte, error) {
		return strconv.AppendInt(reply, int64(len(req)), 10), nil
	})
	c := dial(t, addr, client.Options{Compression: proto.CompressionGzip, Handler: reg, MaxRetries: -1})
	ctx := ctxFor(t, 5*time.Second)
	<-called
	_, err := c.CallRaw(ctx, "Doc/Put", doc, nil)
	if code := handler.CodeOf(err); code != proto.CodeDataLoss || handler.IsUnprocessed(err) {
		t.Errorf("a reply that does not expand: %v (code %v), want DataLoss, processed", err, code)
	}
	got, err := c.CallRaw(ctx, "Doc/Put", doc, nil)
	if err != nil || !bytes.Equal(got, doc) {
		t.Errorf("a compressed reply: %d bytes, %v", len(got), err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// TestCompressionOption: Dial and DialService refuse a compression the
// client does not do, at once.
func TestCompressionOption(t *testing.T) {
	_, err := client.Dial(context.Background(), "127.0.0.1:1", client.Options{Compression: 3})
	if err == nil || !strings.Contains(err.Error(), "Compression") {
		t.Fatalf("Dial with compression 3: %v", err)
	}
	_, err = client.DialService(context.Background(), "static://127.0.0.1:1/svc", client.ServiceOptions{Options: client.Options{Compression: 3}})
	if err == nil || !strings.Contains(err.Error(), "Compression") {
		t.Fatalf("DialService with compression 3: %v", err)
	}
}

// TestCompressedMessagesPeer plays a server to see a subscriber's side of
// compressed Messages: a client with a compression names it in its
// Subscribe; a compressed Message is expanded, on a channel and in a
// function; one that does not expand is dropped and counted, and the
// subscription goes on.
func TestCompressedMessagesPeer(t *testing.T) {
	doc := bytes.Repeat([]byte("a message much like the last one; "), 100)
	message := func(sid uint32, payload []byte, zip proto.Compression) []byte {
		m := proto.AppendMessage(nil, sid, []byte("news.today"), proto.CodecRaw, payload)
		proto.SetCompression(m, zip)
		return m
	}
	served := make(chan error, 1)
	addr := fakeServer(t, func(nc net.Conn) {
		br := bufio.NewReader(nc)
		next := func() (proto.Frame, error) {
			hdr, err := br.Peek(proto.HeaderSize)
			if err != nil {
				return proto.Frame{}, err
			}
			h, err := proto.DecodeHeader(hdr, nil)
			if err != nil {
				return proto.Frame{}, err
			}
			b := make([]byte, h.Len())
			if _, err := io.ReadFull(br, b); err != nil {
				return proto.Frame{}, err
			}
			f, _, err := proto.Decode(b, nil)
			return f, err
		}
		served <- func() error {
			if f, err := next(); err != nil || f.Kind != proto.KindHello {
				return fmt.Errorf("want a Hello: %v %v", f.Kind, err)
			}
			nc.Write(proto.AppendWelcome(nil, "", proto.CompressionZstd, proto.CompressionGzip))
			for range 2 { // a Subscribe and the call after it, each time
				sub, err := next()
				if err != nil || sub.Kind != proto.KindSubscribe {
					return fmt.Errorf("want a Subscribe: %v %v", sub.Kind, err)
				}
				if takes, _ := sub.Metadata.Get(proto.MetaCompression); string(takes) != "zstd,gzip" {
					return fmt.Errorf("the Subscribe names %q, want zstd,gzip", takes)
				}
				call, err := next()
				if err != nil || call.Kind != proto.KindRequest {
					return fmt.Errorf("want the call after the Subscribe: %v %v", call.Kind, err)
				}
				nc.Write(proto.AppendFrame(nil, proto.Header{Kind: proto.KindResponse, ID: call.ID}, "", nil, nil))
				nc.Write(slices.Concat(
					message(sub.ID, []byte("not zstd at all"), proto.CompressionZstd),
					message(sub.ID, compression.Append(nil, doc, proto.CompressionZstd), proto.CompressionZstd),
					message(sub.ID, compression.Append(nil, doc, proto.CompressionGzip), proto.CompressionGzip),
					message(sub.ID, []byte("plain"), proto.CompressionNone)))
			}
			_, err := next() // until the client goes
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return err
		}()
	})
	c, err := client.Dial(context.Background(), addr, client.Options{Compression: proto.CompressionZstd})
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan client.Message, 8)
	onCh, err := c.Subscribe(context.Background(), "news.>", ch)
	if err != nil {
		t.Fatal(err)
	}
	inFn := make(chan []byte, 8)
	onFn, err := c.SubscribeFunc(context.Background(), "news.>", func(m client.Message) { inFn <- bytes.Clone(m.Payload) })
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range [][]byte{doc, doc, []byte("plain")} {
		if m := <-ch; !bytes.Equal(m.Payload, want) {
			t.Fatalf("on the channel: %d bytes, want %d", len(m.Payload), len(want))
		}
		if got := <-inFn; !bytes.Equal(got, want) {
			t.Fatalf("in the function: %d bytes, want %d", len(got), len(want))
		}
	}
	if a, b := onCh.Dropped(), onFn.Dropped(); a != 1 || b != 1 {
		t.Fatalf("dropped %d and %d, want the one that does not expand each", a, b)
	}
	c.Close()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// TestClientFramesFromServer: a Subscribe, a Publish or a Hello is a
// client's frame, a Welcome comes only in the handshake, and a StreamReset
// with code 0 is an acceptor's; one from the server (here the opener of
// stream 2) is a protocol error, which ends the connection with a GoAway
// (Internal) naming it and fails the call waiting on it.
func TestClientFramesFromServer(t *testing.T) {
	for _, frame := range [][]byte{
		proto.AppendSubscribe(nil, 1, "a.b"),
		proto.AppendPublish(nil, "a.b", proto.CodecRaw, []byte("x")),
		proto.AppendStreamReset(nil, 2, 0, proto.CodeOK, ""), // code 0 from the opener of stream 2, the server
		proto.AppendHello(nil, "", nil),
		proto.AppendWelcome(nil, "again"), // the handshake's Welcome came before the wire began, if at all
	} {
		kind := proto.Kind(frame[3])
		goAway := make(chan proto.Frame, 1)
		addr := fakeServer(t, func(nc net.Conn) {
			call, err := readFrame(nc)
			if err != nil || call.Kind != proto.KindRequest {
				return
			}
			nc.Write(frame)
			if f, err := readFrame(nc); err == nil {
				goAway <- f
			}
		})
		c, err := client.Dial(context.Background(), addr, client.Options{MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = c.CallRaw(ctx, "Any/Route", nil, nil)
		cancel()
		if err == nil {
			t.Fatalf("a %v from the server: the call succeeded", kind)
		}
		select {
		case f := <-goAway:
			_, code, msg := f.GoAwayBody()
			if f.Kind != proto.KindGoAway || code != proto.CodeInternal || !strings.Contains(string(msg), kind.String()) {
				t.Fatalf("a %v from the server: the client sent %v %v %q, want GoAway Internal naming it", kind, f.Kind, code, msg)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("a %v from the server: no GoAway from the client", kind)
		}
		c.Close()
	}
}
