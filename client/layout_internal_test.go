package client

import (
	"testing"
	"unsafe"
)

// TestHotFieldsTogether: what a call touches of its client, its
// connection, its AsyncCaller and its Pipe lies in the first cache lines of each, as
// the structs' comments say; at 10,000 connections each of those lines is
// a cache miss a call (docs/performance.md, "The load generator"). It fails when
// a field added or moved pushes one out.
func TestHotFieldsTogether(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the bounds are a 64-bit platform's")
	}
	type field struct {
		name     string
		off, end uintptr
	}
	within := func(what string, limit uintptr, fs ...field) {
		t.Helper()
		for _, f := range fs {
			if f.end > limit {
				t.Errorf("%s: %s ends at byte %d, past %d (%d lines)", what, f.name, f.end, limit, limit/64)
			}
		}
	}
	var c Client
	within("Client", 64,
		field{"closed", unsafe.Offsetof(c.closed), unsafe.Offsetof(c.closed) + unsafe.Sizeof(c.closed)},
		field{"first", unsafe.Offsetof(c.first), unsafe.Offsetof(c.first) + unsafe.Sizeof(c.first)},
		field{"slots", unsafe.Offsetof(c.slots), unsafe.Offsetof(c.slots) + unsafe.Sizeof(c.slots)},
		field{"idle", unsafe.Offsetof(c.idle), unsafe.Offsetof(c.idle) + unsafe.Sizeof(c.idle)},
		field{"icpt", unsafe.Offsetof(c.icpt), unsafe.Offsetof(c.icpt) + unsafe.Sizeof(c.icpt)})
	o := unsafe.Offsetof(c.opts)
	within("Client", 3*64,
		field{"opts.Limits", o + unsafe.Offsetof(c.opts.Limits), o + unsafe.Offsetof(c.opts.Limits) + unsafe.Sizeof(c.opts.Limits)},
		field{"opts.Timeout", o + unsafe.Offsetof(c.opts.Timeout), o + unsafe.Offsetof(c.opts.Timeout) + 8},
		field{"opts.MaxRetries", o + unsafe.Offsetof(c.opts.MaxRetries), o + unsafe.Offsetof(c.opts.MaxRetries) + 8})

	var cl call
	callHot := []field{
		{"id", unsafe.Offsetof(cl.id), unsafe.Offsetof(cl.id) + 4},
		{"reply", unsafe.Offsetof(cl.reply), unsafe.Offsetof(cl.reply) + unsafe.Sizeof(cl.reply)},
		{"then", unsafe.Offsetof(cl.then), unsafe.Offsetof(cl.then) + 8},
		{"owner", unsafe.Offsetof(cl.owner), unsafe.Offsetof(cl.owner) + 8},
		{"done", unsafe.Offsetof(cl.done), unsafe.Offsetof(cl.done) + 8},
		{"route", unsafe.Offsetof(cl.route), unsafe.Offsetof(cl.route) + unsafe.Sizeof(cl.route)},
		{"deadline", unsafe.Offsetof(cl.deadline), unsafe.Offsetof(cl.deadline) + 8},
		{"stop", unsafe.Offsetof(cl.stop), unsafe.Offsetof(cl.stop) + 8},
		{"err", unsafe.Offsetof(cl.err), unsafe.Offsetof(cl.err) + unsafe.Sizeof(cl.err)},
	}
	within("call", 2*64, callHot...)
	var a AsyncCaller
	base := unsafe.Offsetof(a.cl)
	asyncHot := []field{
		{"c", unsafe.Offsetof(a.c), unsafe.Offsetof(a.c) + 8},
		{"done", unsafe.Offsetof(a.done), unsafe.Offsetof(a.done) + 8},
		{"state", unsafe.Offsetof(a.state), unsafe.Offsetof(a.state) + 4},
		{"at", unsafe.Offsetof(a.at), unsafe.Offsetof(a.at) + unsafe.Sizeof(a.at)},
		{"check", unsafe.Offsetof(a.check), unsafe.Offsetof(a.check) + unsafe.Sizeof(a.check)},
	}
	for _, f := range callHot {
		asyncHot = append(asyncHot, field{"cl." + f.name, base + f.off, base + f.end})
	}
	within("AsyncCaller", 3*64, asyncHot...)

	var w wire
	if off := unsafe.Offsetof(w.pending); off != 0 {
		t.Errorf("wire: the pending table is at byte %d, not first (its own fields fit the first line: engine's TestCalls)", off)
	}
	r := unsafe.Offsetof(w.rd)
	within("wire", 11*64,
		field{"wbuf", unsafe.Offsetof(w.wbuf), unsafe.Offsetof(w.wbuf) + unsafe.Sizeof(w.wbuf)},
		field{"lim", unsafe.Offsetof(w.lim), unsafe.Offsetof(w.lim) + unsafe.Sizeof(w.lim)},
		field{"rd.tok", r + unsafe.Offsetof(w.rd.tok), r + unsafe.Offsetof(w.rd.tok) + 4},
		field{"rd.br", r + unsafe.Offsetof(w.rd.br), r + unsafe.Offsetof(w.rd.br) + unsafe.Sizeof(w.rd.br)},
		field{"rd.heardSrc", r + unsafe.Offsetof(w.rd.heardSrc), r + unsafe.Offsetof(w.rd.heardSrc) + unsafe.Sizeof(w.rd.heardSrc)},
		field{"pipe", unsafe.Offsetof(w.pipe), unsafe.Offsetof(w.pipe) + 8},
		field{"async", unsafe.Offsetof(w.async), unsafe.Offsetof(w.async) + unsafe.Sizeof(w.async)})

	var p Pipe
	within("Pipe", 3*64,
		field{"mu", unsafe.Offsetof(p.mu), unsafe.Offsetof(p.mu) + unsafe.Sizeof(p.mu)},
		field{"own", unsafe.Offsetof(p.own), unsafe.Offsetof(p.own) + unsafe.Sizeof(p.own)},
		field{"ring", unsafe.Offsetof(p.ring), unsafe.Offsetof(p.ring) + unsafe.Sizeof(p.ring)},
		field{"out", unsafe.Offsetof(p.out), unsafe.Offsetof(p.out) + unsafe.Sizeof(p.out)},
		field{"check", unsafe.Offsetof(p.check), unsafe.Offsetof(p.check) + unsafe.Sizeof(p.check)},
		field{"start", unsafe.Offsetof(p.start), unsafe.Offsetof(p.start) + 8},
		field{"c", unsafe.Offsetof(p.c), unsafe.Offsetof(p.c) + 8},
		field{"done", unsafe.Offsetof(p.done), unsafe.Offsetof(p.done) + 8},
		field{"timeout", unsafe.Offsetof(p.timeout), unsafe.Offsetof(p.timeout) + 8},
		field{"at", unsafe.Offsetof(p.at), unsafe.Offsetof(p.at) + 8})

	// What a reply reads of its call's place: on one line, for a one-call
	// pipe's place in the pipe too.
	var e pipeCall
	replyHot := unsafe.Offsetof(e.deadline) + 8
	within("pipeCall", 64,
		field{"link", unsafe.Offsetof(e.link), unsafe.Offsetof(e.link) + 8},
		field{"tag", unsafe.Offsetof(e.tag), unsafe.Offsetof(e.tag) + 8},
		field{"reply", unsafe.Offsetof(e.reply), unsafe.Offsetof(e.reply) + unsafe.Sizeof(e.reply)},
		field{"deadline", unsafe.Offsetof(e.deadline), replyHot})
	if off := unsafe.Offsetof(p.small); off/64 != (off+replyHot-1)/64 {
		t.Errorf("Pipe: what a reply reads of a one-call pipe's place, bytes %d to %d, spans two lines", off, off+replyHot)
	}
}
