// soakfloor: the kernel floor of rpcd soak's default scenario (many
// loopback TCP connections, each making -rate small request/response calls
// a second, open loop). Both sides are the least a program can do: epoll,
// one read and one write per event, no framing, no allocation per call, so
// what they cost is mostly the kernel's TCP and epoll work. Compare their
// calls/s and CPU per call with `rpcd soak` on the same machine
// (bench/scripts/soak_floor.py runs the two interleaved).
//
//   gcc -O2 -Wall -pthread -o /tmp/soakfloor bench/soakfloor/soakfloor.c
//   soakfloor server -port 0 [-threads 2] [-size 16]
//   soakfloor client -addr 127.0.0.1:P -c 10000 -rate 10 -d 20 [-warmup 5]
//                    [-size 16] [-threads 2] [-one] [-tick 0]
//
// server: one epoll loop per thread, each with its own SO_REUSEPORT
// listener on 127.0.0.1 (level-triggered). It prints "port N", then a JSON
// line of its counters and CPU time (getrusage) on every SIGUSR1, and a last
// one on SIGTERM or SIGINT, when it exits.
//
// client: opens -c connections (spread over the threads), then each one
// sends -size bytes every 1/rate s, the connections' start phases spread
// evenly over the interval. Open loop: a call is written when it is due,
// even if the replies before it are late (they queue in the socket: the
// backlog). With -one a connection has at most one call in flight, and a
// late call goes out as soon as the reply before it arrives, as rpcd soak's
// wire driver does. A call's latency counts from when it was due. Each
// thread keeps its connections in a schedule sorted by phase: every
// connection has the same period, so the next due call is always the
// cursor's, and the thread sleeps in epoll_pwait2 until then (with -tick US,
// until the next multiple of US µs, as rpcd's 1 ms timing wheel does, so that
// one wake-up sends a batch of calls). Every second it prints a line; at
// the start and end of the measured window (after -warmup) "window start"
// and "window end"; at the end one JSON line: calls and calls/s in the
// window, p50/p99/max latency, CPU time (user, system) and context switches
// in it, per call; its read, write and EAGAIN counts are the whole run's.
// Results: bench/results/*-soak-floor.json.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef unsigned long long u64;
#define MAXEV 256
#define BUFSZ 65536
#define NS 1000000000ULL
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ADD(x, k) __atomic_store_n(&(x), (x) + (k), __ATOMIC_RELAXED) // owner thread only

static u64 now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * NS + (u64)ts.tv_nsec;
}

static void die(const char *what) { perror(what); exit(2); }

// opt returns the value after -name in argv, or def; flag reports -name.
static int g_argc;
static char **g_argv;
static const char *opt(const char *name, const char *def) {
	for (int i = 2; i + 1 < g_argc; i++)
		if (g_argv[i][0] == '-' && strcmp(g_argv[i] + 1, name) == 0) return g_argv[i + 1];
	return def;
}
static int flag(const char *name) {
	for (int i = 2; i < g_argc; i++)
		if (g_argv[i][0] == '-' && strcmp(g_argv[i] + 1, name) == 0) return 1;
	return 0;
}

static void nodelay(int fd) {
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int)) < 0) die("TCP_NODELAY");
}

// cpu is this process's CPU time (s) and context switches so far.
struct cpu { double user, sys; long vcsw, ivcsw; };
static struct cpu cpu_now(void) {
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (struct cpu){ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
	                    ru.ru_nvcsw, ru.ru_nivcsw};
}

// ---------------------------------------------------------------- server

struct pending { char *buf; size_t off, len; }; // an echo the socket did not take whole
static struct pending *g_pend;                  // indexed by fd

struct sthread {
	pthread_t tid;
	int ep, lfd;
	u64 bytes, reads, writes, conns; // echoed bytes, syscalls, accepted connections
	char pad[64];                    // apart from the next thread's
};

static void watch(int ep, int op, int fd, unsigned events) {
	struct epoll_event ev = {.events = events, .data.fd = fd};
	if (epoll_ctl(ep, op, fd, &ev) < 0) die("epoll_ctl");
}

static void drop(int fd) { // close also takes fd out of the epoll set
	free(g_pend[fd].buf), g_pend[fd] = (struct pending){0}, close(fd);
}

// echo reads what the connection has and writes it back in one write; what
// the socket does not take waits in g_pend, reading paused, until EPOLLOUT.
static void echo(struct sthread *t, int fd, char *buf) {
	ssize_t n = read(fd, buf, BUFSZ), w;
	ADD(t->reads, 1);
	if (n <= 0) { if (n == 0 || errno != EAGAIN) drop(fd); return; }
	w = write(fd, buf, n);
	ADD(t->writes, 1);
	if (w < 0 && errno != EAGAIN) { drop(fd); return; }
	if (w < 0) w = 0;
	ADD(t->bytes, (u64)w);
	if (w < n) {
		struct pending *p = &g_pend[fd];
		p->len = n - w, p->off = 0, p->buf = malloc(p->len);
		memcpy(p->buf, buf + w, p->len);
		watch(t->ep, EPOLL_CTL_MOD, fd, EPOLLOUT);
	}
}

static void flush(struct sthread *t, int fd) {
	struct pending *p = &g_pend[fd];
	ssize_t w = write(fd, p->buf + p->off, p->len - p->off);
	ADD(t->writes, 1);
	if (w < 0) { if (errno != EAGAIN) drop(fd); return; }
	ADD(t->bytes, (u64)w);
	if ((p->off += w) < p->len) return;
	free(p->buf), *p = (struct pending){0};
	watch(t->ep, EPOLL_CTL_MOD, fd, EPOLLIN);
}

static void *serve(void *arg) {
	struct sthread *t = arg;
	struct epoll_event evs[MAXEV];
	char *buf = malloc(BUFSZ);
	for (;;) {
		int n = epoll_wait(t->ep, evs, MAXEV, -1);
		if (n < 0 && errno == EINTR) continue;
		if (n < 0) die("epoll_wait");
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			if (fd == t->lfd) {
				int c;
				while ((c = accept4(t->lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
					nodelay(c);
					watch(t->ep, EPOLL_CTL_ADD, c, EPOLLIN);
					ADD(t->conns, 1);
				}
			} else if (evs[i].events & EPOLLOUT) {
				flush(t, fd);
			} else {
				echo(t, fd, buf);
			}
		}
	}
	return NULL;
}

static int listener(int port) {
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) die("SO_REUSEPORT");
	if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 65535) < 0) die("bind, listen");
	return fd;
}

static int server_main(void) {
	int nt = atoi(opt("threads", "2")), port = atoi(opt("port", "0"));
	u64 size = strtoull(opt("size", "16"), NULL, 10), t0 = now_ns();
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	g_pend = calloc(rl.rlim_cur, sizeof *g_pend);
	// The signals go to this thread's sigwait, not to the epoll loops.
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1), sigaddset(&set, SIGTERM), sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	struct sthread *ts = calloc(nt, sizeof *ts);
	for (int i = 0; i < nt; i++) {
		ts[i].lfd = listener(port);
		if (port == 0) { // the first listener picks the port; the others share it
			struct sockaddr_in a;
			getsockname(ts[i].lfd, (struct sockaddr *)&a, &(socklen_t){sizeof a});
			port = ntohs(a.sin_port);
		}
		if ((ts[i].ep = epoll_create1(0)) < 0) die("epoll_create1");
		watch(ts[i].ep, EPOLL_CTL_ADD, ts[i].lfd, EPOLLIN);
	}
	for (int i = 0; i < nt; i++) pthread_create(&ts[i].tid, NULL, serve, &ts[i]);
	printf("port %d\n", port), fflush(stdout);
	for (;;) {
		int sig;
		sigwait(&set, &sig);
		u64 bytes = 0, reads = 0, writes = 0, conns = 0;
		for (int i = 0; i < nt; i++)
			bytes += LOAD(ts[i].bytes), reads += LOAD(ts[i].reads),
			writes += LOAD(ts[i].writes), conns += LOAD(ts[i].conns);
		struct cpu c = cpu_now();
		printf("{\"mode\":\"server\",\"event\":\"%s\",\"t_sec\":%.3f,\"threads\":%d,\"cpu_user_sec\":%.6f,"
		       "\"cpu_sys_sec\":%.6f,\"cpu_sec\":%.6f,\"vol_ctx_switches\":%ld,\"invol_ctx_switches\":%ld,"
		       "\"bytes\":%llu,\"echoes\":%llu,\"reads\":%llu,\"writes\":%llu,\"conns_accepted\":%llu}\n",
		       sig == SIGUSR1 ? "snapshot" : "exit", (now_ns() - t0) / 1e9, nt, c.user, c.sys, c.user + c.sys,
		       c.vcsw, c.ivcsw, bytes, bytes / size, reads, writes, conns);
		fflush(stdout);
		if (sig != SIGUSR1) exit(0); // the kernel closes the connections
	}
}

// ---------------------------------------------------------------- client

// Latency histogram, in ns: exact below 64, then 32 buckets per power of two
// (at most 3% off).
#define HB 1600
static int bucket(u64 v) {
	if (v < 64) return (int)v;
	int shift = 63 - __builtin_clzll(v) - 5;
	return shift * 32 + (int)(v >> shift);
}
static u64 bucket_mid(int i) {
	int shift = i / 32 - 1;
	return i < 64 ? (u64)i : ((u64)(i - shift * 32) << shift) + ((1ULL << shift) >> 1);
}

// A connection: its first call is due phase ns after the start; due calls
// have come due, written request bytes and rbytes reply bytes have passed,
// done = rbytes/size replies are whole.
struct conn { int fd; u64 phase, due, written, rbytes, done; };

struct cthread {
	pthread_t tid;
	int id, n, ep;
	struct conn *cs;              // its n connections, phases rising
	u64 due_total, done_total;    // read every second by the main thread
	u64 win_due, win_done, hist[HB]; // in the measured window
	u64 reads, writes, eagain, partial;
	char pad[64]; // apart from the next thread's
};

static u64 g_size, g_interval, g_tick, g_t0, g_win_start, g_win_end;
static int g_conns, g_threads, g_one;
static struct sockaddr_in g_addr;
static pthread_barrier_t g_connected, g_go;
static char g_zeros[BUFSZ];

// send writes what the schedule allows of c's requests: all the due ones,
// or with -one only the call after the last one answered.
static void send_due(struct cthread *t, struct conn *c) {
	u64 calls = c->due;
	if (g_one && calls > c->done + 1) calls = c->done + 1;
	if (c->written >= calls * g_size) return;
	u64 n = calls * g_size - c->written;
	ssize_t w = write(c->fd, g_zeros, n < BUFSZ ? n : BUFSZ);
	t->writes++;
	if (w < 0 && errno == EAGAIN) { t->eagain++; return; } // retried at its next event
	if (w < 0) die("client write");
	if ((u64)w < n) t->partial++;
	c->written += w;
}

// receive reads c's replies and records each whole one's latency from when
// it was due: call k of c was due at g_t0 + phase + k*interval.
static void receive(struct cthread *t, struct conn *c, char *buf) {
	ssize_t n = read(c->fd, buf, BUFSZ);
	t->reads++;
	if (n < 0 && errno == EAGAIN) return;
	if (n <= 0) { fprintf(stderr, "soakfloor: the server closed a connection\n"); exit(2); }
	u64 now = now_ns(), done = (c->rbytes += n) / g_size;
	if (now >= g_win_start && now < g_win_end) {
		for (u64 k = c->done; k < done; k++) {
			u64 due = g_t0 + c->phase + k * g_interval;
			t->hist[bucket(now > due ? now - due : 0)]++;
		}
		t->win_done += done - c->done;
	}
	ADD(t->done_total, done - c->done);
	c->done = done;
	send_due(t, c); // -one: the next call if it is late; else a write EAGAIN left
}

static void *drive(void *arg) {
	struct cthread *t = arg;
	struct epoll_event evs[MAXEV];
	char *buf = malloc(BUFSZ);
	if ((t->ep = epoll_create1(0)) < 0) die("epoll_create1");
	// This thread's connections are those i*threads + id: their phases rise.
	for (int i = 0; i < t->n; i++) {
		struct conn *c = &t->cs[i];
		int j = i * g_threads + t->id;
		if ((c->fd = socket(AF_INET, SOCK_STREAM, 0)) < 0) die("socket");
		if (connect(c->fd, (struct sockaddr *)&g_addr, sizeof g_addr) < 0) die("connect");
		nodelay(c->fd);
		if (fcntl(c->fd, F_SETFL, O_NONBLOCK) < 0) die("O_NONBLOCK");
		c->phase = (u64)j * g_interval / g_conns;
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
		if (epoll_ctl(t->ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) die("epoll_ctl");
	}
	pthread_barrier_wait(&g_connected);
	pthread_barrier_wait(&g_go); // the main thread has set g_t0
	int cur = 0;                 // the schedule's cursor: t->cs[cur] is due next,
	u64 round = 0;               // in this round of the interval
	for (;;) {
		u64 now = now_ns();
		if (now >= g_win_end) break;
		// Write the calls due, at most 256 before reading again.
		u64 next = g_t0 + round * g_interval + t->cs[cur].phase;
		for (int b = 0; next <= now && b < 256; b++) {
			struct conn *c = &t->cs[cur];
			c->due++;
			ADD(t->due_total, 1);
			if (now >= g_win_start) t->win_due++;
			send_due(t, c);
			if (++cur == t->n) cur = 0, round++;
			next = g_t0 + round * g_interval + t->cs[cur].phase;
		}
		u64 wait = next > now ? next - now : 0;
		if (wait && g_tick && (next - g_t0) % g_tick) // -tick: wake on the tick at or after it
			wait += g_tick - (next - g_t0) % g_tick;
		if (wait > g_win_end - now) wait = g_win_end - now;
		struct timespec ts = {.tv_sec = wait / NS, .tv_nsec = wait % NS};
		int n = epoll_pwait2(t->ep, evs, MAXEV, &ts, NULL);
		if (n < 0 && errno != EINTR) die("epoll_pwait2");
		for (int i = 0; i < n; i++) receive(t, evs[i].data.ptr, buf);
	}
	return NULL;
}

static void sleep_until(u64 t) {
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &(struct timespec){t / NS, t % NS}, NULL) == EINTR) {}
}

static int client_main(void) {
	const char *addr = opt("addr", "127.0.0.1:7000");
	const char *colon = strrchr(addr, ':');
	double rate = atof(opt("rate", "10"));
	int warmup = atoi(opt("warmup", "5")), dur = atoi(opt("d", "20"));
	g_conns = atoi(opt("c", "10000")), g_threads = atoi(opt("threads", "2")), g_one = flag("one");
	g_size = strtoull(opt("size", "16"), NULL, 10);
	g_tick = strtoull(opt("tick", "0"), NULL, 10) * 1000;
	if (!colon || g_conns < g_threads || g_threads < 1 || rate <= 0 || dur <= 0 || g_size < 1 || g_size > BUFSZ) {
		fprintf(stderr, "usage: soakfloor client -addr HOST:PORT -c N -rate R -d SEC [-warmup SEC] [-size B]\n"
		                "                        [-threads N] [-one] [-tick US]\n");
		return 2;
	}
	char host[64];
	snprintf(host, sizeof host, "%.*s", (int)(colon - addr), addr);
	g_addr.sin_family = AF_INET, g_addr.sin_port = htons(atoi(colon + 1));
	if (inet_pton(AF_INET, host, &g_addr.sin_addr) != 1) die("inet_pton");
	g_interval = (u64)(NS / rate);
	memset(g_zeros, 'x', sizeof g_zeros);

	struct cthread *ts = calloc(g_threads, sizeof *ts);
	pthread_barrier_init(&g_connected, NULL, g_threads + 1);
	pthread_barrier_init(&g_go, NULL, g_threads + 1);
	g_win_start = g_win_end = ~0ULL;
	u64 dial = now_ns();
	for (int i = 0; i < g_threads; i++) {
		ts[i].id = i;
		ts[i].n = g_conns / g_threads + (i < g_conns % g_threads);
		ts[i].cs = calloc(ts[i].n, sizeof(struct conn));
		pthread_create(&ts[i].tid, NULL, drive, &ts[i]);
	}
	pthread_barrier_wait(&g_connected);
	g_t0 = now_ns() + 10000000; // calls start 10 ms from now
	double dial_sec = (g_t0 - dial) / 1e9;
	g_win_start = g_t0 + (u64)warmup * NS;
	g_win_end = g_win_start + (u64)dur * NS;
	printf("connected %d in %.2f s; %s, %d threads\n", g_conns, dial_sec,
	       g_one ? "one call in flight per connection" : "open loop, pipelined", g_threads), fflush(stdout);
	pthread_barrier_wait(&g_go);

	// Every second: calls answered and asked in it, and the backlog.
	struct cpu c0 = {0}, c1 = {0};
	u64 last_done = 0, last_due = 0;
	if (warmup == 0) sleep_until(g_t0), c0 = cpu_now(), printf("window start\n");
	for (int sec = 1; sec <= warmup + dur; sec++) {
		sleep_until(g_t0 + (u64)sec * NS);
		if (sec == warmup) c0 = cpu_now();
		if (sec == warmup + dur) c1 = cpu_now();
		u64 done = 0, due = 0;
		for (int i = 0; i < g_threads; i++) done += LOAD(ts[i].done_total), due += LOAD(ts[i].due_total);
		printf("sec %d calls/s %llu asked/s %llu backlog %llu%s\n", sec, done - last_done, due - last_due,
		       due - done, sec <= warmup ? " (warm-up)" : "");
		if (sec == warmup) printf("window start\n");
		if (sec == warmup + dur) printf("window end\n");
		fflush(stdout);
		last_done = done, last_due = due;
	}
	u64 calls = 0, asked = 0, reads = 0, writes = 0, eagain = 0, partial = 0, hist[HB] = {0};
	for (int i = 0; i < g_threads; i++) {
		pthread_join(ts[i].tid, NULL);
		calls += ts[i].win_done, asked += ts[i].win_due, reads += ts[i].reads, writes += ts[i].writes;
		eagain += ts[i].eagain, partial += ts[i].partial;
		for (int b = 0; b < HB; b++) hist[b] += ts[i].hist[b];
	}
	double pct[3] = {0.50, 0.99, 1.0}, us[3] = {0};
	for (int p = 0; p < 3; p++) {
		u64 want = (u64)(pct[p] * calls + 0.5), seen = 0;
		if (want < 1) want = 1;
		for (int b = 0; b < HB; b++)
			if ((seen += hist[b]) >= want) { us[p] = bucket_mid(b) / 1e3; break; }
	}
	double cu = c1.user - c0.user, cs = c1.sys - c0.sys, per = calls ? 1e6 / calls : 0;
	printf("{\"mode\":\"client\",\"conns\":%d,\"rate_per_conn\":%g,\"size\":%llu,\"threads\":%d,\"one_in_flight\":%s,"
	       "\"dial_sec\":%.2f,\"warmup_sec\":%d,\"duration_sec\":%d,\"calls\":%llu,\"asked\":%llu,"
	       "\"calls_per_sec\":%.1f,\"asked_per_sec\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,"
	       "\"cpu_user_sec\":%.6f,\"cpu_sys_sec\":%.6f,\"cpu_per_call_us\":%.3f,\"user_per_call_us\":%.3f,"
	       "\"sys_per_call_us\":%.3f,\"vol_ctx_switches\":%ld,\"invol_ctx_switches\":%ld,\"reads\":%llu,\"writes\":%llu,\"write_eagain\":%llu,\"partial_writes\":%llu}\n",
	       g_conns, rate, g_size, g_threads, g_one ? "true" : "false", dial_sec, warmup, dur, calls, asked,
	       (double)calls / dur, (double)asked / dur, us[0], us[1], us[2], cu, cs, (cu + cs) * per, cu * per,
	       cs * per, c1.vcsw - c0.vcsw, c1.ivcsw - c0.ivcsw, reads, writes, eagain, partial);
	fflush(stdout);
	_exit(0); // the kernel closes the connections
}

int main(int argc, char **argv) {
	g_argc = argc, g_argv = argv;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) rl.rlim_cur = rl.rlim_max, setrlimit(RLIMIT_NOFILE, &rl);
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 2 && strcmp(argv[1], "server") == 0) return server_main();
	if (argc >= 2 && strcmp(argv[1], "client") == 0) return client_main();
	fprintf(stderr, "usage: soakfloor server|client [flags] (see the comment at the top of soakfloor.c)\n");
	return 2;
}
