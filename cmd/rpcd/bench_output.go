package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
)

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w *bytes.Buffer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // maps, strings and numbers: cannot fail
}

// writeReport writes rep to standard output as indented JSON, or as its
// text.
func (c *cli) writeReport(rep report, jsonOut bool) error {
	var b bytes.Buffer
	if jsonOut {
		writeJSON(&b, rep)
	} else {
		_ = rep.WriteText(&b)
	}
	return c.write(b.Bytes())
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	fh, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := fh.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
