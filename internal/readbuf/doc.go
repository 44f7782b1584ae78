// Package readbuf is a connection's read buffer, which grows while reads
// fill it and shrinks back once they stay small, shared by the server's
// standard library transport (reactor's stdLink) and the client's
// connections (client's read path).
//
// A Buf is bufio.Reader's Peek, Discard, Read and Buffered over a source,
// in a buffer that starts small (MinSize), doubles to MaxSize while reads
// fill it or a Peek needs the room, and halves again once many reads in a
// row used under a quarter of it. A caller that reads its source with a
// deadline of its own and wants each error as it comes (the server's
// transport) uses Fill, Bytes and Discard instead, and may keep the buffer
// from shrinking below a floor of its own (NewWith).
package readbuf
