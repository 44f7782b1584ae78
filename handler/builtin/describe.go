package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/schema"
	"github.com/rpcd/rpcd/proto"
)

// Describe is the route HandleDescribe registers: it answers the
// descriptions of the server's routes (schema.Description), as `rpcd
// describe` prints them.
const Describe = "Sys/Describe"

// DescribeArg is the argument of Sys/Describe: the route to describe, given
// as {"route": "Math/Sum"} or as the JSON string "Math/Sum". No argument,
// {}, null or "" describes every route.
type DescribeArg struct {
	Route string `json:"route,omitempty"`
}

// UnmarshalJSON takes an object with "route", a string, or null.
func (a *DescribeArg) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &a.Route)
	}
	var obj struct {
		Route string `json:"route"`
	}
	if len(b) == 0 || b[0] != '{' && !bytes.Equal(b, []byte("null")) {
		return errors.New(`want {"route": "Controller/Action"}, a string, or nothing`)
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return err
	}
	a.Route = obj.Route
	return nil
}

// JSONSchema is DescribeArg's schema: an object with "route", or a string.
func (DescribeArg) JSONSchema() *schema.Schema {
	str := &schema.Schema{Type: schema.Types{"string"}}
	return &schema.Schema{AnyOf: []*schema.Schema{
		{Type: schema.Types{"object"}, Properties: schema.Properties{{Name: "route", Schema: str}}},
		str,
		{Type: schema.Types{"null"}},
	}}
}

// HandleDescribe registers Sys/Describe on reg: given a route, it answers
// an array of its one description, NotFound if reg has no such route;
// given none, the descriptions of all of reg's routes, stream routes among
// them, sorted by name.
func HandleDescribe(reg *handler.Registry) {
	reg.Handle(Describe, handler.Func(func(_ context.Context, in DescribeArg) ([]schema.Description, error) {
		if in.Route == "" {
			return schema.Descriptions(reg), nil
		}
		d, ok := schema.Describe(reg, in.Route)
		if !ok {
			return nil, &handler.Error{Code: proto.CodeNotFound, Message: "no route " + in.Route}
		}
		return []schema.Description{d}, nil
	}))
}
