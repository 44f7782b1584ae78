package gen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/handler/schema"
	"github.com/rpcd/rpcd/proto"
)

// Fetch asks the server behind c (a *client.Client, a *client.Cluster) for
// the descriptions of its routes (Sys/Describe), or of route alone when it
// is not empty, as the server encoded them: an array of descriptions, the
// JSON `rpcd describe -json` prints. A server without Sys/Describe fails
// with ErrNoDescribe; an unknown route with the server's NotFound.
func Fetch(ctx context.Context, c handler.Caller, route string) (json.RawMessage, error) {
	var arg any // nil: every route
	if route != "" {
		arg = builtin.DescribeArg{Route: route}
	}
	var reply json.RawMessage
	if err := c.Call(ctx, builtin.Describe, arg, &reply); err != nil {
		if handler.CodeOf(err) == proto.CodeNotFound && handler.MessageOf(err) == "no route "+builtin.Describe {
			return nil, ErrNoDescribe
		}
		return nil, err
	}
	return reply, nil
}

// Read decodes descriptions as Fetch returns them and `rpcd describe
// -json` prints them: a JSON array of schema.Description.
func Read(r io.Reader) ([]schema.Description, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("rpcd: reading the descriptions: %w", err)
	}
	var ds []schema.Description
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&ds); err != nil {
		return nil, fmt.Errorf("rpcd: the descriptions do not decode (want the JSON array rpcd describe -json prints): %w", err)
	}
	if d.More() {
		return nil, errors.New("rpcd: the descriptions are followed by more than white space")
	}
	return ds, nil
}

// Languages are the generators by the names `rpcd gen` takes.
var Languages = map[string]func([]schema.Description, Options) ([]byte, error){
	"ts": TypeScript, "python": Python, "go": Go,
}

// Generate writes the code of language lang (a key of Languages) for the
// descriptions in JSON as Read takes them.
func Generate(lang string, descriptions []byte, o Options) ([]byte, error) {
	g := Languages[lang]
	if g == nil {
		return nil, fmt.Errorf("rpcd: gen: no language %q: want ts, python or go", lang)
	}
	ds, err := Read(bytes.NewReader(descriptions))
	if err != nil {
		return nil, err
	}
	return g(ds, o)
}
