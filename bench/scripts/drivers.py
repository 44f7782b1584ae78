#!/usr/bin/env python3
"""rpcd bench's builds side by side against one server: single runs of each cell, the runs
interleaved (in order, then reversed, ...), and for each the median calls/s, load CPU µs per call
and server CPU µs per call over the rounds.

usage: drivers.py ADDR ROUNDS OUT.json [--cells 1x128,100x1,10kx10,10kx5] LABEL=BINARY[:DRIVER][@PIPELINE]...
       drivers.py --ratios OUT.json
  e.g. rpcd serve -addr 127.0.0.1:7170 &
       python3 bench/scripts/drivers.py 127.0.0.1:7170 5 OUT.json \\
           wire=/tmp/rpcd-23d79d1:wire client=/tmp/rpcd
DRIVER is the -driver flag of a build that has one (before the wire driver went, at 23d79d1 and
earlier: wire or client); a build without it takes no DRIVER. PIPELINE is the -pipeline flag of
the label's soaks, for a build that has one: 1 holds each call until the one before is answered,
as rpcd soak did before it had the flag (and the wire driver always did).
Cells: 1x128 and 100x1 closed loop, EchoPacket16, 3 s each after rpcd bench's warm-up (the
default); 10kx10 and 10kx5, rpcd soak's open loop of 10,000 connections at 10 and 5 calls/s each,
10 s after a 3 s warm-up (the server at ADDR must take 10,000 connections: rpcd serve -max-conns),
calls/s the median of the judged windows', CPU a call over them, and the load generator's resident
memory a connection. Every cell gives the load generator's user and system CPU a call apart, from
/proc over 2 s of a bench cell's judged 3 s and 8 s of a soak cell's windows (the user time is
what the drivers' code costs; the system time swings more with the machine).
After the medians it prints, for each pair of labels, the median of the rounds' ratios (calls/s,
load, load user and server CPU a call); --ratios prints them again from a
file it wrote.
"""
import itertools, json, os, statistics, subprocess, sys, time

HZ = os.sysconf('SC_CLK_TCK')


def ratios(raw):
    for cell, byl in raw.items():
        for a, b in itertools.combinations(byl, 2):
            x, y = byl[a], byl[b]
            r = {k: statistics.median(q[k] / p[k] for p, q in zip(x, y))
                 for k in ('calls_per_sec', 'load_cpu_us', 'server_cpu_us', 'load_user_us') if k in x[0]}
            print('ratio  %-6s %s ÷ %s: calls %.3f, load CPU %.3f, server CPU %.3f' %
                  (cell, b, a, r['calls_per_sec'], r['load_cpu_us'], r['server_cpu_us']) +
                  (', load user CPU %.3f' % r['load_user_us'] if 'load_user_us' in r else ''))


if sys.argv[1] == '--ratios':
    ratios(json.load(open(sys.argv[2]))['raw'])
    sys.exit()

ADDR, ROUNDS, OUT = sys.argv[1], int(sys.argv[2]), sys.argv[3]
args = sys.argv[4:]
CELLS = {'1x128': ['-c', '1', '-inflight', '128'], '100x1': ['-c', '100', '-inflight', '1']}
SOAKS = {'10kx10': '10', '10kx5': '5'}
if args[:1] == ['--cells']:
    CELLS = {c: CELLS.get(c) for c in args[1].split(',')}
    args = args[2:]
RUNS = [a.split('=', 1) for a in args]
FIELDS = {'calls_per_sec': 'calls_per_sec', 'load_cpu_us': 'cpu_per_call_us', 'server_cpu_us': 'server_cpu_per_call_us'}
SPLIT = ('load_user_us', 'load_sys_us')


def bench(binary, driver, pipeline, cell):
    if cell in SOAKS:
        return soak(binary, driver, pipeline, SOAKS[cell])
    p = subprocess.Popen([binary, 'bench', '-addr', ADDR, *CELLS[cell], '-scenario', 'EchoPacket16', '-d', '3s',
                          *driver_flag(driver), '-json'], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    # The load's user and system CPU apart, from /proc over 2 s inside the judged 3 s (the dial and
    # the 0.5 s warm-up come first), its calls at the run's rate.
    time.sleep(1.2)
    u0, s0 = proc_cpu(p.pid)
    t0 = time.monotonic()
    time.sleep(2)
    u1, s1 = proc_cpu(p.pid)
    calls = time.monotonic() - t0
    out, _ = p.communicate()
    if p.returncode != 0:
        raise RuntimeError('%s bench %s exited %d' % (binary, ' '.join(driver_flag(driver)), p.returncode))
    r = json.loads(out)
    calls *= r['calls_per_sec']
    return {k: r.get(f) for k, f in FIELDS.items()} | {'errors': r['errors'],
            'load_user_us': round((u1 - u0) * 1e6 / calls, 3), 'load_sys_us': round((s1 - s0) * 1e6 / calls, 3)}


def driver_flag(driver):
    return ['-driver', driver] if driver else []


def proc_cpu(pid):
    """A process's user and system CPU seconds so far (/proc/PID/stat)."""
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return int(f[11]) / HZ, int(f[12]) / HZ


def soak(binary, driver, pipeline, rate):
    p = subprocess.Popen([binary, 'soak', '-addr', ADDR, '-c', '10000', '-rate', rate, '-d', '10s', '-every', '5s',
                          '-warmup', '3s', *driver_flag(driver), *(['-pipeline', pipeline] if pipeline else []),
                          '-json'], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    # The load's user and system CPU apart, from /proc over 8 s inside the judged windows (the
    # dial and the warm-up take about 5 s): the user time is what the drivers' code costs, the
    # system time mostly the kernel's share of the same calls.
    time.sleep(6)
    u0, s0 = proc_cpu(p.pid)
    time.sleep(8)
    u1, s1 = proc_cpu(p.pid)
    out, _ = p.communicate()
    r = json.loads(out)  # soak exits 1 when the rate was not reached: still a figure
    judged = [w['calls_per_sec'] for w in r['windows'] if not w['warmup']]
    calls = statistics.median(judged) * 8
    return {'calls_per_sec': statistics.median(judged), 'load_cpu_us': r['cpu_per_call_us'],
            'server_cpu_us': r['server_cpu_per_call_us'], 'errors': r['errors'],
            'load_user_us': round((u1 - u0) * 1e6 / calls, 3), 'load_sys_us': round((s1 - s0) * 1e6 / calls, 3),
            'load_rss_per_conn_kib': round(r['client_rss_per_conn_bytes'] / 1024, 1)}


runs = {cell: {label: [] for label, _ in RUNS} for cell in CELLS}
for i in range(ROUNDS):
    for cell in CELLS:
        for label, spec in (RUNS if i % 2 == 0 else RUNS[::-1]):
            spec, _, pipeline = spec.partition('@')
            binary, _, driver = spec.partition(':')
            v = bench(binary, driver, pipeline, cell)
            runs[cell][label].append(v)
            print(i + 1, cell, label, v, flush=True)
med = {cell: {label: {k: statistics.median(x[k] for x in v) for k in FIELDS | dict.fromkeys(SPLIT) if k in v[0]}
              for label, v in byl.items()} for cell, byl in runs.items()}
for cell, byl in med.items():
    for label, m in byl.items():
        print('median %-6s %-12s %10.0f calls/s  load %.3f µs/call  server %.3f µs/call' %
              (cell, label, m['calls_per_sec'], m['load_cpu_us'], m['server_cpu_us']) +
              ('  (load user %.3f, system %.3f)' % (m['load_user_us'], m['load_sys_us']) if 'load_user_us' in m else ''))
ratios(runs)
json.dump({'addr': ADDR, 'rounds': ROUNDS, 'runs': dict(RUNS), 'medians': med, 'raw': runs},
          open(OUT, 'w'), indent=1)
