#!/usr/bin/env bash
# The HTTP gateway's latency while rpcd calls load the same server: `rpcd
# serve -gateway` with the flags given, `rpcd bench` loading its main port
# (4 connections, one caller each, for 6 s), and after 1.5 s of that, wrk
# POSTing {"a":1,"b":2} to Math/Sum over one connection for 3 s.
#
# usage: bench/scripts/gateway_under_load.sh RPCD_BINARY [SERVE_FLAGS...]
#   e.g. go build -o /tmp/rpcd ./cmd/rpcd && bench/scripts/gateway_under_load.sh /tmp/rpcd -loops 2
# It needs wrk (apt-get install wrk) and ports 7320 and 7321 free.
set -euo pipefail
bin=$1
shift
out=$(mktemp -d)
serve=
trap 'if [ -n "$serve" ]; then kill "$serve"; wait "$serve" || true; fi; rm -rf "$out"' EXIT
printf 'wrk.method = "POST"\nwrk.body = %s\nwrk.headers["Content-Type"] = "application/json"\n' "'{\"a\":1,\"b\":2}'" >"$out/sum.lua"

"$bin" serve -addr 127.0.0.1:7320 -gateway 127.0.0.1:7321 "$@" >"$out/serve" 2>&1 &
serve=$!
for _ in $(seq 50); do grep -q 'rpcd: serving' "$out/serve" && break; sleep 0.1; done
grep -q 'rpcd: serving' "$out/serve" || { cat "$out/serve" >&2; exit 1; }
"$bin" bench -addr 127.0.0.1:7320 -c 4 -d 6s -scenario EchoPacket16 >"$out/bench" 2>&1 &
load=$!
sleep 1.5
wrk -t1 -c1 -d3s --latency -s "$out/sum.lua" http://127.0.0.1:7321/rpc/Math/Sum >"$out/wrk"
wait "$load"

echo "serve $*: $(grep -o 'loops=[0-9]*' "$out/serve")"
echo "gateway: $(awk '/Requests\/sec/ {print $2 " requests/s"}' "$out/wrk"), latency $(awk '$1 == "50%" || $1 == "90%" || $1 == "99%" {printf "p%s %s  ", substr($1, 1, 2), $2}' "$out/wrk")"
echo "rpc load: $(tail -1 "$out/bench" | awk '{print $4 " calls/s, p99 " $9 " us"}')"
