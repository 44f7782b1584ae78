package record

import (
	"errors"
	"fmt"
)

var (
	// ErrCutShort is Reader.Next's error for a file that ends cleanly
	// between two records but has no end record: the recorder stopped
	// without ending the recording (a crash, a full disk). The entries read
	// before it are whole and checked.
	ErrCutShort = errors.New("rpcd: recording cut short: no end record")

	// ErrBadFile is matched (with errors.Is) by every error of a Reader for
	// bytes that are not a valid recording: truncated, corrupted, of another
	// format version, or with a length past its bound. The error's text
	// names the byte offset where the reader found the fault.
	ErrBadFile = errors.New("rpcd: not a valid recording")
)

// badFile returns an error wrapping ErrBadFile that names offset off.
func badFile(off int64, format string, args ...any) error {
	return fmt.Errorf("%w: offset %d: "+format, append([]any{ErrBadFile, off}, args...)...)
}

// errorf returns an error prefixed "rpcd: record: ".
func errorf(format string, args ...any) error {
	return fmt.Errorf("rpcd: record: "+format, args...)
}
