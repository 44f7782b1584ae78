// The bench's echo service for Kitex. The Go code beside this file was
// generated from it by Kitex's code generator, v0.16.3:
//
//	go install github.com/cloudwego/kitex/tool/cmd/kitex  (in a module that requires kitex v0.16.3)
//	cd bench && kitex -module github.com/rpcd/rpcd/bench -gen-path internal/kitexgen internal/kitexgen/echo.thrift
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
