package main

import (
	"encoding/json"
	"testing"

	"github.com/rpcd/rpcd/load"
)

// TestProcessBenchStream: the stream scenarios against their own child
// server, each way: every byte counted at the other end, the server's
// memory sampled.
func TestProcessBenchStream(t *testing.T) {
	for _, sc := range []string{"StreamUpload", "StreamDownload"} {
		for _, zip := range []string{"", "zstd"} { // the streams moved compressed, and counted as they are
			t.Run(sc+zip, func(t *testing.T) {
				r := rpcd(t, "", "bench", "-scenario", sc, "-size", "3000000", "-c", "2", "-json", "-compress", zip)
				if r.code != 0 {
					t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
				}
				var rep load.StreamReport
				if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
					t.Fatalf("%v\n%s", err, r.stdout)
				}
				if rep.Scenario != sc || rep.Compression != zip || rep.Streams != 2 || rep.Bytes != 3000000 || rep.MiBps <= 0 ||
					rep.ServerHeap0 == 0 || rep.ServerHeapMax < rep.ServerHeap0 {
					t.Fatalf("report %+v", rep)
				}
			})
		}
	}
	if r := rpcd(t, "", "bench", "-scenario", "StreamUpload", "-c", "0"); r.code != exitUsage {
		t.Fatalf("-c 0: exit %d, want 78\n%s", r.code, r.stderr)
	}
}
