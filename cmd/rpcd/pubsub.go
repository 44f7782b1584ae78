package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/proto"
)

var pubCmd = &command{
	name:     "pub",
	synopsis: "[flags] TOPIC MESSAGE",
	summary:  "publish a message to a topic",
	about: `Pub publishes MESSAGE to TOPIC on the server at -addr: every subscription
whose pattern matches the topic gets it. MESSAGE is a JSON value, checked
before it is sent; with -raw it is sent as raw bytes. A topic is tokens
separated by dots ("orders.eu.created"). Pub returns once the server has
taken the message in. A server with topic permissions (serve -auth-topics)
may refuse it: then pub prints why, as in "rpcd: permission denied: alice
may not publish to secrets.payroll", and exits 1; nothing was delivered.`,
	example: `rpcd pub orders.eu.created '{"id":42}'
rpcd pub -raw logs.web 'GET /index.html 200'`,
	setup: setupPub,
	args:  true,
}

var subCmd = &command{
	name:     "sub",
	synopsis: "[flags] PATTERN",
	summary:  "subscribe to a topic pattern and print the messages",
	about: `Sub subscribes to PATTERN on the server at -addr and prints each message
it gets, one line each: the topic, a space, and the payload (JSON as sent,
raw bytes as they are). In a pattern "*" stands for one token and a final
">" for one or more: "orders.*.created", "orders.>". Sub runs until
Ctrl-C, or until it has printed -n messages. If the connection drops, the
client reconnects and subscribes again by itself; messages published in
between are not delivered.`,
	example: `rpcd sub 'orders.>'
rpcd sub -n 1 orders.eu.created
rpcd sub -compress zstd 'logs.>'`,
	setup: setupSub,
	args:  true,
}

// pubFlags are pub's flags.
type pubFlags struct {
	dialFlags
	raw bool
}

func setupPub(fs *flag.FlagSet) func(*cli, []string) error {
	f := &pubFlags{}
	f.define(fs)
	fs.BoolVar(&f.raw, "raw", false, "send MESSAGE as raw bytes (codec raw)")
	return func(c *cli, args []string) error { return c.pub(f, args) }
}

func (c *cli) pub(f *pubFlags, args []string) error {
	if len(args) != 2 {
		return usagef("want TOPIC and MESSAGE, got %d arguments", len(args))
	}
	if err := f.check(); err != nil {
		return err
	}
	topic, msg := args[0], []byte(args[1])
	if err := proto.ValidTopic([]byte(topic)); err != nil {
		return usagef("%v", strings.TrimPrefix(err.Error(), "rpcd: protocol error: "))
	}
	if !f.raw {
		if err := checkJSON("MESSAGE", msg); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	refused := make(chan error, 1) // the server's refusal, if it refuses
	cl, err := c.dial(ctx, &f.dialFlags, func(o *client.Options) {
		o.PublishRefused = func(err error) {
			select {
			case refused <- err:
			default:
			}
		}
	})
	if err != nil {
		return err
	}
	defer cl.Close()
	if f.raw {
		err = cl.PublishRaw(ctx, topic, msg)
	} else {
		err = cl.Publish(ctx, topic, json.RawMessage(msg))
	}
	if err != nil {
		return err
	}
	// Publishing has no reply but a refusal: once Flush returns, the
	// server has taken the message in, and a refusal has arrived.
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	select {
	case err := <-refused:
		return err
	default:
		return nil
	}
}

// subFlags are sub's flags.
type subFlags struct {
	dialFlags
	n int
}

func setupSub(fs *flag.FlagSet) func(*cli, []string) error {
	f := &subFlags{}
	f.define(fs)
	f.compress.define(fs)
	fs.Lookup("compress").Usage = "ask for the messages' payloads of 1 KiB or more compressed in `zstd` or gzip, where the server takes it (docs/protocol.md, \"Compression\"); they print as published"
	fs.IntVar(&f.n, "n", 0, "exit after `N` messages; 0 means run until Ctrl-C")
	return func(c *cli, args []string) error { return c.sub(f, args) }
}

func (c *cli) sub(f *subFlags, args []string) error {
	if len(args) != 1 {
		return usagef("want PATTERN, got %d arguments", len(args))
	}
	if err := f.check(); err != nil {
		return err
	}
	if f.n < 0 {
		return usagef("-n is %d, want 0 or more", f.n)
	}
	pattern := args[0]
	if err := proto.ValidPattern([]byte(pattern)); err != nil {
		return usagef("%v", strings.TrimPrefix(err.Error(), "rpcd: protocol error: "))
	}
	run, stop := c.interruptible()
	defer stop()
	dctx, cancel := context.WithTimeout(run, f.timeout)
	defer cancel()
	cl, err := c.dial(dctx, &f.dialFlags)
	if err != nil {
		return err
	}
	defer cl.Close()
	ch := make(chan client.Message, 1024)
	sub, err := cl.Subscribe(dctx, pattern, ch)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "sub: subscribed to %s at %s\n", pattern, f.addr)
	for printed := 0; f.n == 0 || printed < f.n; printed++ {
		select {
		case m := <-ch:
			line := append(append([]byte(m.Topic), ' '), m.Payload...)
			if err := c.write(append(line, '\n')); err != nil {
				return err
			}
		case <-sub.Done():
			return sub.Err()
		case <-run.Done():
			if d := sub.Dropped(); d > 0 {
				fmt.Fprintf(c.stderr, "sub: %d messages dropped: printing could not keep up\n", d)
			}
			return nil
		}
	}
	return nil
}
