package gateway

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/proto"
)

// The HTTP rules every endpoint of the gateway follows, and the admin
// listener's JSON with them (docs/gateway.md, "HTTP rules"): a request
// body in Content-Encoding zstd or gzip is expanded within the body's
// limit, any other coding refused with 415; a reply of CompressMin bytes
// or more goes in the coding Accept-Encoding weighs highest, zstd or gzip,
// when that makes it smaller.

// DefaultCompressMin is the smallest reply body compressed when
// Options.CompressMin is 0: 1 KiB.
const DefaultCompressMin = 1 << 10

// Write writes body as the reply to r with status and contentType, by the
// gateway's rules: compressed when it is compressMin bytes or more (0
// means DefaultCompressMin) and r's Accept-Encoding takes zstd or gzip,
// with Content-Encoding and Vary: Accept-Encoding; a negative compressMin
// sends it as it is. It sets Content-Length, and writes no body for HEAD.
// The admin listener's JSON replies go through it.
func Write(w http.ResponseWriter, r *http.Request, status int, contentType string, body []byte, compressMin int) {
	if compressMin == 0 {
		compressMin = DefaultCompressMin
	}
	w.Header().Set("Content-Type", contentType)
	writeBody(w, r, status, body, compressMin)
}

// writeBody is Write after the Content-Type, with compressMin resolved.
func writeBody(w http.ResponseWriter, r *http.Request, status int, body []byte, compressMin int) {
	h := w.Header()
	if compressMin >= 0 {
		addVary(h)
		if zip := replyCompression(r, len(body), compressMin); zip != proto.CompressionNone {
			zp := compression.GetBuffer()
			z := compression.Append((*zp)[:0], body, zip)
			defer func() { compression.PutBuffer(zp, z) }()
			if len(z) < len(body) {
				body = z
				h["Content-Encoding"] = encodingValues[zip]
			}
		}
	}
	h["Content-Length"] = contentLength(len(body))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// contentLength returns the Content-Length header value for n bytes:
// shared for the small bodies most replies have.
func contentLength(n int) []string {
	if n < len(smallLengths) {
		return smallLengths[n]
	}
	return []string{strconv.Itoa(n)}
}

// smallLengths are the values of contentLength under 512, shared: assigned
// to a header map whole, they are never written through.
var smallLengths = func() [][]string {
	out := make([][]string, 512)
	for n := range out {
		out[n] = []string{strconv.Itoa(n)}
	}
	return out
}()

// addVary says in h that the reply depends on Accept-Encoding, beside the
// Origin that CORS may have put there.
func addVary(h http.Header) {
	if v, ok := h["Vary"]; ok && len(v) == 1 && &v[0] == &varyOriginValue[0] {
		h["Vary"] = varyBothValue
		return
	}
	h["Vary"] = varyValue
}

// replyCompression returns the compression for a reply of n bytes to r:
// none under min, else what r's Accept-Encoding takes.
func replyCompression(r *http.Request, n, min int) proto.Compression {
	if n < min {
		return proto.CompressionNone
	}
	return acceptEncoding(r.Header["Accept-Encoding"])
}

// encodingValues are the Content-Encoding header values, by compression.
var encodingValues = map[proto.Compression][]string{
	proto.CompressionZstd: {"zstd"},
	proto.CompressionGzip: {"gzip"},
}

// bodyCoding returns the compression r's Content-Encoding names; for one
// the gateway does not take, it answers 415 with Accept-Encoding: zstd,
// gzip and reports false.
func (g *Gateway) bodyCoding(w http.ResponseWriter, r *http.Request, tl tally) (proto.Compression, bool) {
	ce, ok := r.Header["Content-Encoding"]
	if !ok {
		return proto.CompressionNone, true
	}
	zip, err := contentEncoding(ce)
	if err != nil {
		w.Header()["Accept-Encoding"] = acceptValue
		g.fail(w, r, tl, http.StatusUnsupportedMediaType, err)
		return 0, false
	}
	return zip, true
}

var acceptValue = []string{"zstd, gzip"}

// body is a request's body as the gateway read it: in a pooled buffer,
// and expanded into another if it came compressed. release gives them
// back once the body is no longer needed.
type body struct {
	b      []byte
	bp, xp *[]byte
}

func (b *body) release() {
	if b.xp != nil {
		compression.PutBuffer(b.xp, b.b)
		b.xp = nil
	}
	if b.bp != nil && cap(*b.bp) <= maxPooled {
		bufPool.Put(b.bp)
	}
	b.bp = nil
}

// readBody reads r's body, at most limit bytes (limitIs says what the limit
// is, for the error), and expands it as zip says, within the same limit.
// If it cannot, it answers with the error (413, 408 or 400, unprocessed)
// and reports false; the body is to be released either way.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request, tl tally, zip proto.Compression, limit int, limitIs string) (body, bool) {
	bp := bufPool.Get().(*[]byte)
	in, err := readAll(r.Body, r.ContentLength, limit, limitIs, (*bp)[:0])
	*bp = in[:0]
	b := body{b: in, bp: bp}
	if err != nil {
		g.fail(w, r, tl, bodyStatus(err), err)
		return b, false
	}
	if zip == proto.CompressionNone {
		return b, true
	}
	b.xp = compression.GetBuffer()
	expanded, err := compression.Expand((*b.xp)[:0], in, zip, limit)
	b.b = expanded
	switch {
	case errors.Is(err, compression.ErrTooLarge):
		g.fail(w, r, tl, http.StatusRequestEntityTooLarge, &handler.Error{Code: proto.CodeResourceExhausted, Unprocessed: true,
			Message: "body expands past the limit of " + strconv.Itoa(max(limit, 0)) + " (" + limitIs + ")"})
		return b, false
	case err != nil:
		g.fail(w, r, tl, http.StatusBadRequest, &handler.Error{Code: proto.CodeInvalidArgument, Unprocessed: true,
			Message: "body does not expand as its Content-Encoding says: " + handler.MessageOf(err)})
		return b, false
	}
	return b, true
}

// contentEncoding returns the compression a request body's
// Content-Encoding names: none for no header or identity, zstd or gzip
// (x-gzip); any other, or more than one coding, is refused.
func contentEncoding(values []string) (proto.Compression, error) {
	var codings []string
	for _, v := range values {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	switch {
	case len(codings) == 0:
		return proto.CompressionNone, nil
	case len(codings) > 1:
	case codings[0] == "zstd":
		return proto.CompressionZstd, nil
	case codings[0] == "gzip" || codings[0] == "x-gzip":
		return proto.CompressionGzip, nil
	}
	return proto.CompressionNone, &handler.Error{Code: proto.CodeInvalidArgument, Unprocessed: true,
		Message: "Content-Encoding " + strings.Join(codings, ", ") + ": want zstd, gzip or none"}
}

// acceptEncoding returns the compression to answer in for an
// Accept-Encoding (RFC 9110, 12.5.3): zstd or gzip, whichever has the
// higher weight, zstd on a tie; "*" stands for both unless named apart; a
// weight of 0 refuses. None when it takes neither.
func acceptEncoding(values []string) proto.Compression {
	z, gz, star := -1.0, -1.0, 0.0 // -1: not named
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(item, ";")
			weight := 1.0
			if k, val, ok := strings.Cut(strings.TrimSpace(params), "="); ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
					weight = f
				}
			}
			switch coding = strings.TrimSpace(coding); {
			case strings.EqualFold(coding, "zstd"):
				z = weight
			case strings.EqualFold(coding, "gzip"), strings.EqualFold(coding, "x-gzip"):
				gz = weight
			case coding == "*":
				star = weight
			}
		}
	}
	if z < 0 {
		z = star
	}
	if gz < 0 {
		gz = star
	}
	switch {
	case z > 0 && z >= gz:
		return proto.CompressionZstd
	case gz > 0:
		return proto.CompressionGzip
	}
	return proto.CompressionNone
}
