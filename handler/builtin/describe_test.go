package builtin_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/handler/schema"
	"github.com/rpcd/rpcd/proto"
)

// describe calls Sys/Describe on reg with the JSON argument arg.
func describe(t *testing.T, reg *handler.Registry, arg string) ([]schema.Description, error) {
	t.Helper()
	call := &handler.Call{Route: builtin.Describe, Codec: proto.CodecJSON}
	call.Start(context.Background(), time.Time{})
	defer call.End()
	reply, err := reg.Lookup([]byte(builtin.Describe)).Serve(call, []byte(arg), nil)
	if err != nil {
		return nil, err
	}
	var ds []schema.Description
	if err := json.Unmarshal(reply, &ds); err != nil {
		t.Fatalf("reply %s: %v", reply, err)
	}
	return ds, nil
}

// TestSysDescribe: Sys/Describe answers every route's description with no
// argument, one route's for {"route": ROUTE} or "ROUTE", NotFound for a
// route there is not, and describes itself.
func TestSysDescribe(t *testing.T) {
	reg := handler.NewRegistry()
	builtin.Register(reg)
	all, err := describe(t, reg, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range all {
		names = append(names, d.Name+":"+d.Kind)
	}
	want := "Bench/EchoPacket:raw Bench/EchoString:typed Bench/MultiArgs:typed Bench/NoArg:raw Bench/StreamSink:stream Bench/StreamSource:stream Math/Sum:typed Sys/Describe:typed Sys/Ping:raw Sys/Routes:typed"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("all routes: %s\nwant %s", got, want)
	}
	for _, arg := range []string{"{}", "null", `""`, `{"route":""}`} {
		if ds, err := describe(t, reg, arg); err != nil || len(ds) != len(all) {
			t.Errorf("argument %s: %d descriptions, %v; want all %d", arg, len(ds), err, len(all))
		}
	}
	for _, arg := range []string{`{"route":"Math/Sum"}`, `"Math/Sum"`, ` "Math/Sum" `} {
		ds, err := describe(t, reg, arg)
		if err != nil || len(ds) != 1 || ds[0].Name != "Math/Sum" || ds[0].Argument.Properties.Get("a") == nil {
			t.Errorf("argument %s: %+v, %v; want Math/Sum's description", arg, ds, err)
		}
	}
	if _, err := describe(t, reg, `"No/Such"`); handler.CodeOf(err) != proto.CodeNotFound || !strings.Contains(err.Error(), "no route No/Such") {
		t.Errorf("an unknown route: %v, want NotFound naming it", err)
	}
	for _, arg := range []string{"5", "[]", `{"route":5}`} {
		if _, err := describe(t, reg, arg); handler.CodeOf(err) != proto.CodeInvalidArgument || !handler.IsUnprocessed(err) {
			t.Errorf("argument %s: %v, want InvalidArgument, unprocessed", arg, err)
		}
	}

	self, _ := describe(t, reg, `"Sys/Describe"`)
	b, _ := json.Marshal(self[0].Argument)
	if want := `{"title":"builtin.DescribeArg","anyOf":[{"type":"object","properties":{"route":{"type":"string"}}},{"type":"string"},{"type":"null"}]}`; string(b) != want {
		t.Errorf("Sys/Describe's argument: %s\nwant %s", b, want)
	}
	if r := self[0].Reply; !r.Type.Has("array") || r.Items.Properties.Get("kind") == nil || r.Items.Properties.Get("argument") == nil {
		t.Errorf("Sys/Describe's reply: %+v", r)
	}
}
