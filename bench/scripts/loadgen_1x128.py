#!/usr/bin/env python3
# rpcd bench (its child rpcd serve) interleaved with the bench module's rpcd,
# net/rpc and grpc-go in the 1x128-16B cell: medians, and the per-round ratios to net/rpc and grpc-go.
# usage: loadgen_1x128.py RPCD_BINARY BENCH_BINARY ROUNDS OUT.json
import json, subprocess, sys, tempfile, os, statistics
RPCD, BENCH, ROUNDS, OUT = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def rpcd_bench():
    p = subprocess.run([RPCD, 'bench', '-c', '1', '-inflight', '128', '-scenario', 'EchoPacket16', '-d', '3s',
                        '-json'], capture_output=True, text=True, check=True)
    r = json.loads(p.stdout)
    return {'calls_per_sec': r['calls_per_sec'], 'client_cpu_us': r['cpu_per_call_us'],
            'server_cpu_us': r.get('server_cpu_per_call_us'), 'p99_us': r['p99_us'], 'errors': r['errors']}
def module(system):
    fd, path = tempfile.mkstemp(suffix='.json'); os.close(fd)
    subprocess.run([BENCH, '-cells', '1x128-16B', '-systems', system, '-d', '3s', '-runs', '1', '-json', path],
                   capture_output=True, text=True, check=True)
    rep = json.load(open(path)); os.remove(path)
    r = rep['cells'][0]['systems'][0]['runs'][0]
    return {'calls_per_sec': r['calls_per_sec'], 'client_cpu_us': r.get('client_cpu_per_call_us'),
            'server_cpu_us': r.get('server_cpu_per_call_us')}
runs = {k: [] for k in ('rpcd-bench', 'module-rpcd', 'module-netrpc', 'module-grpc')}
order = list(runs)
for i in range(ROUNDS):
    for k in (order if i % 2 == 0 else order[::-1]):
        v = rpcd_bench() if k == 'rpcd-bench' else module(k.split('-')[1])
        runs[k].append(v)
        print(i + 1, k, v, flush=True)
med = {k: {f: statistics.median(x[f] for x in v) for f in ('calls_per_sec', 'client_cpu_us', 'server_cpu_us')} for k, v in runs.items()}
ratios = {}
for base in ('module-netrpc', 'module-grpc'):
    for k in ('rpcd-bench', 'module-rpcd'):
        ratios[k + '/' + base] = statistics.median(a['calls_per_sec'] / b['calls_per_sec'] for a, b in zip(runs[k], runs[base]))
print(json.dumps({'medians': med, 'ratios_by_round_median': ratios}, indent=1))
json.dump({'command': ' '.join(sys.argv), 'cell': '1x128-16B', 'rounds': ROUNDS, 'runs': runs, 'medians': med,
           'ratios_by_round_median': ratios}, open(OUT, 'w'), indent=1)
