package main

import (
	"io"
	"runtime"
	"strings"
)

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
