package handler_test

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/rpcd/rpcd/handler"
)

// A stream handler runs on a goroutine of its own for each stream opened
// to its route. It reads until the opener's CloseSend (io.EOF), writes as
// it goes (each Write waits for the opener's window), and its return ends
// the stream: nil is a clean end, an error reaches the opener with its
// code. Here: upper-case each line, both ways at once.
func ExampleRegistry_HandleStream() {
	reg := handler.NewRegistry()
	reg.HandleStream("Text/Upper", func(ctx context.Context, s handler.Stream) error {
		lines := bufio.NewScanner(s)
		for lines.Scan() {
			if _, err := fmt.Fprintln(s, strings.ToUpper(lines.Text())); err != nil {
				return err
			}
		}
		return lines.Err()
	})
	fmt.Println(reg.StreamRoutes(), reg.Lookup([]byte("Text/Upper")) == nil)
	// Output: [Text/Upper] true
}
