package record

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/rpcd/rpcd/proto"
)

// Filter rewrites a recording: rpcd record -filter.
type Filter struct {
	// Drop leaves out the calls (streams, subscriptions, publishes) whose
	// routes match one of these path.Match patterns, with every frame that
	// belongs to them.
	Drop []string
	// Set gives a metadata key a value on every call (Request, OneWay,
	// StreamOpen, Publish, Subscribe): the key's first entry takes the
	// value, or an entry is added where the call has none.
	Set []MetaValue
	// Replace changes a metadata value where it is Old, on every call.
	Replace []MetaReplace
}

// MetaValue is a metadata key and its value.
type MetaValue struct{ Key, Value string }

// MetaReplace is a metadata value to change: key's value Old becomes New.
type MetaReplace struct{ Key, Old, New string }

// ParseMetaValue parses "key=value".
func ParseMetaValue(s string) (MetaValue, error) {
	k, v, err := proto.ParsePair(s)
	if err != nil {
		return MetaValue{}, errorf("%v", err)
	}
	return MetaValue{k, v}, nil
}

// ParseMetaReplace parses "key=old=>new".
func ParseMetaReplace(s string) (MetaReplace, error) {
	k, v, err := proto.ParsePair(s)
	if err != nil {
		return MetaReplace{}, errorf("%v", err)
	}
	old, new, ok := strings.Cut(v, "=>")
	if !ok {
		return MetaReplace{}, errorf("%q is not key=old=>new", s)
	}
	return MetaReplace{k, old, new}, nil
}

// check refuses patterns that do not parse.
func (f *Filter) check() error {
	for _, p := range f.Drop {
		if _, err := path.Match(p, ""); err != nil {
			return errorf("route pattern %q: %v", p, err)
		}
	}
	for _, m := range f.Set {
		if _, _, err := proto.ParsePair(m.Key + "=" + m.Value); err != nil {
			return errorf("set: %v", err)
		}
	}
	for _, m := range f.Replace {
		if _, _, err := proto.ParsePair(m.Key + "=" + m.New); err != nil {
			return errorf("replace: %v", err)
		}
	}
	return nil
}

// Apply writes to w the recording r holds from its next entry on, as f
// changes it, and returns the new recording's figures. The header is r's;
// the end record counts what was written, and keeps r's lost records and
// reason. A source cut short gives ErrCutShort, with what came before it
// written and no end record.
func (f *Filter) Apply(w io.Writer, r *Reader) (Stats, error) {
	if err := f.check(); err != nil {
		return Stats{}, err
	}
	h := r.Header()
	bw := bufio.NewWriterSize(w, 256<<10)
	buf, err := appendFileHeader(nil, &h)
	if err != nil {
		return Stats{}, err
	}
	var s Stats
	put := func(b []byte) {
		if err == nil {
			_, err = bw.Write(b)
			s.Bytes += int64(len(b))
		}
	}
	put(buf)
	track := newConns(nil, true)
	track.drop = f.Drop
	var md proto.Metadata
	maxMeta := proto.Limits{}.WithDefaults().MaxMetadata
	for err == nil {
		e, rerr := r.Next()
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				end, at, _ := r.End()
				s.Lost, s.Ended = end.Lost, end.Ended
				put(appendEnd(buf[:0], at, &s))
				break
			}
			err = rerr
			break
		}
		switch e.Type {
		case EntryOpen:
			track.get(e.Conn)
			s.Conns++
			put(appendOpen(buf[:0], e.At, e.Conn, e.Remote))
		case EntryClose:
			track.forget(e.Conn)
			put(appendClose(buf[:0], e.At, e.Conn))
		case EntryFrame:
			c, _ := track.get(e.Conn)
			keep, _, starts := track.decide(c, &e.Frame.Header, e.Frame.Route, e.Out)
			if !keep {
				continue
			}
			fr := &e.Frame
			meta := fr.Metadata
			if starts && (len(f.Set) > 0 || len(f.Replace) > 0) {
				md = f.rewrite(md[:0], fr.Metadata)
				if len(md) > maxMeta {
					err = errorf("conn %d, %v %s: metadata of %d bytes once rewritten, past the limit of %d", e.Conn, fr.Kind, fr.Route, len(md), maxMeta)
					break
				}
				meta = md
			}
			s.Frames++
			if starts {
				s.Calls++
			}
			put(appendFrame(buf[:0], e.At, e.Conn, e.Out, e.Redacted, e.PayloadLen, fr.Header, fr.Route, meta, fr.Payload))
		}
		buf = buf[:0]
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return s, err
}

// rewrite appends md to dst with f's Set and Replace applied.
func (f *Filter) rewrite(dst, md proto.Metadata) proto.Metadata {
	set := make([]bool, len(f.Set))
	md.Range(func(k, v []byte) bool {
		if i := slices.IndexFunc(f.Set, func(s MetaValue) bool { return s.Key == string(k) }); i >= 0 && !set[i] {
			set[i] = true
			v = []byte(f.Set[i].Value)
		} else {
			for _, r := range f.Replace {
				if r.Key == string(k) && r.Old == string(v) {
					v = []byte(r.New)
					break
				}
			}
		}
		dst = proto.AppendMetadata(dst, string(k), v)
		return true
	})
	for i, s := range f.Set {
		if !set[i] {
			dst = proto.AppendMetadata(dst, s.Key, []byte(s.Value))
		}
	}
	return dst
}

// FilterFile writes the recording at in, as f changes it, to a new file at
// out (mode 0600, never over an existing file).
func FilterFile(out, in string, f Filter) (Stats, error) {
	r, err := Open(in)
	if err != nil {
		return Stats{}, err
	}
	defer r.Close()
	w, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return Stats{}, errorf("%w", err)
	}
	s, err := f.Apply(w, r)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return s, err
}
