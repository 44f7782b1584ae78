package gateway

import (
	"net/http"
	"strconv"

	"github.com/rpcd/rpcd/proto"
)

// codeInfo is how an rpcd error code shows over HTTP.
type codeInfo struct {
	name   string // in the JSON error body's "code"
	status int
}

// codes maps every rpcd error code to its name and HTTP status, as
// grpc-gateway maps gRPC's (the numbers are gRPC's). docs/gateway.md has
// the table.
var codes = [...]codeInfo{
	proto.CodeOK:                 {"OK", http.StatusOK},
	proto.CodeCanceled:           {"Canceled", 499}, // nginx's "client closed request"
	proto.CodeUnknown:            {"Unknown", http.StatusInternalServerError},
	proto.CodeInvalidArgument:    {"InvalidArgument", http.StatusBadRequest},
	proto.CodeDeadlineExceeded:   {"DeadlineExceeded", http.StatusGatewayTimeout},
	proto.CodeNotFound:           {"NotFound", http.StatusNotFound},
	proto.CodeAlreadyExists:      {"AlreadyExists", http.StatusConflict},
	proto.CodePermissionDenied:   {"PermissionDenied", http.StatusForbidden},
	proto.CodeResourceExhausted:  {"ResourceExhausted", http.StatusTooManyRequests},
	proto.CodeFailedPrecondition: {"FailedPrecondition", http.StatusBadRequest},
	proto.CodeAborted:            {"Aborted", http.StatusConflict},
	proto.CodeOutOfRange:         {"OutOfRange", http.StatusBadRequest},
	proto.CodeUnimplemented:      {"Unimplemented", http.StatusNotImplemented},
	proto.CodeInternal:           {"Internal", http.StatusInternalServerError},
	proto.CodeUnavailable:        {"Unavailable", http.StatusServiceUnavailable},
	proto.CodeDataLoss:           {"DataLoss", http.StatusInternalServerError},
	proto.CodeUnauthenticated:    {"Unauthenticated", http.StatusUnauthorized},
}

// HTTPStatus returns the HTTP status that stands for an rpcd error code:
// 404 for NotFound, 400 for InvalidArgument, 401 for Unauthenticated, and
// so on (docs/gateway.md); 500 for a code rpcd does not know.
func HTTPStatus(code proto.Code) int {
	if int(code) < len(codes) {
		return codes[code].status
	}
	return http.StatusInternalServerError
}

// CodeName returns the name of an rpcd error code as the gateway's JSON
// error bodies give it ("NotFound"), or "Code(N)" for a code rpcd does not
// know.
func CodeName(code proto.Code) string {
	if int(code) < len(codes) {
		return codes[code].name
	}
	return "Code(" + strconv.Itoa(int(code)) + ")"
}
