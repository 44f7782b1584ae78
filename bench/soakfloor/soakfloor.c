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
//                    [-rpcd [-deadline MS]] [-drain SEC]
//   soakfloor server ... -rpcd
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
//
// -rpcd (both sides): speak rpcd's protocol (docs/protocol.md) instead of
// bare echo bytes, so that each side can face rpcd's other side
// (bench/scripts/soak_floor.py crosses them: this client against rpcd
// serve, rpcd soak -addr against this server).
//   client: sends nothing first (the protocol has no preamble, and a server
//   without authentication needs no Hello); each call is one Request frame,
//   route Bench/EchoPacket, codec Raw, deadline -deadline MS (default 0:
//   none; rpcd soak sends its -timeout, 5000), no metadata, -size bytes of
//   payload, call id k+1 for the connection's call k. A connection's frame
//   is built once; a call patches its id. It parses the Response frames by
//   their headers (a frame split across reads is held until whole), checks
//   each one's id (the next call's: rpcd answers a connection's inline calls
//   in order) and that its payload is the one sent, and counts Error frames
//   (errors) and anything else wrong (bad_replies); a GoAway ends it.
//   server: answers each Request for Bench/EchoPacket with a Response of the
//   same id, codec and payload; Sys/Stats (which rpcd soak samples) with
//   JSON numbers: cpu_sec (getrusage), rss, conns, heap from mallinfo2,
//   goroutines = its threads; any other route with Error NotFound; a Hello
//   with an empty Welcome, a Ping with its Pong; it ignores Cancel, OneWay,
//   Pong, GoAway. All the frames that answer what one read brought in go out
//   in one write. A header it cannot take (bad magic, version, reserved
//   bits, over the limits) gets GoAway Internal and the connection closed.
//   Its JSON lines add what it answered (stats, pings, hellos, ...) and the
//   first echo Request's header, in hex.
// -drain SEC (client): after the window, read the replies still owed for up
//   to SEC; calls_due, calls_answered and unanswered_at_exit count the run.
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
#include <malloc.h>
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

// ---------------------------------------------------------------- rpcd framing (docs/protocol.md)

#define HDR 24
#define MAXFRAME (4u << 20) // rpcd's default frame limit, header included
enum { K_REQUEST = 1, K_RESPONSE, K_ERROR, K_ONEWAY, K_CANCEL, K_PING, K_PONG, K_GOAWAY, K_HELLO = 0x10, K_WELCOME };
static const char ECHO_ROUTE[] = "Bench/EchoPacket", STATS_ROUTE[] = "Sys/Stats";
static int g_rpcd; // -rpcd

static unsigned be16(const unsigned char *p) { return (unsigned)p[0] << 8 | p[1]; }
static unsigned be32(const unsigned char *p) { return (unsigned)p[0] << 24 | (unsigned)p[1] << 16 | (unsigned)p[2] << 8 | p[3]; }
static void put16(unsigned char *p, unsigned v) { p[0] = v >> 8, p[1] = v; }
static void put32(unsigned char *p, unsigned v) { p[0] = v >> 24, p[1] = v >> 16, p[2] = v >> 8, p[3] = v; }

// header writes a frame header: magic, version 1, reserved 0.
static void header(unsigned char *h, int kind, int flags, int codec, unsigned route, unsigned id, unsigned deadline,
                   unsigned meta, unsigned payload) {
	h[0] = 0x52, h[1] = 0x44, h[2] = 1, h[3] = kind, h[4] = flags, h[5] = codec;
	put16(h + 6, route), put32(h + 8, id), put32(h + 12, deadline), put16(h + 16, meta), h[18] = h[19] = 0;
	put32(h + 20, payload);
}

// check_header returns what is wrong with a header (NULL if nothing) and sets
// *total to the frame's length: the receiver's checks of "Limits", done
// before the rest of the frame is buffered.
static const char *check_header(const unsigned char *h, u64 *total) {
	if (h[0] != 0x52 || h[1] != 0x44) return "bad magic";
	if (h[2] != 1) return "unknown version";
	if (h[18] || h[19]) return "reserved field not zero";
	if (h[4] & 0xF8) return "reserved flag bit set";
	unsigned rl = be16(h + 6), ml = be16(h + 16);
	if (rl > 256) return "route over 256 bytes";
	if (ml > 8192) return "metadata over 8 KiB";
	*total = (u64)HDR + rl + ml + be32(h + 20);
	if (*total > MAXFRAME) return "frame over 4 MiB";
	return NULL;
}

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

struct rx { unsigned char *buf; size_t len, cap; }; // -rpcd: the start of a frame a read did not bring whole
static struct rx *g_rx;                               // indexed by fd
static u64 g_open;                                    // connections open (atomic): Sys/Stats conns
static int g_nthreads;
static char g_first[2 * (HDR + 64) + 1]; // the first echo Request's header and route, in hex (what the client sends)
static int g_first_taken;

struct sthread {
	pthread_t tid;
	int ep, lfd;
	u64 bytes, reads, writes, conns; // echoed bytes, syscalls, accepted connections
	// -rpcd: Requests echoed, Sys/Stats answered, other routes refused, Hellos,
	// Pings, frames ignored (Cancel, OneWay, ...), connections closed on a
	// protocol error; Requests with a deadline or metadata (what the client sends)
	u64 echoes, stats, notfound, hellos, pings, ignored, protoerr, with_deadline, with_meta;
	unsigned char *out; // -rpcd: the replies to one read
	size_t outcap;
	char pad[64]; // apart from the next thread's
};

static void watch(int ep, int op, int fd, unsigned events) {
	struct epoll_event ev = {.events = events, .data.fd = fd};
	if (epoll_ctl(ep, op, fd, &ev) < 0) die("epoll_ctl");
}

static void drop(int fd) { // close also takes fd out of the epoll set
	free(g_pend[fd].buf), g_pend[fd] = (struct pending){0}, close(fd);
	free(g_rx[fd].buf), g_rx[fd] = (struct rx){0};
	__atomic_sub_fetch(&g_open, 1, __ATOMIC_RELAXED);
}

// reply_out writes n bytes of replies in one write; what the socket does not
// take waits in g_pend, reading paused, until EPOLLOUT (as echo does).
static int reply_out(struct sthread *t, int fd, const unsigned char *b, size_t n) {
	if (n == 0) return 0;
	ssize_t w = write(fd, b, n);
	ADD(t->writes, 1);
	if (w < 0 && errno != EAGAIN) { drop(fd); return -1; }
	if (w < 0) w = 0;
	ADD(t->bytes, (u64)w);
	if ((size_t)w < n) {
		struct pending *p = &g_pend[fd];
		p->len = n - w, p->off = 0, p->buf = malloc(p->len);
		memcpy(p->buf, b + w, p->len);
		watch(t->ep, EPOLL_CTL_MOD, fd, EPOLLOUT);
	}
	return 0;
}

// out_room makes room for n more bytes of replies after the first used.
static unsigned char *out_room(struct sthread *t, size_t used, size_t n) {
	if (used + n > t->outcap) {
		while (used + n > t->outcap) t->outcap *= 2;
		if (!(t->out = realloc(t->out, t->outcap))) die("realloc");
	}
	return t->out + used;
}

// stats_json is the Sys/Stats reply: the fields of docs/protocol.md's
// route table, as this process has them.
static int stats_json(char *b, size_t n) {
	struct cpu c = cpu_now();
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) { if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0; fclose(f); }
	struct mallinfo2 mi = mallinfo2();
	return snprintf(b, n, "{\"goroutines\":%d,\"heap_alloc\":%zu,\"heap_inuse\":%zu,\"sys\":%zu,\"rss\":%ld,"
	                "\"num_gc\":0,\"conns\":%llu,\"cpu_sec\":%.6f}",
	                g_nthreads, mi.uordblks + mi.hblkhd, mi.uordblks + mi.hblkhd, mi.arena + mi.hblkhd,
	                rss * sysconf(_SC_PAGESIZE), LOAD(g_open), c.user + c.sys);
}

// answer appends at out+o the reply to the whole frame h (total bytes), if
// it has one; returns the new length of out, or (size_t)-1 on a frame the
// server must not take (then *why says which rule).
static size_t answer(struct sthread *t, const unsigned char *h, u64 total, size_t o, const char **why) {
	unsigned rl = be16(h + 6), ml = be16(h + 16), pl = be32(h + 20), id = be32(h + 8);
	const unsigned char *route = h + HDR, *payload = h + HDR + rl + ml;
	unsigned char *r;
	(void)total;
	switch (h[3]) {
	case K_REQUEST:
		if (rl == 0 || id == 0) { *why = "a Request needs a route and a call id"; return (size_t)-1; }
		if (be32(h + 12)) ADD(t->with_deadline, 1);
		if (ml) ADD(t->with_meta, 1);
		if (rl == sizeof ECHO_ROUTE - 1 && memcmp(route, ECHO_ROUTE, rl) == 0) { // the payload back, as it came
			if (!__atomic_exchange_n(&g_first_taken, 1, __ATOMIC_RELAXED))
				for (unsigned i = 0; i < HDR + rl; i++) sprintf(g_first + 2 * i, "%02x", h[i]);
			r = out_room(t, o, HDR + pl);
			header(r, K_RESPONSE, h[4] & 0x06, h[5], 0, id, 0, 0, pl);
			memcpy(r + HDR, payload, pl);
			ADD(t->echoes, 1);
			return o + HDR + pl;
		}
		if (rl == sizeof STATS_ROUTE - 1 && memcmp(route, STATS_ROUTE, rl) == 0) {
			r = out_room(t, o, HDR + 512);
			int n = stats_json((char *)r + HDR, 512);
			header(r, K_RESPONSE, 0, h[5], 0, id, 0, 0, n);
			ADD(t->stats, 1);
			return o + HDR + n;
		}
		{ // Error NotFound (5), Unprocessed
			static const char msg[] = "no route";
			r = out_room(t, o, HDR + 2 + sizeof msg - 1);
			header(r, K_ERROR, 0x01, 0, 0, id, 0, 0, 2 + sizeof msg - 1);
			put16(r + HDR, 5), memcpy(r + HDR + 2, msg, sizeof msg - 1);
			ADD(t->notfound, 1);
			return o + HDR + 2 + sizeof msg - 1;
		}
	case K_HELLO: // no authentication: an empty Welcome, without rpcd-compression (takes none)
		r = out_room(t, o, HDR);
		header(r, K_WELCOME, 0, 0, 0, 0, 0, 0, 0);
		ADD(t->hellos, 1);
		return o + HDR;
	case K_PING:
		if (pl > 64) { *why = "a Ping's payload is 64 bytes at most"; return (size_t)-1; }
		r = out_room(t, o, HDR + pl);
		header(r, K_PONG, 0, 0, 0, 0, 0, 0, pl);
		memcpy(r + HDR, payload, pl);
		ADD(t->pings, 1);
		return o + HDR + pl;
	case K_RESPONSE: case K_ERROR: case K_ONEWAY: case K_CANCEL: case K_PONG: case K_GOAWAY:
		ADD(t->ignored, 1);
		return o;
	default:
		*why = "a kind this server does not take";
		return (size_t)-1;
	}
}

// serve_rpcd reads what the connection has, answers every whole frame in it
// and writes the replies with one write; a frame's start that the read did
// not bring whole waits in g_rx for the next read.
static void serve_rpcd(struct sthread *t, int fd, unsigned char *buf) {
	struct rx *x = &g_rx[fd];
	ssize_t n = read(fd, buf, BUFSZ);
	ADD(t->reads, 1);
	if (n <= 0) { if (n == 0 || errno != EAGAIN) drop(fd); return; }
	const unsigned char *p = buf;
	size_t len = n, off = 0, o = 0;
	if (x->len) { // the rest of a frame: append to what waits
		if (x->len + n > x->cap) {
			while (x->len + n > x->cap) x->cap *= 2;
			if (!(x->buf = realloc(x->buf, x->cap))) die("realloc");
		}
		memcpy(x->buf + x->len, buf, n);
		p = x->buf, len = x->len += n;
	}
	const char *why = NULL;
	while (len - off >= HDR) {
		u64 total;
		if ((why = check_header(p + off, &total))) break;
		if (len - off < total) break;
		size_t o2 = answer(t, p + off, total, o, &why);
		if (o2 == (size_t)-1) break;
		o = o2, off += total;
	}
	if (why) { // GoAway Internal (13), last call id 0 (this server keeps no count), then close
		unsigned ml = strlen(why);
		unsigned char *r = out_room(t, o, HDR + 6 + ml);
		header(r, K_GOAWAY, 0, 0, 0, 0, 0, 0, 6 + ml);
		put32(r + HDR, 0), put16(r + HDR + 4, 13), memcpy(r + HDR + 6, why, ml);
		o += HDR + 6 + ml;
		ADD(t->protoerr, 1);
		if (write(fd, t->out, o) < 0) {}
		drop(fd);
		return;
	}
	// Keep the start of a frame not yet whole.
	size_t rest = len - off;
	if (p == buf) {
		if (rest) {
			if (!x->buf) x->cap = 4096, x->buf = malloc(x->cap);
			while (rest > x->cap) x->cap *= 2;
			if (!(x->buf = realloc(x->buf, x->cap))) die("realloc");
			memcpy(x->buf, buf + off, rest);
		}
		x->len = rest;
	} else {
		memmove(x->buf, x->buf + off, rest);
		x->len = rest;
	}
	reply_out(t, fd, t->out, o);
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
	t->outcap = 2 * BUFSZ, t->out = malloc(t->outcap);
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
					__atomic_add_fetch(&g_open, 1, __ATOMIC_RELAXED);
				}
			} else if (evs[i].events & EPOLLOUT) {
				flush(t, fd);
			} else if (g_rpcd) {
				serve_rpcd(t, fd, (unsigned char *)buf);
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
	g_rx = calloc(rl.rlim_cur, sizeof *g_rx);
	g_rpcd = flag("rpcd"), g_nthreads = nt;
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
		u64 bytes = 0, reads = 0, writes = 0, conns = 0, echoes = 0, stats = 0, notfound = 0, hellos = 0, pings = 0,
		    ignored = 0, protoerr = 0, with_deadline = 0, with_meta = 0;
		for (int i = 0; i < nt; i++)
			bytes += LOAD(ts[i].bytes), reads += LOAD(ts[i].reads),
			writes += LOAD(ts[i].writes), conns += LOAD(ts[i].conns), echoes += LOAD(ts[i].echoes),
			stats += LOAD(ts[i].stats), notfound += LOAD(ts[i].notfound), hellos += LOAD(ts[i].hellos),
			pings += LOAD(ts[i].pings), ignored += LOAD(ts[i].ignored), protoerr += LOAD(ts[i].protoerr),
			with_deadline += LOAD(ts[i].with_deadline), with_meta += LOAD(ts[i].with_meta);
		struct cpu c = cpu_now();
		printf("{\"mode\":\"server\",\"protocol\":\"%s\",\"event\":\"%s\",\"t_sec\":%.3f,\"threads\":%d,\"cpu_user_sec\":%.6f,"
		       "\"cpu_sys_sec\":%.6f,\"cpu_sec\":%.6f,\"vol_ctx_switches\":%ld,\"invol_ctx_switches\":%ld,"
		       "\"bytes\":%llu,\"echoes\":%llu,\"reads\":%llu,\"writes\":%llu,\"conns_accepted\":%llu,\"conns_open\":%llu",
		       g_rpcd ? "rpcd" : "echo", sig == SIGUSR1 ? "snapshot" : "exit", (now_ns() - t0) / 1e9, nt, c.user, c.sys,
		       c.user + c.sys, c.vcsw, c.ivcsw, bytes, g_rpcd ? echoes : bytes / size, reads, writes, conns, LOAD(g_open));
		if (g_rpcd)
			printf(",\"stats\":%llu,\"notfound\":%llu,\"hellos\":%llu,\"pings\":%llu,\"ignored\":%llu,"
			       "\"protocol_errors\":%llu,\"requests_with_deadline\":%llu,\"requests_with_metadata\":%llu,"
			       "\"first_echo_request_hex\":\"%s\"",
			       stats, notfound, hellos, pings, ignored, protoerr, with_deadline, with_meta, g_first);
		printf("}\n");
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
// done = rbytes/size replies are whole. With -rpcd, each call is a frame of
// g_frame bytes (frame: the connection's Request, its id patched per call),
// done counts the reply frames read, and held bytes of the next one wait in
// hold (skip: bytes of a frame too large to hold, still to pass).
struct conn { int fd; u64 phase, due, written, rbytes, done; unsigned char *frame, *hold; unsigned held; u64 skip; };

struct cthread {
	pthread_t tid;
	int id, n, ep;
	struct conn *cs;              // its n connections, phases rising
	u64 due_total, done_total;    // read every second by the main thread
	u64 win_due, win_done, hist[HB]; // in the measured window
	u64 reads, writes, eagain, partial;
	u64 errors, bad;              // -rpcd: Error frames; replies with a wrong id, payload or shape
	unsigned char *sbuf;          // -rpcd: several calls' frames, built for one write
	char pad[64]; // apart from the next thread's
};

static u64 g_size, g_interval, g_tick, g_t0, g_win_start, g_win_end, g_frame, g_holdcap;
static int g_conns, g_threads, g_one, g_drain;
static unsigned g_deadline; // -rpcd: the Requests' deadline field, ms (0: none)
static struct sockaddr_in g_addr;
static pthread_barrier_t g_connected, g_go;
static char g_zeros[BUFSZ];

// call_id is call k's id: counting up from 1, wrapping from 0xFFFFFFFF to 1.
static unsigned call_id(u64 k) { return (unsigned)(k % 0xFFFFFFFFULL) + 1; }

// send writes what the schedule allows of c's requests: all the due ones,
// or with -one only the call after the last one answered.
static void send_due(struct cthread *t, struct conn *c) {
	u64 calls = c->due;
	if (g_one && calls > c->done + 1) calls = c->done + 1;
	u64 unit = g_rpcd ? g_frame : g_size;
	if (c->written >= calls * unit) return;
	u64 n = calls * unit - c->written;
	ssize_t w;
	if (!g_rpcd) {
		w = write(c->fd, g_zeros, n < BUFSZ ? n : BUFSZ);
	} else { // from the first byte not written, in call k0's frame
		u64 k0 = c->written / g_frame, at = c->written % g_frame, nf = calls - k0;
		if (nf == 1) { // the usual case: the connection's own frame, its id patched
			put32(c->frame + 8, call_id(k0));
			w = write(c->fd, c->frame + at, g_frame - at);
		} else {
			if (nf > BUFSZ / g_frame) nf = BUFSZ / g_frame;
			for (u64 i = 0; i < nf; i++) {
				memcpy(t->sbuf + i * g_frame, c->frame, g_frame);
				put32(t->sbuf + i * g_frame + 8, call_id(k0 + i));
			}
			n = nf * g_frame - at;
			w = write(c->fd, t->sbuf + at, n);
		}
	}
	t->writes++;
	if (w < 0 && errno == EAGAIN) { t->eagain++; return; } // retried at its next event
	if (w < 0) die("client write");
	if ((u64)w < n) t->partial++;
	c->written += w;
}

// receive reads c's replies and records each whole one's latency from when
// it was due: call k of c was due at g_t0 + phase + k*interval.
// rpcd_replies parses the frames in p[0..len) (held bytes of c's last read
// first), checks each reply against the call it answers, keeps the start of
// a frame not yet whole, and returns how many of c's calls are answered.
static u64 rpcd_replies(struct cthread *t, struct conn *c, unsigned char *p, u64 len) {
	u64 off = 0, done = c->done;
	if (c->skip) { // the rest of a frame too large to hold
		u64 d = c->skip < len ? c->skip : len;
		off += d, c->skip -= d;
	}
	while (len - off >= HDR) {
		const unsigned char *h = p + off;
		u64 total;
		const char *why = check_header(h, &total);
		if (why) { fprintf(stderr, "soakfloor: protocol error from the server: %s\n", why); exit(2); }
		unsigned rl = be16(h + 6), ml = be16(h + 16), pl = be32(h + 20), id = be32(h + 8);
		if (len - off < total && total <= g_holdcap) break; // wait for the rest
		int whole = len - off >= total;
		switch (h[3]) {
		case K_RESPONSE: // the next call's, and the payload sent
			if (!whole || id != call_id(done) || rl || h[4] || h[5] != 0 || pl != g_size ||
			    memcmp(h + HDR + ml, c->frame + HDR + sizeof ECHO_ROUTE - 1, g_size) != 0) {
				if (t->bad++ < 5)
					fprintf(stderr, "soakfloor: bad reply: id %u (want %u), flags %d, codec %d, route %u, payload %u bytes\n",
					        id, call_id(done), h[4], h[5], rl, pl);
			}
			done++;
			break;
		case K_ERROR:
			if (t->errors++ < 5)
				fprintf(stderr, "soakfloor: Error for call id %u (want %u): code %u %.*s\n", id, call_id(done),
				        whole && pl >= 2 ? be16(h + HDR + rl + ml) : 0, whole && pl > 2 ? (int)(pl - 2) : 0,
				        (const char *)h + HDR + rl + ml + 2);
			if (id) done++;
			break;
		case K_GOAWAY:
			fprintf(stderr, "soakfloor: GoAway: code %u %.*s\n", whole && pl >= 6 ? be16(h + HDR + rl + ml + 4) : 0,
			        whole && pl > 6 ? (int)(pl - 6) : 0, (const char *)h + HDR + rl + ml + 6);
			exit(2);
		case K_PING: // answer with its Pong (rpcd pings a connection silent for 30 s)
			if (whole && pl <= 64) {
				unsigned char pong[HDR + 64];
				header(pong, K_PONG, 0, 0, 0, 0, 0, 0, pl);
				memcpy(pong + HDR, h + HDR + rl + ml, pl);
				if (write(c->fd, pong, HDR + pl) < 0) {}
			}
			break;
		case K_PONG: case K_WELCOME:
			break;
		default:
			if (t->bad++ < 5) fprintf(stderr, "soakfloor: unexpected frame kind 0x%02x\n", h[3]);
		}
		if (!whole) { c->skip = total - (len - off), off = len; break; }
		off += total;
	}
	c->held = len - off;
	memcpy(c->hold, p + off, c->held);
	return done;
}

static void receive(struct cthread *t, struct conn *c, char *buf) {
	char *in = g_rpcd ? buf + g_holdcap : buf; // -rpcd: room before it for the held bytes
	ssize_t n = read(c->fd, in, g_rpcd ? BUFSZ - g_holdcap : BUFSZ);
	t->reads++;
	if (n < 0 && errno == EAGAIN) return;
	if (n <= 0) { fprintf(stderr, "soakfloor: the server closed a connection\n"); exit(2); }
	u64 now = now_ns(), done;
	if (g_rpcd) {
		unsigned char *p = (unsigned char *)in - c->held;
		memcpy(p, c->hold, c->held);
		done = rpcd_replies(t, c, p, c->held + (u64)n);
	} else {
		done = (c->rbytes += n) / g_size;
	}
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
	if (g_rpcd) t->sbuf = malloc(BUFSZ);
	// This thread's connections are those i*threads + id: their phases rise.
	for (int i = 0; i < t->n; i++) {
		struct conn *c = &t->cs[i];
		int j = i * g_threads + t->id;
		if ((c->fd = socket(AF_INET, SOCK_STREAM, 0)) < 0) die("socket");
		if (connect(c->fd, (struct sockaddr *)&g_addr, sizeof g_addr) < 0) die("connect");
		nodelay(c->fd);
		if (fcntl(c->fd, F_SETFL, O_NONBLOCK) < 0) die("O_NONBLOCK");
		c->phase = (u64)j * g_interval / g_conns;
		if (g_rpcd) { // its Request, built once: Bench/EchoPacket, Raw, no deadline, -size bytes naming it
			c->frame = malloc(g_frame), c->hold = malloc(g_holdcap);
			header(c->frame, K_REQUEST, 0, 0, sizeof ECHO_ROUTE - 1, 0, g_deadline, 0, g_size);
			memcpy(c->frame + HDR, ECHO_ROUTE, sizeof ECHO_ROUTE - 1);
			unsigned char *pay = c->frame + HDR + sizeof ECHO_ROUTE - 1;
			for (u64 b = 0; b < g_size; b++) pay[b] = 'a' + (j + b) % 26;
		}
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
	// -drain SEC: no new calls; read the replies still owed, for up to SEC.
	for (u64 end = g_win_end + (u64)g_drain * NS, now; LOAD(t->done_total) < LOAD(t->due_total) && (now = now_ns()) < end;) {
		struct timespec ts = {.tv_sec = (end - now) / NS, .tv_nsec = (end - now) % NS};
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
	g_rpcd = flag("rpcd"), g_drain = atoi(opt("drain", "0")), g_deadline = strtoul(opt("deadline", "0"), NULL, 10);
	g_frame = HDR + sizeof ECHO_ROUTE - 1 + g_size;
	g_holdcap = HDR + g_size > 512 ? HDR + g_size : 512;
	if (!colon || g_conns < g_threads || g_threads < 1 || rate <= 0 || dur <= 0 || g_size < 1 || g_size > BUFSZ ||
	    (g_rpcd && (g_frame > BUFSZ / 4 || g_holdcap > BUFSZ / 4))) {
		fprintf(stderr, "usage: soakfloor client -addr HOST:PORT -c N -rate R -d SEC [-warmup SEC] [-size B]\n"
		                "                        [-threads N] [-one] [-tick US] [-rpcd] [-deadline MS] [-drain SEC]\n");
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
	u64 errors = 0, bad = 0, due_all = 0, done_all = 0;
	for (int i = 0; i < g_threads; i++) {
		pthread_join(ts[i].tid, NULL);
		calls += ts[i].win_done, asked += ts[i].win_due, reads += ts[i].reads, writes += ts[i].writes;
		eagain += ts[i].eagain, partial += ts[i].partial, errors += ts[i].errors, bad += ts[i].bad;
		due_all += ts[i].due_total, done_all += ts[i].done_total;
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
	printf("{\"mode\":\"client\",\"protocol\":\"%s\",\"errors\":%llu,\"bad_replies\":%llu,\"calls_due\":%llu,"
	       "\"calls_answered\":%llu,\"unanswered_at_exit\":%llu,\"drain_sec\":%d,\"deadline_ms\":%u,",
	       g_rpcd ? "rpcd" : "echo", errors, bad, due_all, done_all, due_all - done_all, g_drain, g_deadline);
	printf("\"conns\":%d,\"rate_per_conn\":%g,\"size\":%llu,\"threads\":%d,\"one_in_flight\":%s,"
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
