// The bench's echo service for Kitex. The Go code beside this file was
// generated from it by Kitex's code generator, v0.16.3, and these commands
// make it again, byte for byte (the module proxy refuses kitex's version
// list, which `go install ...@v0.16.3` reads, so the tool is built inside a
// scratch module):
//
//	mkdir /tmp/kitextool && cd /tmp/kitextool && go mod init kitextool
//	go get github.com/cloudwego/kitex@v0.16.3
//	GOFLAGS=-mod=mod go install github.com/cloudwego/kitex/tool/cmd/kitex
//	cd bench && rm -r internal/kitexgen/echo
//	kitex -module github.com/rpcd/rpcd/bench -gen-path internal/kitexgen internal/kitexgen/echo.thrift
namespace go echo

struct EchoRequest {
    1: binary payload
}

struct EchoResponse {
    1: binary payload
}

service Echo {
    EchoResponse Echo(1: EchoRequest req)
    i64 Sum(1: i64 a, 2: i64 b) // for the RRQM test
}
