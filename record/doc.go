// Package record is the recording file: what a server received, and with
// Answers what it answered, frame by frame, with the time and connection of
// each, in the format docs/recording.md lays out byte by byte.
//
// A Recorder writes one. It implements handler/transport's Tap, so a
// server feeds it the frames of its connections, and Proxy feeds it from
// between a client and a server that cannot be touched. Its tap methods
// copy a frame and queue it for one writer goroutine, which filters it
// (kinds, routes, sampled connections, answers of recorded calls only),
// expands a compressed payload, redacts it and writes it; a full queue drops
// the frame and counts it (Stats.Lost) rather than wait.
//
// A Reader reads one back, checking every length against a bound and every
// record against its CRC-32C, so a damaged file is an error naming its
// offset. Summarize describes a recording (rpcd record -inspect), Filter
// writes a new one without some routes or with metadata changed (rpcd
// record -filter).
package record
