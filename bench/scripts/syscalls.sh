#!/usr/bin/env bash
# System calls per call on each side of one bench module cell, counted by
# the kernel's tracepoints (perf stat, which barely slows what it counts)
# over 3 s in the middle of a 6 s run: the bench process (the client) and
# its server child, in turn.
#
# usage: bench/scripts/syscalls.sh BENCH_BINARY SYSTEM CELL
#   e.g. (cd bench && go build -o /tmp/bench .) && bench/scripts/syscalls.sh /tmp/bench rpcd 100x1-16B
# It needs perf with the syscalls tracepoints (linux-perf), run as root.
set -euo pipefail
bin=$1 system=$2 cell=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
events=syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_read,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_futex,syscalls:sys_enter_nanosleep

"$bin" -cells "$cell" -systems "$system" -d 6s -runs 1 -warmup 500ms >"$out/run" 2>&1 &
bench=$!
sleep 2 # the server child is up and the measurement under way
server=$(pgrep -P "$bench" | head -1)
perf stat -x, -e "$events" -p "$bench" -o "$out/client" -- sleep 3 &
perf stat -x, -e "$events" -p "$server" -o "$out/server" -- sleep 3
wait

rate=$(awk '/run 1\/1/ {print $5}' "$out/run")
echo "$system $cell: $rate calls/s (the whole run's); per call over the 3 s counted:"
for side in client server; do
	awk -F, -v calls="$((rate * 3))" -v side="$side" '
		/syscalls:/ { split($3, e, "sys_enter_"); printf "%s%s %.3f", (n++ ? "  " : side ": "), e[2], $1 / calls }
		END { print "" }' "$out/$side"
done
