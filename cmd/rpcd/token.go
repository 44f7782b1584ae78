package main

import (
	"flag"
	"strings"
	"time"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/handler"
)

var tokenCmd = &command{
	name:     "token",
	synopsis: "[flags]",
	summary:  "sign a token for servers started with -auth-hmac-key",
	about: `Token prints a token signed with the key in -key, for a server started with
-auth-hmac-key on the same key: it carries -subject, -roles and an expiry
-ttl from now, and needs no list on the server. A client presents it with
-token (rpcd call, routes, bench) or client.Options.Credentials.`,
	example: `rpcd token -key hmac.key -subject orders-service -roles writer,reader -ttl 720h`,
	setup:   setupToken,
}

type tokenFlags struct {
	key, subject, roles string
	ttl                 time.Duration
}

func setupToken(fs *flag.FlagSet) func(*cli, []string) error {
	f := &tokenFlags{}
	fs.StringVar(&f.key, "key", "", "the HMAC key (`file`), as given to rpcd serve -auth-hmac-key")
	fs.StringVar(&f.subject, "subject", "", "who the token stands for")
	fs.StringVar(&f.roles, "roles", "", "comma-separated `roles` it grants")
	fs.DurationVar(&f.ttl, "ttl", 24*time.Hour, "how long it is valid")
	return func(c *cli, args []string) error { return c.token(f, args) }
}

func (c *cli) token(f *tokenFlags, args []string) error {
	switch {
	case f.key == "":
		return usagef("-key is required")
	case f.subject == "":
		return usagef("-subject is required")
	case f.ttl <= 0:
		return usagef("-ttl is %v, want more than 0", f.ttl)
	}
	key, err := auth.ReadHMACKey(f.key)
	if err != nil {
		return err
	}
	id := handler.Identity{Subject: f.subject}
	if f.roles != "" {
		id.Roles = strings.Split(f.roles, ",")
	}
	return c.write([]byte(auth.HMAC{Key: key}.Sign(id, time.Now().Add(f.ttl)) + "\n"))
}
