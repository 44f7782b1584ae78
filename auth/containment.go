package auth

import "bytes"

// Which topics a subscription reaches. A subscription to a pattern is
// allowed when every topic the pattern matches is allowed: matched by an
// Allow pattern and by no Deny pattern. Topics are unbounded in number, so
// this is decided on the patterns themselves, exactly, by overlap (does a
// Deny pattern share a topic with it) and covers (do the Allow patterns
// match all of its topics). FuzzTopicContainment checks both against the
// definition, over every topic of a finite set that stands for all.

// overlap reports whether some topic matches both patterns (valid ones).
func overlap(a, b []byte) bool {
	for {
		at, arest, amore := cutToken(a)
		bt, brest, bmore := cutToken(b)
		if isToken(at, '>') || isToken(bt, '>') {
			// One takes any one or more tokens, and the other's rest, one
			// token or more, matches some topic: that topic, after the
			// tokens both have matched so far, matches both.
			return true
		}
		if !isToken(at, '*') && !isToken(bt, '*') && !bytes.Equal(at, bt) {
			return false
		}
		if !amore || !bmore {
			return amore == bmore // one ends where the other needs more
		}
		a, b = arest, brest
	}
}

// covers reports whether every topic pattern matches is matched by one of
// by (all valid patterns).
//
// The topics of l tokens a pattern matches are a box: at each position,
// one token (a literal) or any token (a wildcard, or a position under its
// final ">"). If patterns of by together match every topic of the box p
// makes at length l, one of them alone does: take the topic of p's box
// that has, at each position p leaves free, a token none of by names
// (tokens are unbounded strings: one always exists). Some pattern a of by
// matches it; a names no token where p is free (it would differ from the
// topic's), and where p names one, a names the same or is free; so a
// matches every topic of the box. Lengths: p without ">" has one; p with
// ">" after k tokens has every length from k+1 on. A pattern of by of m
// tokens matches topics of m tokens only, or, ending in ">", of m or more,
// deciding by its first m-1 tokens; so past the longest pattern of by,
// every length is decided as that one plus one is, and the lengths up to
// it settle them all.
//
// The lengths are the grammar's, unbounded: a server's route limit bounds
// a real topic to 128 tokens, so a set of Allow patterns that lists every
// length up to the limit, and none past it, is refused a ">" that no
// topic a client can publish would make it lose. Refusing is the safe way
// to be wrong.
func covers(by [][]byte, pattern []byte) bool {
	n, tail := shape(pattern)
	if !tail {
		return coveredAt(by, pattern, n)
	}
	longest := 0
	for _, a := range by {
		m, _ := shape(a)
		longest = max(longest, m)
	}
	for l := n; l <= max(n, longest+1); l++ { // n: the k tokens before ">", and one for it
		if !coveredAt(by, pattern, l) {
			return false
		}
	}
	return true
}

// coveredAt reports whether one pattern of by matches every topic of l
// tokens that p matches (p matches some of that length).
func coveredAt(by [][]byte, p []byte, l int) bool {
	for _, a := range by {
		if boxCovers(a, p, l) {
			return true
		}
	}
	return false
}

// boxCovers reports whether a matches every topic of l tokens that p
// matches (p matches some of that length).
func boxCovers(a, p []byte, l int) bool {
	pFree := false // past p's last token but its ">": every token is free
	for i := range l {
		at, arest, amore := cutToken(a)
		if isToken(at, '>') {
			return true // a takes whatever is left: l-i tokens, one or more
		}
		var pt []byte
		if !pFree {
			var prest []byte
			pt, prest, _ = cutToken(p)
			if pFree = isToken(pt, '>'); !pFree {
				p = prest
			}
		}
		if !isToken(at, '*') && (pFree || isToken(pt, '*') || !bytes.Equal(at, pt)) {
			return false // a names a token where p leaves it free, or another one
		}
		if !amore {
			return i == l-1 // a matches topics of exactly i+1 tokens
		}
		a = arest
	}
	return false // a needs more tokens than l
}

// shape returns the number of tokens of a pattern, its final ">" counted,
// and whether it ends with ">".
func shape(p []byte) (tokens int, tail bool) {
	return bytes.Count(p, []byte(".")) + 1, len(p) > 0 && p[len(p)-1] == '>'
}

// cutToken splits off b's first token; more reports whether tokens follow.
func cutToken(b []byte) (tok, rest []byte, more bool) {
	if i := bytes.IndexByte(b, '.'); i >= 0 {
		return b[:i], b[i+1:], true
	}
	return b, nil, false
}

// isToken reports whether tok is the one-byte token c.
func isToken(tok []byte, c byte) bool { return len(tok) == 1 && tok[0] == c }
