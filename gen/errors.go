package gen

import (
	"errors"

	"github.com/rpcd/rpcd/handler/builtin"
)

// ErrNoDescribe is Fetch's error for a server without Sys/Describe: one
// older than route descriptions.
var ErrNoDescribe = errors.New("rpcd: the server has no " + builtin.Describe + ": it is older than route descriptions")
