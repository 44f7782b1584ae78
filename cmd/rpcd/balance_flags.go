package main

import (
	"context"
	"flag"
	"strconv"
	"strings"

	"github.com/rpcd/rpcd/client"
)

// balanceFlags choose how bench and call spread calls over the nodes of a
// service target (docs/scale-out.md, "Balancing").
type balanceFlags struct {
	balance string
	hashKey string
}

func (b *balanceFlags) define(fs *flag.FlagSet, hashKeyUsage string) {
	fs.StringVar(&b.balance, "balance", client.RoundRobin.String(), "with a service -addr: how calls spread over its nodes, `policy` round-robin, least-inflight or hash")
	fs.StringVar(&b.hashKey, "hash-key", "", hashKeyUsage)
}

// check refuses flags that do not go together, or with addr.
func (b *balanceFlags) check(addr string) error {
	policy, ok := client.ParseBalance(b.balance)
	switch {
	case !ok:
		return usagef("-balance is %q, want round-robin, least-inflight or hash", b.balance)
	case !client.IsService(addr) && (policy != client.RoundRobin || b.hashKey != ""):
		return usagef("-balance and -hash-key go with a service -addr (etcd://, dns://, static://)")
	case b.hashKey != "" && policy != client.Hash:
		return usagef("-hash-key goes with -balance hash")
	}
	return nil
}

// apply sets the balancing of opts, for the client numbered i (bench's
// -c clients): "{c}" in the key is i.
func (b *balanceFlags) apply(opts *client.ServiceOptions, i int) {
	opts.Balance, _ = client.ParseBalance(b.balance) // checked
	if b.hashKey != "" {
		key := strings.ReplaceAll(b.hashKey, "{c}", strconv.Itoa(i))
		opts.HashKey = func(context.Context, string, []byte) (string, bool) { return key, true }
	}
}
