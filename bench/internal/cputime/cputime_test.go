package cputime

import (
	"os"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// A command name with spaces and parentheses; utime 250, stime 50.
	stat := "4242 (bench (x) y) S 1 4242 4242 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 9 0 12345 0 0"
	got, err := ParseStat(stat, 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * time.Second; got != want {
		t.Fatalf("got %v, want %v", got, want)
	}
	if _, err := ParseStat("4242 bench S 1", 100); err == nil {
		t.Fatal("no error for a line without a name in parentheses")
	}
	// This process's own line parses.
	if _, err := Process(os.Getpid()); err != nil {
		t.Fatal(err)
	}
}
