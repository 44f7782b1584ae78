#!/usr/bin/env python3
"""Two or more builds of the bench module side by side: single runs of one
cell, the builds interleaved (A B, then B A, ...), and for each build and
system the median calls/s and CPU per call (and its client and server
parts) over the rounds, with the round-by-round ratio of each build's
calls/s to the first build's.

usage: ab.py ROUNDS CELL SYSTEMS BENCH_BINARY...
  e.g. (cd bench && go build -o /tmp/bench-new .)   # and /tmp/bench-old from the other commit
       python3 bench/scripts/ab.py 8 1x128-16B rpcd /tmp/bench-old /tmp/bench-new
Each run is `BENCH -cells CELL -systems SYSTEMS -d 2s -runs 1 -json FILE`.
"""
import collections, json, os, statistics, subprocess, sys, tempfile


def run(binary, cell, systems):
    fd, path = tempfile.mkstemp(suffix='.json')
    os.close(fd)
    try:
        p = subprocess.run([binary, '-cells', cell, '-systems', systems, '-d', '2s', '-runs', '1', '-json', path],
                           capture_output=True, text=True)
        if p.returncode != 0:  # a failed run is reported and left out, not the end of the comparison
            print('%s failed (exit %d): %s' % (binary, p.returncode, p.stderr.strip().splitlines()[-1:] or ''), flush=True)
            return {}
        with open(path) as f:
            report = json.load(f)
    finally:
        os.remove(path)
    out = {}
    for c in report['cells']:
        for s in c['systems']:
            if s['runs']:
                r = s['runs'][0]
                out[s['system']] = (r['calls_per_sec'], r['cpu_per_call_us'],
                                    r.get('client_cpu_per_call_us', 0), r.get('server_cpu_per_call_us', 0))
    return out


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    rounds, cell, systems, binaries = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    got = collections.defaultdict(list)  # (binary, system) -> [(calls/s, cpu)] by round
    for r in range(rounds):
        order = binaries if r % 2 == 0 else binaries[::-1]
        for b in order:
            for system, v in run(b, cell, systems).items():
                got[(b, system)].append(v)
                print('round %d  %-24s %-10s %9.0f calls/s  %7.2f us/call (%.2f+%.2f)' % ((r + 1, b, system) + v), flush=True)
    print()
    for system in systems.split(','):
        base = got.get((binaries[0], system))
        for b in binaries:
            v = got.get((b, system))
            if not v:
                continue
            line = '%-24s %-10s median %9.0f calls/s  %7.2f us/call (client %.2f, server %.2f)' % (
                (b, system) + tuple(statistics.median(x[i] for x in v) for i in range(4)))
            if b != binaries[0] and base and len(v) == len(base):
                ratios = [x[0] / y[0] for x, y in zip(v, base)]
                line += '  calls/s over %s by round: median %.3f (%s)' % (
                    os.path.basename(binaries[0]), statistics.median(ratios), ' '.join('%.2f' % x for x in ratios))
            print(line)


if __name__ == '__main__':
    main()
