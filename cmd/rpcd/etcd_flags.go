package main

import (
	"flag"
	"strings"

	rpcdaemon "github.com/rpcd/rpcd/daemon"
)

// etcdAccessFlags reach an etcd that is secured, for the commands that
// take an etcd:// -addr: with TLS, with authentication, or both
// (docs/scale-out.md, "A secured etcd"). They are serve's settings of the
// same names (rpcdaemon.EtcdAccess); cfg.RegisterEtcdScheme has etcd://
// targets take them.
type etcdAccessFlags struct{ cfg rpcdaemon.Config }

func (f *etcdAccessFlags) define(fs *flag.FlagSet, with string) {
	rpcdaemon.DefineFlags(fs, &f.cfg, with+": ", rpcdaemon.EtcdAccess...)
}

// given reports whether any of the flags is set.
func (f *etcdAccessFlags) given() bool { return f.cfg != rpcdaemon.Config{} }

// checkTarget refuses the flags for a target addr that is not etcd's.
func (f *etcdAccessFlags) checkTarget(addr string) error {
	if f.given() && !strings.HasPrefix(addr, "etcd://") {
		return usagef("the -etcd-... flags go with an etcd:// -addr")
	}
	return nil
}
