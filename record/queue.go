package record

import (
	"encoding/binary"
	"math"
	"slices"
	"sync"
	"time"
)

// The writer's queue: the tap methods append records to one of a few
// shards, a connection's always to the same one, each under its own short
// lock; the writer takes every shard's records at once, at most once per
// batchEvery unless a shard is filling, and writes them. A tap method
// that finds its shard full drops its record and counts it in Stats.Lost.
const (
	shards = 4
	// queueLen bounds the records a shard holds, those the writer has
	// taken from it and not yet written included.
	queueLen = 16384
	// queueBytes bounds the bytes the shards hold, a quarter each.
	queueBytes = 64 << 20
	shardBytes = queueBytes / shards
	// batchEvery is how often at most the writer takes the shards' records
	// while a shard holds under hurryLen records and hurryBytes bytes: a
	// wake-up per batch, not per frame.
	batchEvery = time.Millisecond
	hurryLen   = queueLen / 4
	hurryBytes = shardBytes / 4
	// flushAfter is how long written records may wait in the writer's
	// buffer while nothing new comes.
	flushAfter = 100 * time.Millisecond
	// firstBuf is a shard buffer's first capacity; keepBuf bounds the
	// capacity of one the writer gives back for reuse.
	firstBuf = 64 << 10
	keepBuf  = 8 << 20
)

// A shard's records are laid out as the file's (docs/recording.md) but
// for their CRC, which the writer computes: the 8-byte prefix, its CRC
// zero, and the body, which for a frame holds its payload length as zero
// and the frame as the tap was given it, or only its header. flagHead, in
// the flags, marks a frame of which the tap kept only the header; it never
// reaches the file.
const flagHead = 0x80

// frameAt is the offset of a frame in a shard's frame record.
const frameAt = RecordPrefixSize + RecordHeadSize + 4

// shard is one part of the writer's queue.
type shard struct {
	mu      sync.Mutex
	buf     []byte // records appended since the writer last took them
	n       int    // records held: in buf, and in the writer's batch from this shard
	size    int    // their bytes
	waiting bool   // the shard is on the queue channel, for the writer to take
	closed  bool   // the recording has ended: the shard takes nothing more
	spare   []byte // the buffer the writer gave back, for the next swap
	_       [64]byte
}

// batch is what the writer took from a shard.
type batch struct {
	buf     []byte
	n, size int
}

// push appends a record of type t for conn to conn's shard, stamped now;
// data is a frame, a frame's header (flags has flagHead) or a remote
// address. It reports false if the recording has ended; a full shard
// drops the record and counts it lost.
func (r *Recorder) push(conn uint64, t EntryType, flags byte, data []byte) bool {
	size := RecordPrefixSize + RecordHeadSize + len(data)
	if t == EntryFrame {
		size += 4
	}
	s := &r.shards[conn%shards]
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	if s.n >= queueLen || s.size+size > shardBytes {
		s.mu.Unlock()
		r.lost.Add(1)
		return true
	}
	// Stamped under the lock, a shard's records are in the order of their
	// times, which drain merges.
	s.buf = appendTapped(s.buf, size, t, flags, time.Since(r.start), conn, data)
	s.n++
	s.size += size
	notify := !s.waiting
	s.waiting = true
	hurry := s.n == hurryLen || (s.size >= hurryBytes && s.size-size < hurryBytes)
	s.mu.Unlock()
	if notify {
		select {
		case r.queue <- s:
		default: // the queue holds every shard: the writer takes them all
		}
	}
	if hurry {
		select {
		case r.hurry <- struct{}{}:
		default:
		}
	}
	return true
}

// appendTapped appends to dst a record of size bytes (push's layout).
func appendTapped(dst []byte, size int, t EntryType, flags byte, at time.Duration, conn uint64, data []byte) []byte {
	if dst == nil {
		dst = make([]byte, 0, max(firstBuf, size))
	}
	n := len(dst)
	dst = slices.Grow(dst, size)[:n+size]
	rec := dst[n:]
	binary.BigEndian.PutUint32(rec, uint32(size-RecordPrefixSize))
	clear(rec[4:8])
	rec[8], rec[9], rec[10], rec[11] = byte(t), flags, 0, 0
	binary.BigEndian.PutUint64(rec[12:], uint64(at))
	binary.BigEndian.PutUint64(rec[20:], conn)
	off := RecordPrefixSize + RecordHeadSize
	if t == EntryFrame {
		clear(rec[off:frameAt])
		off = frameAt
	}
	copy(rec[off:], data)
	return dst
}

// take hands the writer what s holds, s locked; final closes s to the
// tap.
func (s *shard) take(final bool) batch {
	b := batch{buf: s.buf, n: s.n, size: s.size}
	s.buf, s.spare = s.spare, nil
	s.waiting = false
	s.closed = s.closed || final
	return b
}

// release gives back to s the room of the batch the writer has written,
// and its buffer for reuse (or, if it grew past keepBuf, a new one of
// keepBuf, so that the tap seldom grows one); it returns the bytes s
// holds.
func (s *shard) release(b batch) int {
	spare := b.buf[:0]
	if cap(spare) > keepBuf {
		spare = make([]byte, 0, keepBuf)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n -= b.n
	s.size -= b.size
	if !s.closed {
		s.spare = spare
	}
	return s.size
}

// shut closes s to the tap for good and lets its buffers go.
func (s *shard) shut() {
	s.mu.Lock()
	s.closed = true
	s.buf, s.spare = nil, nil
	s.mu.Unlock()
}

// drain takes every shard's records and writes them, merged in the order
// of their times (each shard's kept in its own order, so that each
// connection's is); final closes the shards to the tap first (Stop).
func (r *Recorder) drain(final bool) {
	for len(r.queue) > 0 { // the shards this take answers for
		<-r.queue
	}
	// Every shard at once, so that each record taken was stamped before
	// every record left (stamps are taken under the shards' locks): the
	// batches follow one another in time, as the records of one do once
	// merged.
	var held [shards]batch
	var rest [shards][]byte
	queued := 0
	for i := range r.shards {
		r.shards[i].mu.Lock()
	}
	for i := range r.shards {
		held[i] = r.shards[i].take(final)
		rest[i] = held[i].buf
		queued += held[i].size
	}
	for i := range r.shards {
		r.shards[i].mu.Unlock()
	}
	r.queued.Store(int64(queued))
	for r.ended.Load() == 0 {
		// The shard whose next record is the earliest, and the time up to
		// which it goes first: the others' earliest.
		next, nextAt, until := -1, uint64(0), uint64(math.MaxUint64)
		for i, b := range rest {
			if len(b) == 0 {
				continue
			}
			if at := recordAt(b); next < 0 || at < nextAt {
				if next >= 0 {
					until = nextAt
				}
				next, nextAt = i, at
			} else {
				until = min(until, at)
			}
		}
		if next < 0 {
			break
		}
		b := rest[next]
		for len(b) > 0 && recordAt(b) <= until && r.ended.Load() == 0 {
			n := RecordPrefixSize + int(binary.BigEndian.Uint32(b))
			r.handle(b[:n:n])
			b = b[n:]
		}
		rest[next] = b
	}
	r.publish()
	queued = 0
	for i := range r.shards {
		queued += r.shards[i].release(held[i])
	}
	r.queued.Store(int64(queued))
}

// recordAt is the time of the record that begins b.
func recordAt(b []byte) uint64 { return binary.BigEndian.Uint64(b[RecordPrefixSize+4:]) }
