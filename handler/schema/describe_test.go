package schema_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/schema"
)

// countedArg counts how often its schema is asked for.
type countedArg struct{}

var countedSchemas atomic.Int32

func (countedArg) JSONSchema() *schema.Schema {
	countedSchemas.Add(1)
	return &schema.Schema{Type: schema.Types{"object"}}
}

// defA and defC are recursive: their schemas have $defs.
type (
	defA struct {
		B    *defB `json:"b"`
		Self *defA `json:"self"`
	}
	defB struct {
		A *defA `json:"a"`
		C *defC `json:"c"`
	}
	defC struct {
		C *defC `json:"c"`
	}
)

type describeArgs struct {
	A int64 `json:"a"`
	B int64 `json:"b,omitempty"`
}

// TestDescribe: each kind of route is described with its flags, a typed
// route (Func, Method) with its argument and reply schemas; middleware
// does not change them; an unknown route has none.
func TestDescribe(t *testing.T) {
	reg := handler.NewRegistry()
	reg.Handle("T/Sum", handler.Func(func(_ context.Context, in describeArgs) (int64, error) { return in.A + in.B, nil }), handler.Blocking())
	handler.Method[[]string, map[string]int]("T/Count").Handle(reg, func(context.Context, []string) (map[string]int, error) { return nil, nil }, handler.Inline())
	reg.HandleFunc("T/Raw", func(_ context.Context, req, reply []byte) ([]byte, error) { return append(reply, req...), nil })
	reg.HandleStream("T/Stream", func(context.Context, handler.Stream) error { return nil })
	// A handler of its own around a Func hides the Func's types.
	inner := handler.Func(func(context.Context, string) (string, error) { return "", nil })
	reg.Handle("T/Wrapped", handler.HandlerFunc(func(ctx context.Context, req, reply []byte) ([]byte, error) {
		return inner.ServeRPC(ctx, req, reply)
	}))
	reg.Use(func(next handler.Handler) handler.Handler { return next })

	want := map[string]string{
		"T/Count":   `{"name":"T/Count","kind":"typed","inline":true,"argument":{"type":["array","null"],"items":{"type":"string"}},"reply":{"type":["object","null"],"additionalProperties":{"type":"integer","format":"int64"}}}`,
		"T/Raw":     `{"name":"T/Raw","kind":"raw"}`,
		"T/Stream":  `{"name":"T/Stream","kind":"stream"}`,
		"T/Sum":     `{"name":"T/Sum","kind":"typed","blocking":true,"argument":{"title":"schema_test.describeArgs","type":"object","properties":{"a":{"type":"integer","format":"int64"},"b":{"type":"integer","format":"int64"}}},"reply":{"type":"integer","format":"int64"}}`,
		"T/Wrapped": `{"name":"T/Wrapped","kind":"raw"}`,
	}
	var names []string
	for _, d := range schema.Descriptions(reg) {
		names = append(names, d.Name)
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want[d.Name] {
			t.Errorf("Descriptions: %s\nwant %s", b, want[d.Name])
		}
		one, ok := schema.Describe(reg, d.Name)
		if b1, _ := json.Marshal(one); !ok || string(b1) != string(b) {
			t.Errorf("Describe(%s) = %s, %v; Descriptions has %s", d.Name, b1, ok, b)
		}
	}
	if got := strings.Join(names, " "); got != "T/Count T/Raw T/Stream T/Sum T/Wrapped" {
		t.Errorf("Descriptions in the order %s, want by name", got)
	}
	if d, ok := schema.Describe(reg, "No/Such"); ok {
		t.Errorf("Describe(No/Such) = %+v, true", d)
	}
	// What rpcd's codec writes for a description is what encoding/json
	// writes (Sys/Describe answers with the codec).
	d, _ := schema.Describe(reg, "T/Sum")
	enc, err := handler.JSON.Append(nil, &d)
	if err != nil || string(enc) != want["T/Sum"] {
		t.Errorf("JSON.Append: %s, %v\nwant %s", enc, err, want["T/Sum"])
	}
}

// TestDescribeLazy: registering a typed route derives no schema; the first
// description does, once, and later ones reuse it, whatever middleware is
// added in between.
func TestDescribeLazy(t *testing.T) {
	countedSchemas.Store(0)
	reg := handler.NewRegistry()
	reg.Handle("T/Counted", handler.Func(func(context.Context, countedArg) (countedArg, error) { return countedArg{}, nil }))
	if n := countedSchemas.Load(); n != 0 {
		t.Fatalf("registration derived %d schemas, want none", n)
	}
	d1, _ := schema.Describe(reg, "T/Counted")
	reg.Use(func(next handler.Handler) handler.Handler { return next })
	d2, _ := schema.Describe(reg, "T/Counted")
	schema.Descriptions(reg)
	if n := countedSchemas.Load(); n != 2 {
		t.Errorf("three descriptions derived %d schemas, want 2 (argument and reply, once)", n)
	}
	if d1.Argument != d2.Argument || d1.Reply != d2.Reply {
		t.Error("the second description derived its schemas again")
	}
}

// ExampleDescribe shows a typed route's description: its
// argument's and its reply's JSON Schemas, derived from its Go types.
func ExampleDescribe() {
	type point struct {
		X float64 `json:"x"`
		Y float64 `json:"y"`
	}
	reg := handler.NewRegistry()
	reg.Handle("Geo/Norm", handler.Func(func(_ context.Context, p point) (float64, error) {
		return p.X*p.X + p.Y*p.Y, nil
	}))
	d, _ := schema.Describe(reg, "Geo/Norm")
	b, _ := json.MarshalIndent(d, "", "  ")
	fmt.Println(string(b))
	// Output:
	// {
	//   "name": "Geo/Norm",
	//   "kind": "typed",
	//   "argument": {
	//     "title": "schema_test.point",
	//     "type": "object",
	//     "properties": {
	//       "x": {
	//         "type": "number",
	//         "format": "double"
	//       },
	//       "y": {
	//         "type": "number",
	//         "format": "double"
	//       }
	//     }
	//   },
	//   "reply": {
	//     "type": "number",
	//     "format": "double"
	//   }
	// }
}

// TestDescribeStableJSON: a description is the same bytes each time rpcd's
// codec (sonic, as Sys/Describe answers) encodes it, $defs in order, and
// the bytes encoding/json writes.
func TestDescribeStableJSON(t *testing.T) {
	reg := handler.NewRegistry()
	reg.Handle("T/Defs", handler.Func(func(context.Context, defA) (defA, error) { return defA{}, nil }))
	d, _ := schema.Describe(reg, "T/Defs")
	if len(d.Argument.Defs) != 2 || len(d.Reply.Defs) != 2 {
		t.Fatalf("$defs %v and %v, want defA and defC in each", d.Argument.Defs, d.Reply.Defs)
	}
	want, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		got, err := handler.JSON.Append(nil, []schema.Description{d})
		if err != nil || string(got) != "["+string(want)+"]" {
			t.Fatalf("encoding %d: %s, %v\nwant [%s]", i, got, err, want)
		}
	}
}
