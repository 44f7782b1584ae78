#!/usr/bin/env python3
"""rpcd serve with a loop per P against one loop fewer, side by side: for each round, the two
servers in turn (the order alternating), each loaded by `rpcd bench` in every cell, then the median
calls/s, load and server CPU µs per call by cell and loop count, and the median of the rounds'
ratios, one loop fewer ÷ a loop per P.

usage: loops.py RPCD ROUNDS OUT.json [--cells 1x1,1x128,100x1 | --matrix seed] [--loops 2,1]
  e.g. python3 bench/scripts/loops.py /tmp/rpcd 5 OUT.json
Each run is `RPCD bench -addr ADDR -c C -inflight I -scenario EchoPacket16 -d 3s -json` against
`RPCD serve -addr 127.0.0.1:7191 -loops L`; with --matrix, `RPCD bench -addr ADDR -matrix NAME -json`
(its cells 2 s each), a cell named scenario@connections. The soak's side: `rpcd soak -addr ADDR -c
10000 -rate 10 -d 15s -json` against each server the same way.
"""
import argparse, json, statistics, subprocess, time

CELLS = {'1x1': ['-c', '1', '-inflight', '1'], '1x128': ['-c', '1', '-inflight', '128'],
         '100x1': ['-c', '100', '-inflight', '1']}
ap = argparse.ArgumentParser()
ap.add_argument('rpcd')
ap.add_argument('rounds', type=int)
ap.add_argument('out')
ap.add_argument('--cells', default='1x1,1x128,100x1')
ap.add_argument('--loops', default='2,1')
ap.add_argument('--matrix', default='')
A = ap.parse_args()
cells = A.cells.split(',')
loops = [int(x) for x in A.loops.split(',')]
addr = '127.0.0.1:7191'

runs = []
for i in range(A.rounds):
    for n in (loops if i % 2 == 0 else loops[::-1]):
        srv = subprocess.Popen([A.rpcd, 'serve', '-addr', addr, '-loops', str(n)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.8)
            if A.matrix:
                p = subprocess.run([A.rpcd, 'bench', '-addr', addr, '-matrix', A.matrix, '-json'],
                                   capture_output=True, text=True, check=True)
                reports = [('%s@%d' % (r['settings']['scenario'], r['settings']['connections']), r)
                           for r in json.loads(p.stdout)]
            else:
                reports = []
                for cell in cells:
                    p = subprocess.run([A.rpcd, 'bench', '-addr', addr, *CELLS[cell], '-scenario', 'EchoPacket16',
                                        '-d', '3s', '-json'], capture_output=True, text=True, check=True)
                    reports.append((cell, json.loads(p.stdout)))
            for cell, r in reports:
                v = {'round': i + 1, 'loops': n, 'cell': cell, 'calls_per_sec': r['calls_per_sec'],
                     'load_cpu_us': r['cpu_per_call_us'], 'server_cpu_us': r['server_cpu_per_call_us']}
                runs.append(v)
                print(v, flush=True)
        finally:
            srv.terminate()
            srv.wait()

with open(A.out, 'w') as f:
    json.dump({'command': 'bench/scripts/loops.py ' + ' '.join(f'{k}={v}' for k, v in vars(A).items()), 'runs': runs}, f, indent=1)
med = statistics.median
if A.matrix:
    cells = list(dict.fromkeys(x['cell'] for x in runs))
ratios = []
for cell in cells:
    by = {n: [x for x in runs if x['cell'] == cell and x['loops'] == n] for n in loops}
    for n in loops:
        r = by[n]
        print('%-6s loops %d  %9.0f calls/s  load %.3f µs/call  server %.3f µs/call' % (
            cell, n, med(x['calls_per_sec'] for x in r), med(x['load_cpu_us'] for x in r), med(x['server_cpu_us'] for x in r)))
    a, b = by[loops[0]], by[loops[1]]
    rc = med(y['calls_per_sec'] / x['calls_per_sec'] for x, y in zip(a, b))
    rs = med(y['server_cpu_us'] / x['server_cpu_us'] for x, y in zip(a, b))
    ratios.append((rc, rs))
    print('%-6s loops %d ÷ %d: calls %.3f, server CPU %.3f' % (cell, loops[1], loops[0], rc, rs))
if len(ratios) > 1:
    print('geometric mean over %d cells: calls %.3f, server CPU %.3f' % (
        len(ratios), statistics.geometric_mean(r for r, _ in ratios), statistics.geometric_mean(s for _, s in ratios)))
