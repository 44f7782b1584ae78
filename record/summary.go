package record

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rpcd/rpcd/proto"
)

// Summary describes a recording: what rpcd record -inspect prints.
type Summary struct {
	Header      Header
	Duration    time.Duration // how long the recording ran (its end record's time; the last record's if it was cut short)
	Conns       int64         // connections recorded
	PeakConns   int64         // connections open at once, at most
	Calls       int64         // calls, streams, subscriptions and publishes
	CallsPerSec float64       // Calls over Duration
	Frames      int64         // frames recorded, both ways
	Answers     int64         // of them, frames the server sent
	Lost        int64         // records the recorder dropped (its end record's count)
	Ended       EndReason     // why it ended; EndNone if it was cut short
	CutShort    bool          // the file has no end record
	Payload     Sizes         // the calls' payloads, as they arrived
	Routes      []RouteSummary
}

// RouteSummary is what a recording holds of one route (and kind).
type RouteSummary struct {
	Route       string
	Kind        proto.Kind // the kind that starts it: Request, OneWay, StreamOpen, Publish, Subscribe
	Calls       int64
	Share       float64 // of all calls, 0 to 1
	CallsPerSec float64
	Payload     Sizes
	Errors      int64 // Error answers, where answers were recorded
}

// Sizes are payload sizes in bytes.
type Sizes struct {
	Count    int64
	Min, Max int
	Total    int64
}

// Mean returns the mean size, 0 for none.
func (s *Sizes) Mean() float64 {
	if s.Count == 0 {
		return 0
	}
	return float64(s.Total) / float64(s.Count)
}

func (s *Sizes) add(n int) {
	if s.Count == 0 || n < s.Min {
		s.Min = n
	}
	s.Max = max(s.Max, n)
	s.Count++
	s.Total += int64(n)
}

// Summarize reads the rest of r and describes the recording. A recording
// cut short is summarised as far as it goes (CutShort); any other error
// ends it, returned with what was read before.
func Summarize(r *Reader) (Summary, error) {
	s := Summary{Header: r.Header()}
	track := newConns(nil, true)
	type key struct {
		kind  proto.Kind
		route string
	}
	routes := map[key]*RouteSummary{}
	var open int64
	var err error
	for {
		var e Entry
		if e, err = r.Next(); err != nil {
			break
		}
		s.Duration = max(s.Duration, e.At)
		switch e.Type {
		case EntryOpen:
			track.get(e.Conn)
			s.Conns++
			open++
			s.PeakConns = max(s.PeakConns, open)
		case EntryClose:
			if track.forget(e.Conn) {
				open--
			}
		case EntryFrame:
			s.Frames++
			if e.Out {
				s.Answers++
			}
			c, _ := track.get(e.Conn)
			_, route, starts := track.decide(c, &e.Frame.Header, e.Frame.Route, e.Out)
			if starts {
				k := key{e.Frame.Kind, route}
				rs := routes[k]
				if rs == nil {
					rs = &RouteSummary{Route: route, Kind: e.Frame.Kind}
					routes[k] = rs
				}
				rs.Calls++
				rs.Payload.add(e.PayloadLen)
				s.Calls++
				s.Payload.add(e.PayloadLen)
			} else if e.Out && e.Frame.Kind == proto.KindError {
				if rs := routes[key{proto.KindRequest, route}]; rs != nil {
					rs.Errors++
				}
			}
		}
	}
	switch {
	case errors.Is(err, io.EOF):
		end, at, _ := r.End()
		s.Duration, s.Lost, s.Ended, err = at, end.Lost, end.Ended, nil
	case errors.Is(err, ErrCutShort):
		s.CutShort, err = true, nil
	}
	secs := s.Duration.Seconds()
	if secs > 0 {
		s.CallsPerSec = float64(s.Calls) / secs
	}
	for _, rs := range routes {
		if s.Calls > 0 {
			rs.Share = float64(rs.Calls) / float64(s.Calls)
		}
		if secs > 0 {
			rs.CallsPerSec = float64(rs.Calls) / secs
		}
		s.Routes = append(s.Routes, *rs)
	}
	slices.SortFunc(s.Routes, func(a, b RouteSummary) int {
		return cmp.Or(cmp.Compare(b.Calls, a.Calls), cmp.Compare(a.Route, b.Route), cmp.Compare(a.Kind, b.Kind))
	})
	return s, err
}

// WriteText writes s for people, as rpcd record -inspect prints it.
func (s *Summary) WriteText(w io.Writer) error {
	h, o := &s.Header, &s.Header.Options
	ended := "ended: " + s.Ended.String()
	if s.CutShort {
		ended = "cut short: no end record"
	}
	var rules []string
	for _, r := range o.Redact {
		rule := r.Route + "=" + r.Action.String()
		if r.Action == Replace {
			rule += ":" + string(r.With)
		}
		rules = append(rules, rule)
	}
	routes := "all"
	if len(o.Routes) > 0 {
		routes = strings.Join(o.Routes, " ")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "recording of %s by the %s, format %d, started %s\n", h.Server, h.Source, h.Version, h.Start.Format(time.RFC3339))
	fmt.Fprintf(tw, "options: sample %g, routes %s, redact %s, answers %v\n", o.Sample, routes, orNone(rules), o.Answers)
	fmt.Fprintf(tw, "duration %v, %d connections (%d at most at once), %d calls (%.1f/s), %d frames (%d answers), %d lost, %s\n",
		s.Duration.Round(time.Millisecond), s.Conns, s.PeakConns, s.Calls, s.CallsPerSec, s.Frames, s.Answers, s.Lost, ended)
	fmt.Fprintf(tw, "payloads: %s\n\n", sizes(&s.Payload))
	fmt.Fprintf(tw, "route\tkind\tcalls\tshare\tcalls/s\tpayload min/mean/max\terrors\n")
	for _, r := range s.Routes {
		fmt.Fprintf(tw, "%s\t%v\t%d\t%.1f %%\t%.1f\t%s\t%d\n", r.Route, r.Kind, r.Calls, 100*r.Share, r.CallsPerSec, sizes(&r.Payload), r.Errors)
	}
	return tw.Flush()
}

func sizes(s *Sizes) string {
	if s.Count == 0 {
		return "none"
	}
	return fmt.Sprintf("%d/%.1f/%d B", s.Min, s.Mean(), s.Max)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
}

// Inspect writes the summary of the recording at path to w, as text.
func Inspect(w io.Writer, path string) error {
	r, err := Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	s, err := Summarize(r)
	if err != nil {
		return err
	}
	return s.WriteText(w)
}
