//go:build !linux

package client

import (
	"errors"
	"net"
	"time"
)

// Event loops are Linux's (loops_linux.go); elsewhere Options.EventLoops
// is ignored and every connection has its listener goroutine.

type evLoop struct{}

var testEventLoops bool

// fdReader is never made here.
type fdReader struct {
	fd           int
	block, short bool
}

func (*fdReader) Read([]byte) (int, error) { return 0, errAgain }

var (
	errAgain = errors.New("rpcd: client: nothing to read now")
	errLarge = errors.New("rpcd: client: a frame larger than the read buffer")
)

// pickLoop returns nil: there is no loop here, and no connection goes to
// one.
func pickLoop() *evLoop { return nil }

func loopSocket(net.Conn) int                            { return -1 }
func (w *wire) joinLoop(*evLoop)                         {}
func (w *wire) loopWriteNow([]byte) (int, error)         { return 0, net.ErrClosed }
func (w *wire) loopWrite([]byte, time.Time) (int, error) { return 0, net.ErrClosed }
func (w *wire) loopShutdown()                            {}
