package schema_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/handler/schema"
)

// Types whose descriptions TestRender renders.
type (
	renderNode struct {
		Name  string            `json:"name"`
		Kids  []renderNode      `json:"kids,omitempty"`
		Attrs map[string]string `json:"attrs"`
	}
	renderAll struct {
		When  time.Time     `json:"when"`
		Took  time.Duration `json:"took"`
		Data  []byte        `json:"data"`
		Pair  [2]uint16     `json:"pair"`
		Ptr   *int8         `json:"ptr,omitempty"`
		Any   any           `json:"any"`
		Tree  *renderNode   `json:"tree"`
		Inner struct {
			F float32 `json:"f"`
		} `json:"inner"`
	}
)

// TestRender pins the rendering of each kind of route and of a typed
// route's types: scalars by their Go names, pointers, slices, arrays,
// maps, structs with their fields in columns (a reply's optional fields
// marked), named types, recursion.
func TestRender(t *testing.T) {
	reg := handler.NewRegistry()
	reg.Handle("T/All", handler.Func(func(context.Context, renderAll) (renderAll, error) { return renderAll{}, nil }), handler.Blocking())
	reg.HandleFunc("T/Raw", func(_ context.Context, req, reply []byte) ([]byte, error) { return reply, nil }, handler.Inline())
	reg.HandleStream("T/Stream", func(context.Context, handler.Stream) error { return nil })
	builtin.HandleDescribe(reg)
	want := map[string]string{
		"T/Raw":    "T/Raw: raw, inline: bytes in, bytes out, in the request's codec\n",
		"T/Stream": "T/Stream: stream: bytes both ways\n",
		"T/All": `T/All: typed, blocking
  argument   schema_test.renderAll {
    when  time.Time (string, date-time)
    took  time.Duration (int64)
    data  []byte
    pair  [2]uint16
    ptr   *int8
    any   any
    tree  *renderNode
    inner struct {
      f float32
    }
  }
  reply      schema_test.renderAll {
    when  time.Time (string, date-time)
    took  time.Duration (int64)
    data  []byte
    pair  [2]uint16
    ptr   *int8                          // omitempty
    any   any
    tree  *renderNode
    inner struct {
      f float32
    }
  }
  renderNode schema_test.renderNode {
    name  string
    kids  []renderNode
    attrs map[string]string
  }
`,
		builtin.Describe: `Sys/Describe: typed
  argument builtin.DescribeArg (one of: struct {
    route string
  } | string | null)
  reply    []schema.Description {
    name     string
    kind     string
    blocking bool                                           // omitempty
    inline   bool                                           // omitempty
    argument *schema.Schema (a JSON Schema, draft 2020-12)  // omitempty
    reply    *schema.Schema (a JSON Schema, draft 2020-12)  // omitempty
  }
`,
	}
	for route, text := range want {
		d, _ := schema.Describe(reg, route)
		// As describe gets it: through JSON.
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back schema.Description
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if got := schema.Render(back); got != text {
			t.Errorf("%s:\n%s\nwant\n%s", route, got, text)
		}
	}
}
