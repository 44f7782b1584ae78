// Command streamfloor is the raw loopback floor of rpcd's stream goodput
// (docs/performance.md, "Streams"): it moves -size bytes through one
// loopback TCP connection between two processes, with io.CopyBuffer and
// 256 KiB buffers, and no framing, flow control or checks of its own. A
// child process of itself is the far end, as a child "rpcd serve" is for
// rpcd bench -scenario StreamUpload and StreamDownload:
//
//	go run ./streamfloor -dir up -size 1073741824     # this process sends
//	go run ./streamfloor -dir down -size 1073741824   # the child sends
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

func main() {
	dir := flag.String("dir", "up", "up: this process sends to the child; down: the child sends")
	size := flag.Int64("size", 256<<20, "bytes to move")
	child := flag.String("child", "", "internal: serve as the far end, sending (send) or sinking (sink)")
	flag.Parse()
	if *child != "" {
		serveChild(*child, *size)
		return
	}
	role := "sink"
	if *dir == "down" {
		role = "send"
	}
	exe, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	cmd := exec.Command(exe, "-child", role, "-size", strconv.FormatInt(*size, 10))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		log.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		log.Fatal(err)
	}
	conn, err := net.Dial("tcp", strings.TrimSpace(line))
	if err != nil {
		log.Fatal(err)
	}
	began := time.Now()
	var n int64
	if *dir == "down" {
		n, err = io.CopyBuffer(io.Discard, conn, make([]byte, 256<<10))
	} else {
		n, err = io.CopyBuffer(conn, io.LimitReader(zeros{}, *size), make([]byte, 256<<10))
		conn.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, conn) // the child closes once it has read everything
	}
	secs := time.Since(began).Seconds()
	if err != nil || n != *size {
		log.Fatalf("moved %d of %d bytes: %v", n, *size, err)
	}
	cmd.Wait()
	fmt.Printf("tcp-floor-%s: 1 connection, %d MiB in %.3fs: %.0f MiB/s\n", *dir, n>>20, secs, float64(n)/(1<<20)/secs)
}

// serveChild listens on loopback, prints its address, and sends size bytes
// to, or reads everything from, the one connection it takes.
func serveChild(role string, size int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ln.Addr())
	conn, err := ln.Accept()
	if err != nil {
		log.Fatal(err)
	}
	if role == "send" {
		_, err = io.CopyBuffer(conn, io.LimitReader(zeros{}, size), make([]byte, 256<<10))
	} else {
		_, err = io.CopyBuffer(io.Discard, conn, make([]byte, 256<<10))
	}
	if err != nil {
		log.Fatal(err)
	}
	conn.Close()
}

// zeros reads as an endless run of zero bytes, without touching them.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { return len(p), nil }
