package load

import (
	"errors"
	"io"
	"path/filepath"
	"time"

	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/record"
)

// OpenRecording reads the recording at path (ReadRecording), named by its
// file's name.
func OpenRecording(path string) (*Recording, error) {
	rd, err := record.Open(path)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	rec, err := ReadRecording(rd)
	if err != nil {
		return nil, err
	}
	rec.Name = filepath.Base(path)
	return rec, nil
}

// ReadRecording reads the rest of rd into the calls a replay makes: every
// Request, OneWay and Publish a client sent, with the answer the server
// sent to each Request where the recording kept it, and the count of the
// other frames clients sent (streams, subscriptions, cancels) by kind.
// The whole recording is held in memory. A payload redaction dropped is
// replayed as that many zero bytes, so that sizes stay as recorded; one
// that arrived compressed and did not expand is not replayed (counted as
// skipped). A recording cut short (record.ErrCutShort) is read as far as
// it goes, CutShort set; any other error of rd is returned.
func ReadRecording(rd *record.Reader) (*Recording, error) {
	rec := &Recording{Skipped: map[string]int64{}}
	answers := rd.Header().Options.Answers
	asked := map[uint64]map[uint32]int{} // by connection and id, the requests waiting for their answers (index in rec.Calls)
	for {
		e, err := rd.Next()
		switch {
		case errors.Is(err, io.EOF):
			_, at, _ := rd.End()
			rec.Length = max(rec.Length, at)
			return rec, nil
		case errors.Is(err, record.ErrCutShort):
			rec.CutShort = true
			return rec, nil
		case err != nil:
			return nil, err
		}
		rec.Length = max(rec.Length, e.At)
		if e.Type == record.EntryClose {
			delete(asked, e.Conn)
		}
		if e.Type != record.EntryFrame {
			continue
		}
		f := &e.Frame
		if e.Out {
			i, ok := asked[e.Conn][f.ID]
			if !ok || f.Kind != proto.KindResponse && f.Kind != proto.KindError {
				continue
			}
			delete(asked[e.Conn], f.ID)
			c := &rec.Calls[i]
			c.Answered = true
			if f.Kind == proto.KindError {
				code, msg := f.ErrorBody()
				c.Code, c.Answer = code, append([]byte(nil), msg...)
			} else {
				c.Answer = append([]byte(nil), f.Payload...)
				c.AnswerCodeOnly = e.Redacted != record.Keep || f.Flags.Compression() != proto.CompressionNone
			}
			continue
		}
		switch f.Kind {
		case proto.KindRequest, proto.KindOneWay, proto.KindPublish:
		default:
			rec.Skipped[f.Kind.String()]++
			continue
		}
		if f.Flags.Compression() != proto.CompressionNone {
			rec.Skipped[f.Kind.String()+" not expanded"]++
			continue
		}
		payload := append([]byte(nil), f.Payload...)
		if e.Redacted == record.Drop {
			payload = make([]byte, e.PayloadLen)
		}
		if f.Kind == proto.KindRequest && answers {
			if asked[e.Conn] == nil {
				asked[e.Conn] = map[uint32]int{}
			}
			asked[e.Conn][f.ID] = len(rec.Calls)
		}
		rec.Calls = append(rec.Calls, ReplayCall{At: e.At, Conn: e.Conn, Kind: f.Kind, Route: string(f.Route), Codec: f.Codec,
			Metadata: append(proto.Metadata(nil), f.Metadata...), Deadline: time.Duration(f.Deadline) * time.Millisecond,
			Payload: payload})
	}
}
