package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/proto"
)

// TestStart: the Call gets the frame's route, id, codec and metadata, and
// the deadline its Deadline field gives from the time it arrived.
func TestStart(t *testing.T) {
	now := time.Now()
	var call handler.Call
	md := proto.AppendMetadata(nil, "k", []byte("v"))
	Start(&call, "A/B", &proto.Header{ID: 7, Codec: proto.CodecJSON, Deadline: 250}, md, context.Background(), now)
	if call.Route != "A/B" || call.ID != 7 || call.Codec != proto.CodecJSON || string(call.Metadata) != string(md) {
		t.Fatalf("call %+v", &call)
	}
	if dl, ok := call.Deadline(); !ok || !dl.Equal(now.Add(250*time.Millisecond)) {
		t.Fatalf("deadline %v, %v; want %v", dl, ok, now.Add(250*time.Millisecond))
	}
	call.End()
	Start(&call, "A/B", &proto.Header{ID: 8}, nil, context.Background(), now)
	if _, ok := call.Deadline(); ok {
		t.Fatal("a deadline from a Deadline field of 0")
	}
}

// TestCopy: the copy holds both sections, and appending to its metadata
// cannot write over its payload.
func TestCopy(t *testing.T) {
	f := &proto.Frame{Metadata: proto.AppendMetadata(nil, "k", []byte("v")), Payload: []byte("payload")}
	buf, md, payload := Copy(make([]byte, 3, 64), f)
	if string(md) != string(f.Metadata) || string(payload) != "payload" || len(buf) != len(md)+len(payload) {
		t.Fatalf("copy %q: metadata %q, payload %q", buf, md, payload)
	}
	f.Payload[0] = 'X' // the frame's buffer is reused
	_ = append(md, "more"...)
	if string(payload) != "payload" {
		t.Fatalf("payload %q after the frame changed and the metadata grew", payload)
	}
}

// TestExpandRequest: a payload that expands is appended; past the room it
// is ResourceExhausted, and bytes that are no compression InvalidArgument,
// both Unprocessed.
func TestExpandRequest(t *testing.T) {
	plain := []byte(strings.Repeat("abc", 1000))
	z := compression.Append(nil, plain, proto.CompressionZstd)
	got, err := ExpandRequest(nil, z, proto.CompressionZstd, 1<<20)
	if err != nil || string(got) != string(plain) {
		t.Fatalf("%d bytes, %v", len(got), err)
	}
	if _, err := ExpandRequest(nil, z, proto.CompressionZstd, 100); err == nil || err.Code != proto.CodeResourceExhausted || !err.Unprocessed {
		t.Fatalf("past the room: %v", err)
	}
	if _, err := ExpandRequest(nil, []byte("not zstd"), proto.CompressionZstd, 1<<20); err == nil || err.Code != proto.CodeInvalidArgument || !err.Unprocessed {
		t.Fatalf("not compressed: %v", err)
	}
}

// TestRunning: calls are refused past the limit, twice under one id and
// once closed; Cancel cancels the call with the id alone; Close cancels
// all.
func TestRunning(t *testing.T) {
	var r Running
	calls := make([]*handler.Call, 3)
	for i := range calls {
		calls[i] = &handler.Call{}
		calls[i].Start(context.Background(), time.Time{})
	}
	if err := r.Add(1, calls[0], 2); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(1, calls[1], 2); err == nil || err.Code != proto.CodeInvalidArgument {
		t.Fatalf("a second call 1: %v", err)
	}
	if err := r.Add(2, calls[1], 2); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(3, calls[2], 2); err == nil || err.Code != proto.CodeResourceExhausted || !err.Unprocessed {
		t.Fatalf("past the limit: %v", err)
	}
	r.Cancel(2)
	r.Cancel(9) // none: nothing happens
	if calls[0].Err() != nil || calls[1].Err() != context.Canceled {
		t.Fatalf("after Cancel(2): %v, %v", calls[0].Err(), calls[1].Err())
	}
	r.Remove(2)
	if r.Len() != 1 {
		t.Fatalf("Len %d, want 1", r.Len())
	}
	r.Close()
	if calls[0].Err() != context.Canceled {
		t.Fatal("Close left a call running")
	}
	if err := r.Add(4, calls[2], 2); err == nil || err.Code != proto.CodeUnavailable {
		t.Fatalf("after Close: %v", err)
	}
}
