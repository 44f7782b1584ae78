#!/usr/bin/env bash
# What compression costs and saves a call: rpcd bench echoing a JSON listing
# (records with varied fields, as a service's list of nodes might be) with
# -compress none, zstd and gzip, interleaved, each run against a child
# rpcd serve of its own; calls/s, p50 and CPU per call (client and server
# processes) as rpcd bench prints them. Run from the repository's root.
#
# usage: bench/scripts/compression.sh [SIZE_BYTES] [INFLIGHT] [RUNS] [DURATION]
#   e.g. bench/scripts/compression.sh 16384 4 3 2s
set -euo pipefail
size=${1:-16384} inflight=${2:-4} runs=${3:-3} dur=${4:-2s}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/rpcd" ./cmd/rpcd
python3 - "$size" >"$dir/listing.json" <<'PY'
import json, random, sys
random.seed(1)
n, recs = int(sys.argv[1]), []
while True:
    recs.append({"id": len(recs), "name": "node-%d" % random.randint(0, 500),
                 "zone": random.choice(["eu-west-1a", "eu-west-1b", "us-east-2c"]),
                 "state": random.choice(["serving", "draining", "starting"]),
                 "load": round(random.random(), 3),
                 "tags": random.sample(["db", "cache", "edge", "api", "batch", "gpu"], 2)})
    s = json.dumps(recs, separators=(",", ":"))
    if len(s) >= n:
        sys.stdout.write(s)
        break
PY
echo "run compression calls/s p50_us cpu_us_per_call"
for r in $(seq "$runs"); do
	for c in none zstd gzip; do
		"$dir/rpcd" bench -route Bench/EchoPacket -payload "$dir/listing.json" -expect-echo \
			-compress "$c" -c 1 -inflight "$inflight" -d "$dur" 2>&1 | tail -1 |
			awk -v r="$r" -v c="$c" '{ if ($5 != 0) { print "errors:", $0; exit 1 }; print r, c, $4, $7, $NF }'
	done
done
