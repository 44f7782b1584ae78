#!/usr/bin/env python3
# The kernel floor of rpcd soak's 10,000 × 10/s scenario: bench/soakfloor/soakfloor.c (an epoll echo
# server and an open-loop client in C, the least a program can do) interleaved with `rpcd soak` and its
# child `rpcd serve`, on loopback, each pair sharing the machine's cores. Per run, over the measured
# window (rpcd: its judged windows): calls/s; each side's CPU µs per call (getrusage; its system time
# holds the loopback's softirq work done in the process); the ksoftirqd threads' CPU (the softirq work
# done outside it); the machine's busy CPU per call; and what other processes used (the machine is
# shared: before each run it waits for a quiet second). Prints a table and the medians; writes every
# run as JSON. Runs per round, the order reversed every other round:
#   c10     C client, pipelined open loop, -rate 10: the floor
#   c10one  C client, -one: at most one call in flight per connection, as rpcd soak
#   rpcd    rpcd soak -c 10000 -rate 10, with its child rpcd serve (its default -pipeline 2: up to 2
#           calls in flight a connection, pipelined as the C client's calls are)
#   rpcd1   the same with -pipeline 1: a call in flight per connection at most, as c10one
#   c5 c20  the C floor at -rate 5 and 20: where it saturates
# and, crossing the C pair with rpcd's sides (soakfloor -rpcd speaks docs/protocol.md's frames), at 10/s:
#   c10rpcd the C client and the C server, both speaking rpcd frames (Bench/EchoPacket Requests, Responses)
#   c_serve the C client, rpcd frames, against `rpcd serve` (started as rpcd soak starts its child);
#           the server's CPU from /proc/PID/stat at the client's window start and end
#   c_serve_one  the same with -one: a call in flight per connection at most, as rpcd soak
#   soak_c  `rpcd soak -addr` against the C server in rpcd mode (it answers Sys/Stats, which soak samples)
# For every process the user/system split of its CPU (getrusage for the C ones, /proc/PID/stat for rpcd's,
# sampled every 0.2 s and cut at soak's judged windows for rpcd soak).
# usage: soak_floor.py RPCD_BINARY [ROUNDS=3] [SECONDS=20] [OUT.json] [--warmup 5] [--conns 10000]
#        [--kinds c10,c10one,rpcd,c5,c20] [--quiet 25] [--tick 0] [--deadline 5000] [--alt RPCD_BINARY2]
# (with --alt, a kind of rpcd's with @alt after it runs the second binary: --kinds c_serve,c_serve@alt
#  compares two servers under the same C client, interleaved)
# (a C run is c<rate>[one]: --kinds c6,c7,c8 finds where the floor saturates;
#  the crossing: --kinds c10,c10rpcd,c_serve,soak_c,rpcd)
import argparse, datetime, hashlib, json, os, queue, signal, statistics, subprocess, sys, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SRC = os.path.join(REPO, 'bench', 'soakfloor', 'soakfloor.c')
FLOOR = '/tmp/soakfloor'
C_KINDS = {'c10': (10, False), 'c10one': (10, True), 'c5': (5, False), 'c20': (20, False)}
# the crossed runs: kind -> (client, server)
CROSS = {'c10rpcd': ('c', 'c'), 'c_serve': ('c', 'rpcd'), 'c_serve_one': ('c', 'rpcd'), 'soak_c': ('soak', 'c')}
# other C runs by name: c<rate>[one], e.g. --kinds c7,c8one
HZ = os.sysconf('SC_CLK_TCK')

ap = argparse.ArgumentParser()
ap.add_argument('rpcd')
ap.add_argument('rounds', nargs='?', type=int, default=3)
ap.add_argument('seconds', nargs='?', type=int, default=20)
ap.add_argument('out', nargs='?', default='')
ap.add_argument('--warmup', type=int, default=5)
ap.add_argument('--conns', type=int, default=10000)
ap.add_argument('--tick', type=int, default=0, help="soakfloor client -tick: µs; 0 wakes at each call's time")
ap.add_argument('--kinds', default='c10,c10one,rpcd,c5,c20')
ap.add_argument('--deadline', type=int, default=5000,
                help="the C client's Requests' deadline field in rpcd mode, ms: rpcd soak sends its -timeout, 5 s")
ap.add_argument('--quiet', type=float, default=25,
                help='before each run wait (up to 90 s) until the machine is at most this %% busy over 1 s')
ap.add_argument('--alt', default='', help='a second rpcd binary, for the kinds with @alt after them')
A = ap.parse_args()
KINDS = A.kinds.split(',')
for k in KINDS:
    if k.endswith('@alt'):
        if not A.alt or k.removesuffix('@alt') not in ('rpcd', 'rpcd1', 'c_serve', 'c_serve_one', 'soak_c'):
            sys.exit(f'soak_floor: {k}: @alt needs --alt and a kind of rpcd\'s')
        continue
    if k not in ('rpcd', 'rpcd1') and k not in C_KINDS and k not in CROSS:
        C_KINDS[k] = (float(k[1:].removesuffix('one')), k.endswith('one'))
KSOFTIRQD = [p for p in os.listdir('/proc') if p.isdigit() and
             open(f'/proc/{p}/comm').read().startswith('ksoftirqd/')]


def sh(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO).stdout.strip()


def cpustat():
    """Machine-wide CPU seconds by state (/proc/stat, all CPUs), the ksoftirqd threads' CPU seconds,
    and the monotonic clock."""
    f = open('/proc/stat').readline().split()[1:]
    d = {n: int(v) / HZ for n, v in zip(['user', 'nice', 'system', 'idle', 'iowait', 'irq', 'softirq', 'steal'], f)}
    d['ksoftirqd'] = sum(sum(int(x) for x in open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[11:13])
                         for p in KSOFTIRQD) / HZ
    d['wall'] = time.monotonic()
    return d


def procstat(pid):
    """A process's CPU seconds so far, all its threads: user and system (/proc/PID/stat utime and
    stime, in clock ticks), or None once it is gone."""
    try:
        f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    u, s = int(f[11]) / HZ, int(f[12]) / HZ
    return {'cpu_user_sec': u, 'cpu_sys_sec': s, 'cpu_sec': round(u + s, 2)}


def split(a, b, calls):
    """User and system µs per call between two procstat()s."""
    if not a or not b:
        return None, None
    return (round((b['cpu_user_sec'] - a['cpu_user_sec']) * 1e6 / calls, 3),
            round((b['cpu_sys_sec'] - a['cpu_sys_sec']) * 1e6 / calls, 3))


def busy(a, b):
    """Between two cpustat()s: the machine's busy CPU seconds, the seconds it had (its CPUs times the
    wall time), and the deltas by state. Busy is the time the CPUs were not idle: the busy states are
    sampled at the tick and miss short bursts. Sound when the machine is saturated (idle near 0); on
    this VM a half-idle machine's idle time is not: processes' getrusage then exceeds the busy time by
    up to a tenth of the machine, and halts show up as steal (counted busy here, for that reason)."""
    d = {k: round(b[k] - a[k], 3) for k in a if k != 'procs'}
    had = d.pop('wall') * os.cpu_count()
    return had - d['idle'] - d['iowait'], had, d


def quiet_gate():
    """Waits until the machine is quiet; returns the busy % of the last 1 s sample and the seconds waited."""
    began = time.time()
    while True:
        a = cpustat(); time.sleep(1); b = cpustat()
        used, had, _ = busy(a, b)
        if 100 * used / had <= A.quiet or time.time() - began > 90:
            return round(100 * used / had, 1), round(time.time() - began, 1)


class Lines:
    """Reads a stream's lines into a queue on a thread, each with the monotonic time it came."""
    def __init__(self, f):
        self.q = queue.Queue()
        threading.Thread(target=self._pump, args=(f,), daemon=True).start()

    def _pump(self, f):
        for line in f:
            self.q.put((time.monotonic(), line.rstrip('\n')))
        self.q.put((time.monotonic(), None))

    def get(self, timeout):
        return self.q.get(timeout=timeout)[1]


class Sampler:
    """cpustat() every 0.2 s on a thread, to cut a span out of a run afterwards; with it, procstat() of
    each process in self.pids (name -> pid; a run adds them as it learns them)."""
    def __init__(self):
        self.samples, self.done, self.pids = [], threading.Event(), {}
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.done.is_set():
            d = cpustat()
            d['procs'] = {n: procstat(pid) for n, pid in list(self.pids.items())}
            self.samples.append(d)
            self.done.wait(0.2)

    def stop(self):
        self.done.set(); self.t.join()

    def at(self, t):
        return min(self.samples, key=lambda s: abs(s['wall'] - t))

    def proc_at(self, t, name):
        """procstat() of process name in the sample nearest t that has it (one may end just after
        the span), and that sample's time."""
        have = [s for s in self.samples if s['procs'].get(name)]
        if not have:
            return None, None
        s = min(have, key=lambda s: abs(s['wall'] - t))
        return s['procs'][name], s['wall']


def stop(p, sig=signal.SIGTERM):
    if p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill(); p.wait()


def machine(v, a, b, calls, ours):
    """Adds the machine's figures over the span a..b to v: ours is the pair's CPU seconds in it."""
    used, had, d = busy(a, b)
    v.update({
        'machine_busy_pct': round(100 * used / had, 1), 'ksoftirqd_pct': round(100 * d['ksoftirqd'] / had, 1),
        'others_cpu_pct': round(100 * (used - ours - d['ksoftirqd']) / had, 1),
        'pair_and_ksoftirqd_per_call_us': round((ours + d['ksoftirqd']) * 1e6 / calls, 3),
        'machine_cpu_per_call_us': round(used * 1e6 / calls, 3), 'machine_cpu_sec': d,
    })
    return v


def rpcd_serve(binary):
    """Starts `rpcd serve` as rpcd soak starts its child (its flags, -max-conns -c + 16); returns the
    process, its command, the Lines of its standard error and its port."""
    cmd = [binary, 'serve', '-log-format', 'text', '-addr', '127.0.0.1:0', '-max-conns', str(A.conns + 16)]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = Lines(p.stderr)
    try:
        while True:
            line = lines.get(10)
            if line is None:
                raise RuntimeError('rpcd serve ended before serving')
            if 'rpcd: serving' in line:
                return p, cmd, lines, int(line.split(' addr=', 1)[1].split()[0].rsplit(':', 1)[1])
    except BaseException:
        stop(p)
        raise


def run_c(rate, one, proto='echo', server='c', binary=''):
    """The C client against the C server (server 'c') or rpcd serve ('rpcd', binary's); proto 'rpcd' has
    both C sides speak rpcd frames."""
    rpcd_mode = ['-rpcd'] if proto == 'rpcd' else []
    srv_lines = None
    if server == 'c':
        srv_cmd = [FLOOR, 'server', '-port', '0', '-threads', '2'] + rpcd_mode
        srv = subprocess.Popen(srv_cmd, stdout=subprocess.PIPE, text=True)
    else:
        srv, srv_cmd, srv_lines, port = rpcd_serve(binary)
    cl = None
    try:
        if server == 'c':
            sl = Lines(srv.stdout)
            port = int(sl.get(10).split()[1])
        cl_cmd = [FLOOR, 'client', '-addr', f'127.0.0.1:{port}', '-c', str(A.conns), '-rate', str(rate),
                  '-d', str(A.seconds), '-warmup', str(A.warmup), '-size', '16', '-threads', '2',
                  '-tick', str(A.tick)] + (['-one'] if one else []) + (
                  rpcd_mode + ['-deadline', str(A.deadline), '-drain', '10'] if rpcd_mode else [])
        cl = subprocess.Popen(cl_cmd, stdout=subprocess.PIPE, text=True)
        ll = Lines(cl.stdout)
        deadline = time.time() + A.warmup + A.seconds + 120
        per_sec, snaps, stats, rep = [], [], [], None
        while rep is None:
            line = ll.get(max(deadline - time.time(), 1))
            if line is None:
                raise RuntimeError('soakfloor client ended without a report')
            if line in ('window start', 'window end'):  # the server's counters and the machine's, at once
                stats.append(cpustat())
                if server == 'c':
                    srv.send_signal(signal.SIGUSR1)
                    snaps.append(json.loads(sl.get(10)))
                else:
                    snaps.append(procstat(srv.pid))
            elif line.startswith('sec '):
                per_sec.append(int(line.split()[3]))
            elif line.startswith('{'):
                rep = json.loads(line)
        cl.wait(timeout=30)
    finally:
        if cl is not None:
            stop(cl, signal.SIGKILL)
        stop(srv)
    s0, s1 = snaps
    calls = rep['calls']
    srv_cpu = s1['cpu_sec'] - s0['cpu_sec']
    v = {
        'calls_per_sec': rep['calls_per_sec'], 'asked_per_sec': rep['asked_per_sec'],
        'client_cpu_per_call_us': rep['cpu_per_call_us'],
        'server_cpu_per_call_us': round(srv_cpu * 1e6 / calls, 3),
        'client_user_per_call_us': rep['user_per_call_us'], 'client_sys_per_call_us': rep['sys_per_call_us'],
        'server_user_per_call_us': round((s1['cpu_user_sec'] - s0['cpu_user_sec']) * 1e6 / calls, 3),
        'server_sys_per_call_us': round((s1['cpu_sys_sec'] - s0['cpu_sys_sec']) * 1e6 / calls, 3),
        'p50_us': rep['p50_us'], 'p99_us': rep['p99_us'],
    }
    machine(v, stats[0], stats[1], calls, rep['cpu_user_sec'] + rep['cpu_sys_sec'] + srv_cpu)
    v.update({
        'calls_per_sec_by_second': per_sec, 'client': rep,
        'server_window': {k: s1[k] - s0[k] for k in ('cpu_user_sec', 'cpu_sys_sec', 'cpu_sec', 'echoes', 'reads',
                                                     'writes', 'vol_ctx_switches', 'invol_ctx_switches') if k in s1},
        'commands': [' '.join(srv_cmd), ' '.join(cl_cmd)],
    })
    if proto == 'rpcd':
        v['errors'] = rep['errors'] + rep['bad_replies']
    if server == 'c':
        v['server_last'] = s1
    else:
        v['server_cpu_source'] = '/proc/PID/stat utime, stime (clock ticks of 1/%d s) at window start and end' % HZ
        v['server_stderr'] = [x for _, x in _drain(srv_lines, 5)]
    return v


def run_rpcd(server='rpcd', binary='', flags=()):
    """rpcd soak, against its own child rpcd serve (server 'rpcd') or, with -addr, the C server in rpcd
    mode ('c'), with flags added."""
    every = 5 if A.seconds % 5 == 0 and A.warmup % 5 == 0 else 1
    cmd = [binary, 'soak', '-c', str(A.conns), '-rate', '10', '-d', f'{A.seconds}s', '-warmup', f'{A.warmup}s',
           '-every', f'{every}s', *flags, '-json']
    smp, srv, srv_cmd, srv_last = Sampler(), None, None, None
    if server == 'c':
        srv_cmd = [FLOOR, 'server', '-port', '0', '-threads', '2', '-rpcd']
        srv = subprocess.Popen(srv_cmd, stdout=subprocess.PIPE, text=True)
        sl = Lines(srv.stdout)
        cmd += ['-addr', f'127.0.0.1:{int(sl.get(10).split()[1])}']
        smp.pids['server'] = srv.pid
    p, first = None, []
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        smp.pids['client'] = p.pid
        out, err = Lines(p.stdout), Lines(p.stderr)
        if server == 'rpcd':  # its first line names its child: "..., server child process pid N at ..."
            first.append(err.q.get(timeout=30))
            if first[0][1] and 'child process pid ' in first[0][1]:
                smp.pids['server'] = int(first[0][1].split('child process pid ', 1)[1].split()[0])
        p.wait(timeout=A.warmup + A.seconds + 180)
    finally:
        if p is not None:
            stop(p, signal.SIGKILL)
        smp.stop()
        if srv is not None:
            stop(srv)
            for x in _drain(sl, 10):
                if x[1].startswith('{'):
                    srv_last = json.loads(x[1])
    stdout, stderr = _drain(out), first + _drain(err)
    r = json.loads('\n'.join(x for _, x in stdout))
    # Its windows' end_sec count from the load's start, just after it prints "... connections in ...".
    t_load = next(t for t, x in stderr if ' connections in ' in x)
    judged = [w for w in r['windows'] if not w['warmup']]
    warm = [w['end_sec'] for w in r['windows'] if w['warmup']]
    calls = sum(w['calls'] for w in judged)
    secs = sum(w['calls'] / w['calls_per_sec'] for w in judged if w['calls_per_sec'] > 0)
    v = {
        'calls_per_sec': round(calls / secs, 1), 'asked_per_sec': A.conns * 10.0,
        'client_cpu_per_call_us': r['cpu_per_call_us'], 'server_cpu_per_call_us': r.get('server_cpu_per_call_us'),
        'p50_us': statistics.median(w['p50_us'] for w in judged), 'p99_us': r['p99_us'],
    }
    ours = (r['cpu_per_call_us'] + r.get('server_cpu_per_call_us', 0)) * calls / 1e6
    a, b = smp.at(t_load + (warm[-1] if warm else 0)), smp.at(t_load + judged[-1]['end_sec'])
    machine(v, a, b, calls, ours)
    # The user/system split from /proc/PID/stat over the same span (0.2 s samples; the totals above are
    # soak's own: its getrusage and the server's Sys/Stats cpu_sec at its windows' bounds).
    for side in ('client', 'server'):
        (pa, ta), (pb, tb) = smp.proc_at(a['wall'], side), smp.proc_at(b['wall'], side)
        v[f'{side}_user_per_call_us'], v[f'{side}_sys_per_call_us'] = split(pa, pb, calls)
        v[f'{side}_proc_cpu_per_call_us'] = (round((pb['cpu_sec'] - pa['cpu_sec']) * 1e6 / calls, 3)
                                             if pa and pb else None)
        v[f'{side}_proc_span_sec'] = round(tb - ta, 2) if pa and pb else None
    v.update({'calls_per_sec_by_window': [w['calls_per_sec'] for w in r['windows']], 'exit_code': p.returncode,
              'errors': r['errors'], 'driver': r.get('driver'), 'dial_sec': r.get('dial_sec'), 'command': ' '.join(cmd),
              'span_sec': round(b['wall'] - a['wall'], 2), 'stderr': [x for _, x in stderr],
              'rate_reached': r.get('rate_reached'), 'flat': r.get('flat'), 'growth': r.get('growth'),
              'server_stats_first_last': [r['windows'][0].get('server'), r['windows'][-1].get('server')]})
    if srv_cmd:
        v['commands'] = [' '.join(srv_cmd), ' '.join(cmd)]
        v['server_last'] = srv_last
    return v


def _drain(l, timeout=30):
    """The lines l read, with their times, once its stream has ended."""
    got = []
    while True:
        t, x = l.q.get(timeout=timeout)
        if x is None:
            return got
        got.append((t, x))


def main():
    subprocess.run(['gcc', '-O2', '-Wall', '-pthread', '-o', FLOOR, SRC], check=True)
    runs = {k: [] for k in KINDS}
    for i in range(A.rounds):
        for k in (KINDS if i % 2 == 0 else KINDS[::-1]):
            pct, waited = quiet_gate()
            base, binary = k.removesuffix('@alt'), A.alt if k.endswith('@alt') else A.rpcd
            if base == 'rpcd':
                v = run_rpcd(binary=binary)
            elif base == 'rpcd1':
                v = run_rpcd(binary=binary, flags=('-pipeline', '1'))
            elif base == 'soak_c':
                v = run_rpcd(server='c', binary=binary)
            elif base in CROSS:
                v = run_c(10, base.endswith('_one'), proto='rpcd', server=CROSS[base][1], binary=binary)
            else:
                v = run_c(*C_KINDS[k])
            v['round'], v['busy_before_pct'], v['waited_quiet_sec'] = i + 1, pct, waited
            runs[k].append(v)
            print(f"{i + 1} {k:8s} {v['calls_per_sec']:7.0f} calls/s  µs/call: client {v['client_cpu_per_call_us']:5.2f}"
                  f"  server {v['server_cpu_per_call_us'] or 0:5.2f}  +ksoftirqd {v['pair_and_ksoftirqd_per_call_us']:5.2f}"
                  f"  machine {v['machine_cpu_per_call_us']:5.2f};  p99 {v['p99_us'] / 1e3:8.1f} ms;  machine "
                  f"{v['machine_busy_pct']:5.1f}% busy, ksoftirqd {v['ksoftirqd_pct']}%, others {v['others_cpu_pct']}%"
                  f" (before: {pct}%)", flush=True)
    fields = ('calls_per_sec', 'client_cpu_per_call_us', 'server_cpu_per_call_us', 'pair_and_ksoftirqd_per_call_us',
              'machine_cpu_per_call_us', 'p99_us', 'machine_busy_pct', 'ksoftirqd_pct', 'others_cpu_pct')
    med = {k: {f: statistics.median(x[f] for x in v if x.get(f) is not None) for f in fields} for k, v in runs.items() if v}
    for k, m in med.items():
        for f in ('client_user_per_call_us', 'client_sys_per_call_us', 'server_user_per_call_us', 'server_sys_per_call_us',
                  'client_proc_cpu_per_call_us', 'server_proc_cpu_per_call_us'):
            if all(x.get(f) is not None for x in runs[k]):
                m[f] = statistics.median(x[f] for x in runs[k])
        if any('errors' in x for x in runs[k]):
            m['errors'] = sum(x.get('errors', 0) for x in runs[k])
        m['fraction_of_asked'] = round(m['calls_per_sec'] / (A.conns * (C_KINDS[k][0] if k in C_KINDS else 10)), 3)
        m['cpu_per_call_us'] = round(m['client_cpu_per_call_us'] + (m['server_cpu_per_call_us'] or 0), 3)
    print('\nmedians over %d rounds (%d connections, %d s after %d s warm-up); CPU in µs per call:'
          % (A.rounds, A.conns, A.seconds, A.warmup))
    print('%-8s %8s %8s %7s %7s %7s %10s %8s %7s %10s' % ('run', 'calls/s', 'of asked', 'client', 'server', 'both',
          '+ksoftirqd', 'machine', 'others', 'p99 ms'))
    for k, m in med.items():
        print('%-8s %8.0f %8.3f %7.2f %7.2f %7.2f %10.2f %8.2f %6.1f%% %10.1f' % (
            k, m['calls_per_sec'], m['fraction_of_asked'], m['client_cpu_per_call_us'], m['server_cpu_per_call_us'] or 0,
            m['cpu_per_call_us'], m['pair_and_ksoftirqd_per_call_us'], m['machine_cpu_per_call_us'],
            m['others_cpu_pct'], m['p99_us'] / 1e3))
    if A.out:
        out = {
            'what': 'soak floor: bench/soakfloor (C epoll echo server + open-loop C client) beside rpcd soak, '
                    '%d connections, 16-byte payloads, loopback, both sides on the same cores' % A.conns + (
                    '; crossed: the C client (rpcd frames) against rpcd serve, rpcd soak -addr against the C server '
                    '(rpcd frames)' if any(k in CROSS for k in KINDS) else ''),
            'command': ' '.join([sys.executable] + sys.argv),
            'date': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
            'uname_r': os.uname().release, 'nproc': os.cpu_count(), 'git_revision': sh('git', 'rev-parse', 'HEAD'),
            'git_dirty_paths': sh('git', 'status', '--porcelain').splitlines(),
            'gcc': sh('gcc', '--version').splitlines()[0], 'rpcd_binary': A.rpcd, 'rpcd_version': sh(A.rpcd, 'version'),
            'alt_binary': A.alt, 'alt_sha256': hashlib.sha256(open(A.alt, 'rb').read()).hexdigest() if A.alt else '',
            'rpcd_sha256': hashlib.sha256(open(A.rpcd, 'rb').read()).hexdigest(),
            'rounds': A.rounds, 'seconds': A.seconds, 'warmup': A.warmup, 'conns': A.conns, 'tick_us': A.tick,
            'kinds': {k: d for k, d in ({k: 'C floor, %s, %g/s' % ('one in flight' if v[1] else 'pipelined', v[0])
                                          for k, v in C_KINDS.items()} | {
                'c10': 'C floor, pipelined open loop, 10/s per connection',
                'c10one': 'C floor, one call in flight per connection (a late call goes on the reply), 10/s',
                'rpcd': 'rpcd soak with its child rpcd serve, 10/s, its default -pipeline (2 calls in flight a connection at most)',
                'rpcd1': 'rpcd soak -pipeline 1 (one call in flight a connection) with its child rpcd serve, 10/s',
                'c5': 'C floor, pipelined, 5/s', 'c20': 'C floor, pipelined, 20/s',
                'c10rpcd': 'C client and C server, both speaking rpcd frames (soakfloor -rpcd), pipelined, 10/s',
                'c_serve': 'C client speaking rpcd frames (soakfloor client -rpcd), pipelined, against rpcd serve, 10/s',
                'soak_c': 'rpcd soak -addr against the C server speaking rpcd frames (soakfloor server -rpcd), 10/s',
            }).items() if k in KINDS},
            'notes': 'client/server CPU per call: getrusage of each process over the measured window (C) or '
                     'rpcd soak\'s judged windows, over the calls answered in it. pair_and_ksoftirqd adds the '
                     'ksoftirqd threads\' CPU; machine_cpu_per_call_us is the machine\'s busy CPU (2 CPUs minus '
                     'idle and iowait, from /proc/stat) over the calls, others included; others_cpu_pct is '
                     'what neither the pair nor ksoftirqd used. The machine figures hold when the machine is '
                     'saturated (idle near 0); below that, this VM\'s idle accounting is off by up to a tenth '
                     'of the machine (others_cpu_pct goes negative). For rpcd they are cut from 0.2 s samples '
                     'at its judged windows\' bounds. Crossed runs: c_serve\'s server CPU (rpcd serve) is '
                     '/proc/PID/stat utime+stime read when the C client prints its window start and end (clock '
                     'ticks); soak_c\'s server CPU is what rpcd soak reports from the C server\'s Sys/Stats cpu_sec '
                     '(its getrusage). For rpcd soak\'s runs (rpcd, soak_c), *_user/sys_per_call_us split each '
                     'side by /proc/PID/stat sampled every 0.2 s and cut at the judged windows\' bounds '
                     '(*_proc_cpu_per_call_us is their sum, to set beside soak\'s own totals). The C client in '
                     'rpcd mode sends deadline %d ms, as rpcd soak does (its -timeout).' % A.deadline,
            'runs': runs, 'medians': med,
        }
        with open(A.out, 'w') as f:
            json.dump(out, f, indent=1)
        print('wrote', A.out)


if __name__ == '__main__':
    main()
