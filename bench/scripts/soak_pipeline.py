#!/usr/bin/env python3
"""rpcd soak's -pipeline values side by side against one server: `rpcd soak -addr ADDR -c CONNS
-rate RATE -pipeline N -d 10s -warmup 4s -every 2s` for each N, the values interleaved (in order,
then reversed, ...). Per run: the judged windows' median calls/s, p50 and p99, the load's and the
server's CPU a call, the load generator's heap a connection connected and under load, and, over
6 s inside the judged windows, the read and write system calls a call of each side (/proc/PID/io
syscr, syscw) and the TCP segments a call the machine sent (/proc/net/snmp OutSegs).

usage: soak_pipeline.py RPCD ADDR ROUNDS OUT.json [--conns 10000] [--rate 10] [--pipelines 1,2,3,4]
  e.g. rpcd serve -addr 127.0.0.1:7170 -max-conns 20000 &
       python3 bench/scripts/soak_pipeline.py /tmp/rpcd 127.0.0.1:7170 2 OUT.json
"""
import argparse, json, statistics, subprocess, time

ap = argparse.ArgumentParser()
ap.add_argument('rpcd')
ap.add_argument('addr')
ap.add_argument('rounds', type=int)
ap.add_argument('out')
ap.add_argument('--conns', type=int, default=10000)
ap.add_argument('--rate', default='10')
ap.add_argument('--pipelines', default='1,2,3,4')
A = ap.parse_args()
PIPES = A.pipelines.split(',')
PORT = A.addr.rsplit(':', 1)[1]


def server_pid():
    out = subprocess.run(['pgrep', '-f', f'serve -addr .*:{PORT}'], capture_output=True, text=True).stdout.split()
    if not out:
        raise SystemExit(f'soak_pipeline: no rpcd serve on port {PORT}')
    return int(out[0])


def io(pid):
    f = dict(line.split(': ') for line in open(f'/proc/{pid}/io').read().splitlines())
    return int(f['syscr']), int(f['syscw'])


def out_segs():
    rows = [line.split() for line in open('/proc/net/snmp') if line.startswith('Tcp:')]
    return int(rows[1][rows[0].index('OutSegs')])


def run(pipeline):
    sp = server_pid()
    p = subprocess.Popen([A.rpcd, 'soak', '-addr', A.addr, '-c', str(A.conns), '-rate', A.rate, '-d', '10s',
                          '-warmup', '4s', '-every', '2s', '-pipeline', pipeline, '-json'],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    time.sleep(8)  # the dial (about 2 s) and the warm-up
    a = io(sp) + io(p.pid) + (out_segs(),)
    time.sleep(6)
    b = io(sp) + io(p.pid) + (out_segs(),)
    out, _ = p.communicate()
    r = json.loads(out)  # soak exits 1 when a window missed the rate: still a figure
    w = [x for x in r['windows'] if not x['warmup']]
    med = lambda f: statistics.median(f(x) for x in w)
    calls = med(lambda x: x['calls_per_sec']) * 6
    d = [y - x for x, y in zip(a, b)]
    return {'calls_per_sec': med(lambda x: x['calls_per_sec']), 'p50_us': med(lambda x: x['p50_us']),
            'p99_us': med(lambda x: x['p99_us']), 'errors': r['errors'],
            'load_cpu_us': med(lambda x: x['client']['cpu_per_call_us']),
            'server_cpu_us': med(lambda x: x['client'].get('server_cpu_per_call_us', 0)),
            'load_heap_per_conn_bytes': r['client_heap_per_conn_bytes'],
            'load_heap_per_conn_loaded_bytes': r['client_heap_per_conn_loaded_bytes'],
            'server_reads_per_call': round(d[0] / calls, 3), 'server_writes_per_call': round(d[1] / calls, 3),
            'load_reads_per_call': round(d[2] / calls, 3), 'load_writes_per_call': round(d[3] / calls, 3),
            'tcp_segments_per_call': round(d[4] / calls, 3)}


runs = {p: [] for p in PIPES}
for i in range(A.rounds):
    for pl in (PIPES if i % 2 == 0 else PIPES[::-1]):
        v = run(pl)
        runs[pl].append(v)
        print(i + 1, 'pipeline', pl, v, flush=True)
med = {p: {k: statistics.median(x[k] for x in v) for k in v[0]} for p, v in runs.items()}
for p, m in med.items():
    print('median pipeline %s: %.0f calls/s, load %.2f, server %.2f µs/call, p99 %.0f ms, server reads %.2f a call, '
          'load writes %.2f a call, %.2f segments a call, load heap %d B a connection under load' %
          (p, m['calls_per_sec'], m['load_cpu_us'], m['server_cpu_us'], m['p99_us'] / 1e3, m['server_reads_per_call'],
           m['load_writes_per_call'], m['tcp_segments_per_call'], m['load_heap_per_conn_loaded_bytes']))
json.dump({'command': ' '.join(['soak_pipeline.py', A.rpcd, A.addr, str(A.rounds), A.out, '--conns', str(A.conns),
                                '--rate', A.rate, '--pipelines', A.pipelines]),
           'date': time.strftime('%Y-%m-%d'), 'rpcd_version': subprocess.run([A.rpcd, 'version'], capture_output=True,
                                                                            text=True).stdout.strip(),
           'medians': med, 'runs': runs}, open(A.out, 'w'), indent=1)
