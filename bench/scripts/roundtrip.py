#!/usr/bin/env python3
"""The phases of a 1 MiB echo's round trips, from the system calls of both
sides: the client's writev, the server reading the request, the server's
handler (from its last read to its write), the server's write, the client
reading the reply, and the client's time from there to its next writev (the
bench's check of the echo); medians over the round trips of a short trace.

usage: roundtrip.py BENCH_BINARY SYSTEM
  e.g. (cd bench && go build -o /tmp/bench .) && python3 bench/scripts/roundtrip.py /tmp/bench rpcd
It runs `BENCH -cells 1x1-1MiB -systems SYSTEM -d 5s -runs 1` and traces both
processes for 0.4 s in the middle with `perf trace -T` (linux-perf, as root).
"""
import os, re, statistics, subprocess, sys, tempfile, time


def parse(path, server_tids):
    events = []  # (start, end, side, call, result)
    done = re.compile(r'\s*([\d.]+) \(\s*([\d.]+) ms\): \S+/(\d+) (\w+)\(.*\)\s+=\s+(-?\d+)')
    resumed = re.compile(r'\s*([\d.]+) \(\s*([\d.]+) ms\): \S+/(\d+)\s+\.\.\. \[continued\]: (\w+)\(\)\s+=\s+(-?\d+)')
    with open(path) as f:
        for line in f:
            m = done.match(line) or resumed.match(line)
            if m:
                t, d, tid, call, ret = m.groups()
                t, d = float(t), float(d)
                events.append((t, t + d, 'server' if tid in server_tids else 'client', call, int(ret)))
    events.sort()
    return events


def phases(events):
    big = [e for e in events if e[3] in ('write', 'writev') and e[4] > 512 << 10]
    cw = [e for e in big if e[2] == 'client']
    sw = [e for e in big if e[2] == 'server']
    out = {k: [] for k in ('client writev', 'server reads', 'server handler', 'server write',
                           'client reads', 'client to next writev', 'round trip', 'server read calls')}
    for a, b in zip(cw, cw[1:]):
        s = [e for e in sw if a[0] < e[0] < b[0]]
        if len(s) != 1:
            continue
        s = s[0]
        sreads = [e for e in events if e[2] == 'server' and e[3] == 'read' and e[4] > 0 and a[0] < e[0] < s[0]]
        creads = [e for e in events if e[2] == 'client' and e[3] == 'read' and e[4] > 0 and s[0] < e[0] < b[0]]
        if not sreads or not creads:
            continue
        for k, v in (('client writev', a[1] - a[0]), ('server reads', sreads[-1][1] - sreads[0][0]),
                     ('server handler', s[0] - sreads[-1][1]), ('server write', s[1] - s[0]),
                     ('client reads', creads[-1][1] - creads[0][0]), ('client to next writev', b[0] - creads[-1][1]),
                     ('round trip', b[0] - a[0])):
            out[k].append(v * 1000)  # ms to µs
        out['server read calls'].append(len(sreads))
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, system = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.Popen([binary, '-cells', '1x1-1MiB', '-systems', system, '-d', '5s', '-runs', '1'],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(2.5)  # the server child is up and the measurement under way
        server = subprocess.run(['pgrep', '-P', str(run.pid)], capture_output=True, text=True).stdout.split()[0]
        tids = set(os.listdir('/proc/%s/task' % server))
        trace = os.path.join(tmp, 'trace')
        subprocess.run(['timeout', '0.4', 'perf', 'trace', '-T', '-p', '%d,%s' % (run.pid, server),
                        '-e', 'read,write,writev,epoll_pwait,futex', '-o', trace], capture_output=True)
        report = run.communicate()[0]
        out = phases(parse(trace, tids))
    for line in report.splitlines():
        if 'run 1/1' in line:
            print(line.strip())
    for k, v in out.items():
        if v:
            print('%-22s median %8.1f  (%d round trips)' % (k + ':', statistics.median(v), len(v)))


if __name__ == '__main__':
    main()
