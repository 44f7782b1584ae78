#!/usr/bin/env python3
"""rpcd over TLS (the standard library transport) beside rpcd over plain TCP
(the gnet event loops): the same `rpcd bench` cells against two `rpcd serve`
processes, interleaved, medians of 3 runs, with each server's CPU time per
call read from /proc.

usage: go build -o /tmp/rpcd ./cmd/rpcd && python3 bench/scripts/tls_vs_plain.py /tmp/rpcd
It needs openssl, to make a throwaway CA and server certificate.
"""
import json, os, statistics, subprocess, sys, tempfile

RPCD = sys.argv[1] if len(sys.argv) > 1 else 'rpcd'
D, WARMUP = 3.0, 0.5  # seconds measured and warmed up per cell

def certs(dir):
    def run(*a):
        subprocess.run(a, cwd=dir, check=True, capture_output=True)
    run('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
        '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=rpcd-bench-ca')
    run('openssl', 'req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
        '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1')
    with open(os.path.join(dir, 'ext'), 'w') as f:
        f.write('subjectAltName=IP:127.0.0.1\n')
    run('openssl', 'x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key',
        '-CAcreateserial', '-out', 'server.pem', '-days', '1', '-extfile', 'ext')

def serve(args):
    p = subprocess.Popen([RPCD, 'serve', '-addr', '127.0.0.1:0'] + args, stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        if 'rpcd: serving' in line:
            addr = [w.split('=', 1)[1] for w in line.split() if w.startswith('addr=')][0]
            return p, addr
    sys.exit('rpcd serve did not start')

def cpu(pid):
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')

def main():
    tmp = tempfile.mkdtemp()
    certs(tmp)
    plain, plain_addr = serve([])
    tls, tls_addr = serve(['-tls-cert', f'{tmp}/server.pem', '-tls-key', f'{tmp}/server.key'])
    systems = [('plain', plain, ['-addr', plain_addr]),
               ('tls', tls, ['-addr', tls_addr, '-tls-ca', f'{tmp}/ca.pem'])]
    cells = [('1x1', ['-c', '1', '-inflight', '1']), ('4x32', ['-c', '4', '-inflight', '32']),
             ('100x1', ['-c', '100', '-inflight', '1'])]
    res = {}
    try:
        for run in range(3):
            for cell, cargs in cells:
                order = systems if run % 2 == 0 else systems[::-1]
                for name, srv, sargs in order:
                    before = cpu(srv.pid)
                    out = subprocess.run([RPCD, 'bench', '-scenario', 'EchoPacket16', '-d', f'{D}s',
                                          '-warmup', f'{WARMUP}s', '-json'] + cargs + sargs,
                                         capture_output=True, text=True, check=True)
                    used = cpu(srv.pid) - before
                    j = json.loads(out.stdout)
                    calls = j['calls'] * (D + WARMUP) / D  # the warm-up's calls, at the same rate
                    res.setdefault((cell, name), []).append(
                        (j['calls_per_sec'], j['cpu_per_call_us'], used * 1e6 / calls, j['p99_us']))
    finally:
        plain.terminate()
        tls.terminate()
    print(f"{'cell':6} {'server':6} {'calls/s':>9} {'x plain':>7} {'client µs/call':>14} {'server µs/call':>14} {'p99 µs':>8}")
    for cell, _ in cells:
        base = statistics.median(r[0] for r in res[(cell, 'plain')])
        for name, _, _ in systems:
            r = res[(cell, name)]
            cps = statistics.median(x[0] for x in r)
            print(f"{cell:6} {name:6} {cps:9.0f} {cps / base:7.2f} {statistics.median(x[1] for x in r):14.1f} "
                  f"{statistics.median(x[2] for x in r):14.1f} {statistics.median(x[3] for x in r):8.0f}")

main()
