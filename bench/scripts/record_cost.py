#!/usr/bin/env python3
"""What recording costs a server: rpcd serve with and without -record, side by side.

usage: record_cost.py RPCD ROUNDS SECONDS OUT.json

Starts two `RPCD serve` processes on loopback, one plain and one recording
from the start with its answers (-record FILE -record-answers), and loads each
in turn with `RPCD bench -addr ... -json` at 1 x 128 and 100 x 1 (EchoPacket16),
the order of the two servers swapped every round so that a noisy moment hits
both alike. Each run gives calls/s, the load generator's CPU per call and the
server's (from its Sys/Stats, which counts the recorder's writer goroutine).
At the end the recording server is stopped (SIGTERM ends the recording) and
`RPCD record -inspect` says what the file holds and how many records were lost.

Writes every run and the medians to OUT.json and prints a table of medians and
of the on/off ratios.
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

CELLS = [("1x128", 1, 128), ("100x1", 100, 1)]


def serve(rpcd, *extra):
    p = subprocess.Popen([rpcd, "serve", "-addr", "127.0.0.1:0", "-log-format", "text", *extra],
                         stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 10
    for line in p.stderr:
        if "rpcd: serving" in line:
            for field in line.split():
                if field.startswith("addr="):
                    return p, field[len("addr="):].strip('"')
        if time.time() > deadline:
            break
    p.kill()
    sys.exit("rpcd serve did not say where it serves")


def bench(rpcd, addr, conns, inflight, seconds):
    out = subprocess.run([rpcd, "bench", "-addr", addr, "-c", str(conns), "-inflight", str(inflight),
                          "-scenario", "EchoPacket16", "-d", f"{seconds}s", "-warmup", "1s", "-json"],
                         check=True, capture_output=True, text=True).stdout
    r = json.loads(out)
    return {k: r[k] for k in ("calls_per_sec", "cpu_per_call_us", "server_cpu_per_call_us", "p50_us", "p99_us", "errors")}


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    rpcd, rounds, seconds, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    recdir = tempfile.mkdtemp(prefix="rpcd-record-cost-")
    recfile = os.path.join(recdir, "on.rec")
    off, off_addr = serve(rpcd)
    on, on_addr = serve(rpcd, "-record", recfile, "-record-answers", "-record-max-bytes", str(1 << 36))
    servers = {"off": off_addr, "on": on_addr}
    runs = []
    try:
        for rnd in range(rounds):
            order = ["off", "on"] if rnd % 2 == 0 else ["on", "off"]
            for cell, conns, inflight in CELLS:
                for which in order:
                    r = bench(rpcd, servers[which], conns, inflight, seconds)
                    r.update(round=rnd, cell=cell, recording=which)
                    runs.append(r)
                    print(f"round {rnd} {cell} {which}: {r['calls_per_sec']:.0f} calls/s, "
                          f"load {r['cpu_per_call_us']:.2f} server {r['server_cpu_per_call_us']:.2f} us/call",
                          file=sys.stderr)
    finally:
        off.send_signal(signal.SIGTERM)
        on.send_signal(signal.SIGTERM)
        off.wait(30)
        on.wait(30)
    inspect = subprocess.run([rpcd, "record", "-inspect", recfile], capture_output=True, text=True).stdout
    size = os.path.getsize(recfile)
    os.remove(recfile)
    os.rmdir(recdir)

    medians = {}
    for cell, _, _ in CELLS:
        for which in ("off", "on"):
            rs = [r for r in runs if r["cell"] == cell and r["recording"] == which]
            medians[f"{cell} {which}"] = {k: statistics.median(r[k] for r in rs)
                                          for k in ("calls_per_sec", "cpu_per_call_us", "server_cpu_per_call_us", "p50_us", "p99_us")}
    ratios = {}
    for cell, _, _ in CELLS:
        per_round = [(on["calls_per_sec"] / off["calls_per_sec"], on["server_cpu_per_call_us"] / off["server_cpu_per_call_us"])
                     for rnd in range(rounds)
                     for off in runs if off["round"] == rnd and off["cell"] == cell and off["recording"] == "off"
                     for on in runs if on["round"] == rnd and on["cell"] == cell and on["recording"] == "on"]
        ratios[cell] = {"calls_per_sec": statistics.median(x for x, _ in per_round),
                        "server_cpu_per_call": statistics.median(y for _, y in per_round)}
    result = {"rounds": rounds, "seconds": seconds, "runs": runs, "medians": medians,
              "on_over_off": ratios, "recording_bytes": size, "inspect": inspect}
    with open(out, "w") as fh:
        json.dump(result, fh, indent=2)
    print("| cell | recording | calls/s | load CPU us/call | server CPU us/call | p50 us | p99 us |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for key, m in medians.items():
        cell, which = key.split()
        print(f"| {cell} | {which} | {m['calls_per_sec']:,.0f} | {m['cpu_per_call_us']:.2f} | "
              f"{m['server_cpu_per_call_us']:.2f} | {m['p50_us']:.0f} | {m['p99_us']:.0f} |")
    for cell, r in ratios.items():
        print(f"{cell}: on/off calls/s {r['calls_per_sec']:.3f}, server CPU per call {r['server_cpu_per_call']:.3f}")
    print(inspect)


if __name__ == "__main__":
    main()
