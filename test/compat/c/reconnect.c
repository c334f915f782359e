/*
 * reconnect.c: ZooKeeper's C client (Debian's libzookeeper-mt, 3.8),
 * unchanged, through reconnects of its session; the program of the
 * c-reconnect suite of make compat (c_reconnect.sh builds and runs it).
 *
 *   reconnect SERVERS checks        a dropped connection, 20 in a row, the
 *                                   session's server killed (COMPAT_CTL)
 *   reconnect SERVERS crash FILE    a session, 30 writes, its id, password,
 *                                   start time and request count to FILE,
 *                                   then an exit without closing it
 *   reconnect SERVERS resume FILE   that session resumed by a new process
 *
 * After every reconnect the same round runs (test/compat/README.md): sets
 * with a version, a plain, a sequential and an ephemeral create, a multi,
 * everything read back from this session and another, and two watches set
 * after the reconnect that must fire. It prints "ok NAME" or "FAIL NAME:
 * why" per check and exits 1 if any failed. Every wait is bounded (WAIT_S).
 *
 * The C client numbers its requests with one counter for the whole
 * process (get_xid in mt_adaptor.c), shared by all its handles, started at
 * the time the library was loaded, in seconds, and never reset: within a
 * process a reconnect goes on from where it was, but a new process
 * resuming a session starts at its own start time, below the xids of a
 * predecessor that sent more requests than the seconds between their
 * starts. The resume check makes sure that it does.
 *
 * A dropped connection: the program shuts down its own socket to the
 * session's server (found by its peer address), as if the network had
 * dropped it; the client connects again, to the same server when it is
 * the only one it has.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#define WAIT_S 30
#define TIMEOUT_MS 15000
#define DROPS 20
#define WRITES 30

static char why[1024];
static int passed, failed;

/* fail records why a check failed; the check then returns -1. */
static int fail(const char *format, ...)
{
	va_list ap;
	va_start(ap, format);
	vsnprintf(why, sizeof why, format, ap);
	va_end(ap);
	return -1;
}

#define CHECK(cond, ...)                 \
	do {                             \
		if (!(cond))             \
			return fail(__VA_ARGS__); \
	} while (0)

#define ZCALL(call, what)                                                   \
	do {                                                                \
		int rc_ = (call);                                           \
		if (rc_ != ZOK)                                             \
			return fail("%s: %s (%d)", (what), zerror(rc_), rc_); \
	} while (0)

/* A session: its handle, and what its watchers were told. */
struct sess {
	zhandle_t *zh;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int connected; /* ZOO_CONNECTED_STATE events */
	int lost;      /* ZOO_EXPIRED_SESSION_STATE or ZOO_AUTH_FAILED_STATE */
	int nev;       /* node events since the last reset */
	struct {
		int type;
		char path[512];
	} ev[16];
};

static void deadline(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += WAIT_S;
}

static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	struct sess *s = ctx;
	(void)zh;
	(void)path;
	if (type != ZOO_SESSION_EVENT)
		return;
	pthread_mutex_lock(&s->mu);
	if (state == ZOO_CONNECTED_STATE)
		s->connected++;
	else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE)
		s->lost++;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static void node_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	struct sess *s = ctx;
	(void)zh;
	(void)state;
	pthread_mutex_lock(&s->mu);
	if (s->nev < (int)(sizeof s->ev / sizeof s->ev[0])) {
		s->ev[s->nev].type = type;
		snprintf(s->ev[s->nev].path, sizeof s->ev[s->nev].path, "%s", path ? path : "");
		s->nev++;
	}
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* await_connected waits until the session has connected more than n times. */
static int await_connected(struct sess *s, int n, const char *what)
{
	struct timespec ts;
	int err = 0;
	deadline(&ts);
	pthread_mutex_lock(&s->mu);
	while (s->connected <= n && !s->lost && err != ETIMEDOUT)
		err = pthread_cond_timedwait(&s->cv, &s->mu, &ts);
	int ok = s->connected > n, lost = s->lost;
	pthread_mutex_unlock(&s->mu);
	CHECK(!lost, "%s: the session expired", what);
	CHECK(ok, "%s: not connected within %d s", what, WAIT_S);
	return 0;
}

static int connected_count(struct sess *s)
{
	pthread_mutex_lock(&s->mu);
	int n = s->connected;
	pthread_mutex_unlock(&s->mu);
	return n;
}

/* sess_open connects to hosts (resuming cid when it is not NULL). */
static int sess_open(struct sess *s, const char *hosts, const clientid_t *cid)
{
	memset(s, 0, sizeof *s);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->zh = zookeeper_init(hosts, session_watcher, TIMEOUT_MS, cid, s, 0);
	CHECK(s->zh != NULL, "zookeeper_init(%s): %s", hosts, strerror(errno));
	return await_connected(s, 0, hosts);
}

static void sess_close(struct sess *s)
{
	if (s->zh)
		zookeeper_close(s->zh);
	s->zh = NULL;
}

/* current copies the address of the server the session is on. */
static void current(struct sess *s, char *buf, size_t n)
{
	const char *c = zoo_get_current_server(s->zh);
	snprintf(buf, n, "%s", c ? c : "");
}

/* drop shuts down the session's connection and waits until it has
   connected again, to the same server. */
static int drop(struct sess *s)
{
	char addr[128], host[128], now[128];
	current(s, addr, sizeof addr);
	snprintf(host, sizeof host, "%s", addr);
	char *colon = strrchr(host, ':');
	CHECK(colon != NULL, "the current server %s has no port", addr);
	*colon = 0;
	int port = atoi(colon + 1);
	int64_t id = zoo_client_id(s->zh)->client_id;
	int before = connected_count(s), shut = 0;
	for (int fd = 0; fd < 1024; fd++) {
		struct sockaddr_in a;
		socklen_t l = sizeof a;
		if (getpeername(fd, (struct sockaddr *)&a, &l) == 0 && a.sin_family == AF_INET &&
		    ntohs(a.sin_port) == port && a.sin_addr.s_addr == inet_addr(host)) {
			shutdown(fd, SHUT_RDWR);
			shut++;
		}
	}
	CHECK(shut == 1, "%d connections to %s in this process, not 1", shut, addr);
	if (await_connected(s, before, "after the dropped connection") < 0)
		return -1;
	current(s, now, sizeof now);
	CHECK(strcmp(addr, now) == 0, "connected to %s after the drop, not %s", now, addr);
	CHECK(zoo_client_id(s->zh)->client_id == id, "another session after the drop");
	return 0;
}

struct done {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int fired, rc;
};

static void sync_done(int rc, const char *value, const void *data)
{
	struct done *d = (struct done *)data;
	(void)value;
	pthread_mutex_lock(&d->mu);
	d->rc = rc;
	d->fired = 1;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

/* zsync is a sync, waited for: the session's server has then applied
   every write acknowledged before. */
static int zsync(zhandle_t *zh, const char *path)
{
	struct done d = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
	struct timespec ts;
	int err = 0;
	ZCALL(zoo_async(zh, path, sync_done, &d), "sync");
	deadline(&ts);
	pthread_mutex_lock(&d.mu);
	while (!d.fired && err != ETIMEDOUT)
		err = pthread_cond_timedwait(&d.cv, &d.mu, &ts);
	int fired = d.fired, rc = d.rc;
	pthread_mutex_unlock(&d.mu);
	CHECK(fired, "sync not answered within %d s", WAIT_S);
	ZCALL(rc, "sync");
	return 0;
}

/* One session's writes below base, counted, so that every round can
   check that each applied exactly once; w is another session, which reads
   back and makes the changes that fire this one's watches. */
struct tally {
	struct sess *s, *w;
	char base[256];
	int version; /* base/counter's */
	int seq;     /* sequential nodes created below base/seq */
};

static int create(zhandle_t *zh, const char *path, int mode, char *out, int n)
{
	char buf[512];
	if (!out) {
		out = buf;
		n = sizeof buf;
	}
	int rc = zoo_create(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, mode, out, n);
	return rc;
}

static int tally_init(struct tally *t, struct sess *s, struct sess *w, const char *base)
{
	char p[512];
	memset(t, 0, sizeof *t);
	t->s = s;
	t->w = w;
	snprintf(t->base, sizeof t->base, "%s", base);
	ZCALL(create(s->zh, base, ZOO_PERSISTENT, NULL, 0), base);
	snprintf(p, sizeof p, "%s/counter", base);
	ZCALL(create(s->zh, p, ZOO_PERSISTENT, NULL, 0), p);
	snprintf(p, sizeof p, "%s/seq", base);
	ZCALL(create(s->zh, p, ZOO_PERSISTENT, NULL, 0), p);
	return 0;
}

static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* round: sets, creates (plain, sequential, ephemeral), a multi and two
   watches, each checked. */
static int round_(struct tally *t, const char *tag)
{
	zhandle_t *zh = t->s->zh;
	char counter[512], plain[512], eph[512], multi[512], fired[512], seqp[512], want[640], out[640], data[64];
	struct Stat st;
	int64_t sid = zoo_client_id(zh)->client_id;
	snprintf(counter, sizeof counter, "%s/counter", t->base);
	snprintf(plain, sizeof plain, "%s/%s", t->base, tag);
	snprintf(eph, sizeof eph, "%s/%s-eph", t->base, tag);
	snprintf(multi, sizeof multi, "%s/%s-multi", t->base, tag);
	snprintf(fired, sizeof fired, "%s/%s-w", t->base, tag);
	snprintf(seqp, sizeof seqp, "%s/seq/s-", t->base);

	for (int i = 0; i < 3; i++) {
		snprintf(data, sizeof data, "%s-%d", tag, i);
		ZCALL(zoo_set2(zh, counter, data, strlen(data), t->version, &st), "set of the counter");
		t->version++;
		CHECK(st.version == t->version, "%s: the counter's version after a set: %d, want %d", tag, st.version, t->version);
	}
	ZCALL(create(zh, plain, ZOO_PERSISTENT, out, sizeof out), plain);
	CHECK(strcmp(out, plain) == 0, "%s: plain create's path %s, want %s", tag, out, plain);
	snprintf(want, sizeof want, "%s%010d", seqp, t->seq);
	ZCALL(create(zh, seqp, ZOO_PERSISTENT_SEQUENTIAL, out, sizeof out), "sequential create");
	CHECK(strcmp(out, want) == 0, "%s: sequential create's path %s, want %s", tag, out, want);
	t->seq++;
	ZCALL(create(zh, eph, ZOO_EPHEMERAL, out, sizeof out), eph);
	CHECK(strcmp(out, eph) == 0, "%s: ephemeral create's path %s, want %s", tag, out, eph);

	zoo_op_t ops[3];
	zoo_op_result_t res[3];
	char p0[512], p2[512];
	struct Stat s1;
	zoo_create_op_init(&ops[0], multi, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, p0, sizeof p0);
	zoo_set_op_init(&ops[1], counter, tag, strlen(tag), t->version, &s1);
	zoo_create_op_init(&ops[2], seqp, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT_SEQUENTIAL, p2, sizeof p2);
	ZCALL(zoo_multi(zh, 3, ops, res), "multi");
	for (int i = 0; i < 3; i++)
		ZCALL(res[i].err, "an op of the multi");
	snprintf(want, sizeof want, "%s%010d", seqp, t->seq);
	CHECK(strcmp(p0, multi) == 0, "%s: multi's create: %s, want %s", tag, p0, multi);
	CHECK(s1.version == t->version + 1, "%s: multi's set: version %d, want %d", tag, s1.version, t->version + 1);
	CHECK(strcmp(p2, want) == 0, "%s: multi's sequential create: %s, want %s", tag, p2, want);
	t->version++;
	t->seq++;

	char buf[64];
	int len = sizeof buf - 1;
	ZCALL(zoo_get(zh, counter, 0, buf, &len, &st), "get of the counter");
	buf[len < 0 ? 0 : len] = 0;
	CHECK(strcmp(buf, tag) == 0 && st.version == t->version, "%s: the counter read back: %s version %d, want %s version %d",
	      tag, buf, st.version, tag, t->version);
	struct sess *readers[2] = {t->s, t->w};
	const char *who[2] = {"this session", "another session"};
	for (int r = 0; r < 2; r++) {
		zhandle_t *rz = readers[r]->zh;
		if (zsync(rz, t->base) < 0)
			return -1;
		ZCALL(zoo_exists(rz, plain, 0, &st), plain);
		ZCALL(zoo_exists(rz, multi, 0, &st), multi);
		ZCALL(zoo_exists(rz, eph, 0, &st), eph);
		CHECK(st.ephemeralOwner == sid, "%s: %s's owner as %s sees it: %#llx, want %#llx", tag, eph, who[r],
		      (long long)st.ephemeralOwner, (long long)sid);
		struct String_vector kids;
		snprintf(out, sizeof out, "%s/seq", t->base);
		ZCALL(zoo_get_children(rz, out, 0, &kids), "children of seq");
		int bad = kids.count != t->seq;
		qsort(kids.data, kids.count, sizeof kids.data[0], cmpstr);
		for (int i = 0; !bad && i < kids.count; i++) {
			snprintf(want, sizeof want, "s-%010d", i);
			bad = strcmp(kids.data[i], want) != 0;
		}
		int n = kids.count;
		deallocate_String_vector(&kids);
		CHECK(!bad, "%s: %d sequential nodes as %s sees them, want s-0000000000 ... s-%010d", tag, n, who[r], t->seq - 1);
	}

	struct sess *s = t->s;
	pthread_mutex_lock(&s->mu);
	s->nev = 0;
	pthread_mutex_unlock(&s->mu);
	int rc = zoo_wexists(zh, fired, node_watcher, s, &st);
	CHECK(rc == ZNONODE, "%s: exists of %s: %s", tag, fired, zerror(rc));
	len = sizeof buf;
	ZCALL(zoo_wget(zh, counter, node_watcher, s, buf, &len, &st), "get of the counter with a watch");
	ZCALL(create(t->w->zh, fired, ZOO_PERSISTENT, NULL, 0), fired);
	ZCALL(zoo_set2(t->w->zh, counter, "w", 1, t->version, &st), "another session's set of the counter");
	t->version++;
	struct timespec ts;
	int err = 0;
	deadline(&ts);
	pthread_mutex_lock(&s->mu);
	while (s->nev < 2 && err != ETIMEDOUT)
		err = pthread_cond_timedwait(&s->cv, &s->mu, &ts);
	int nev = s->nev;
	int ok = nev >= 2 && s->ev[0].type == ZOO_CREATED_EVENT && strcmp(s->ev[0].path, fired) == 0 &&
		 s->ev[1].type == ZOO_CHANGED_EVENT && strcmp(s->ev[1].path, counter) == 0;
	pthread_mutex_unlock(&s->mu);
	CHECK(nev >= 2, "%s: %d of the 2 watch events within %d s", tag, nev, WAIT_S);
	CHECK(ok, "%s: the watch events: %d %s, %d %s; want created %s, changed %s", tag, s->ev[0].type, s->ev[0].path,
	      s->ev[1].type, s->ev[1].path, fired, counter);
	return 0;
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static void test(const char *name, int (*fn)(const char *servers), const char *servers)
{
	long long t0 = now_ms();
	why[0] = 0;
	if (fn(servers) == 0) {
		passed++;
		printf("ok   %s (%lld ms)\n", name, now_ms() - t0);
	} else {
		failed++;
		printf("FAIL %s: %s\n", name, why);
	}
	fflush(stdout);
}

/* nth is the n-th address of servers, or every address but it (but). */
static void nth(const char *servers, int n, int but, char *out, size_t size)
{
	char copy[1024], *save = NULL;
	snprintf(copy, sizeof copy, "%s", servers);
	out[0] = 0;
	int i = 0;
	for (char *a = strtok_r(copy, ",", &save); a; a = strtok_r(NULL, ",", &save), i++) {
		if ((i == n) != but) {
			size_t l = strlen(out);
			snprintf(out + l, size - l, "%s%s", l ? "," : "", a);
		}
	}
}

/* create /c if it is not there */
static int ensure_root(zhandle_t *zh)
{
	int rc = create(zh, "/c", ZOO_PERSISTENT, NULL, 0);
	CHECK(rc == ZOK || rc == ZNODEEXISTS, "create /c: %s", zerror(rc));
	return 0;
}

/* delete_all deletes path and everything below it. */
static int delete_all(zhandle_t *zh, const char *path)
{
	struct String_vector kids;
	char p[1024];
	int rc = zoo_get_children(zh, path, 0, &kids);
	if (rc == ZNONODE)
		return 0;
	ZCALL(rc, path);
	for (int i = 0; i < kids.count && rc == 0; i++) {
		snprintf(p, sizeof p, "%s/%s", path, kids.data[i]);
		rc = delete_all(zh, p);
	}
	deallocate_String_vector(&kids);
	if (rc < 0)
		return -1;
	rc = zoo_delete(zh, path, -1);
	CHECK(rc == ZOK || rc == ZNONODE, "delete %s: %s", path, zerror(rc));
	return 0;
}

static int drops(const char *servers, int n, const char *base)
{
	struct sess s, w;
	struct tally t;
	char one[256], others[1024], tag[32];
	int rc = -1;
	/* The session on the first server alone; the other on the rest, so
	   that the socket to drop is the only one to that server. */
	nth(servers, 0, 0, one, sizeof one);
	nth(servers, 0, 1, others, sizeof others);
	memset(&w, 0, sizeof w);
	if (sess_open(&s, one, NULL) < 0)
		return -1;
	if (sess_open(&w, others[0] ? others : one, NULL) < 0 || ensure_root(s.zh) < 0 || tally_init(&t, &s, &w, base) < 0 ||
	    round_(&t, "before") < 0)
		goto out;
	for (int i = 0; i < n; i++) {
		snprintf(tag, sizeof tag, "drop%d", i);
		if (drop(&s) < 0 || round_(&t, tag) < 0)
			goto out;
	}
	rc = 0;
out:
	sess_close(&w);
	sess_close(&s);
	return rc;
}

static int t_drop(const char *servers)
{
	return drops(servers, 1, "/c/drop");
}

static int t_drops(const char *servers)
{
	return drops(servers, DROPS, "/c/drops");
}

/* kill asks the harness to kill the server at addr. */
static int kill_server(const char *addr)
{
	const char *ctl = getenv("COMPAT_CTL");
	CHECK(ctl && *ctl, "COMPAT_CTL is not set: the harness kills servers");
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		execl(ctl, ctl, "kill", addr, (char *)NULL);
		_exit(127);
	}
	int status;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s kill %s failed", ctl, addr);
	return 0;
}

static int t_kill(const char *servers)
{
	struct sess s, w;
	struct tally t;
	char first[128], now[128], others[1024];
	int rc = -1;
	memset(&w, 0, sizeof w);
	if (sess_open(&s, servers, NULL) < 0)
		return -1;
	current(&s, first, sizeof first);
	/* The other session on the servers that stay. */
	others[0] = 0;
	for (int i = 0; i < 8; i++) {
		char a[128];
		nth(servers, i, 0, a, sizeof a);
		if (a[0] && strcmp(a, first) != 0)
			snprintf(others + strlen(others), sizeof others - strlen(others), "%s%s", others[0] ? "," : "", a);
	}
	int64_t id = zoo_client_id(s.zh)->client_id;
	if (sess_open(&w, others, NULL) < 0 || ensure_root(s.zh) < 0 || tally_init(&t, &s, &w, "/c/kill") < 0 ||
	    round_(&t, "before") < 0)
		goto out;
	int before = connected_count(&s);
	if (kill_server(first) < 0 || await_connected(&s, before, "after the kill") < 0)
		goto out;
	current(&s, now, sizeof now);
	if (strcmp(now, first) == 0) {
		fail("still on the killed server %s", first);
		goto out;
	}
	if (zoo_client_id(s.zh)->client_id != id) {
		fail("another session after the kill");
		goto out;
	}
	rc = round_(&t, "after");
out:
	sess_close(&w);
	sess_close(&s);
	return rc;
}

/* crash: a session on the first server, WRITES sets, its id, password,
   start time and number of requests written to file; the process then
   exits without closing the session, as a crashed program would. */
static int crash(const char *servers, const char *file, time_t t0)
{
	struct sess s;
	char one[256];
	struct Stat st;
	int requests = 0;
	nth(servers, 0, 0, one, sizeof one);
	if (sess_open(&s, one, NULL) < 0 || ensure_root(s.zh) < 0)
		return -1;
	requests++;
	ZCALL(create(s.zh, "/c/resume", ZOO_PERSISTENT, NULL, 0), "/c/resume");
	ZCALL(create(s.zh, "/c/resume/p", ZOO_PERSISTENT, NULL, 0), "/c/resume/p");
	requests += 2;
	for (int i = 0; i < WRITES; i++) {
		char data[16];
		snprintf(data, sizeof data, "%d", i);
		ZCALL(zoo_set2(s.zh, "/c/resume/p", data, strlen(data), i, &st), "set of /c/resume/p");
		requests++;
	}
	const clientid_t *cid = zoo_client_id(s.zh);
	FILE *f = fopen(file, "w");
	CHECK(f != NULL, "%s: %s", file, strerror(errno));
	fprintf(f, "%lld %lld %d ", (long long)cid->client_id, (long long)t0, requests);
	for (int i = 0; i < 16; i++)
		fprintf(f, "%02x", (unsigned char)cid->passwd[i]);
	fprintf(f, "\n");
	CHECK(fclose(f) == 0, "%s: %s", file, strerror(errno));
	fflush(stdout);
	_exit(0);
}

static int resume(const char *servers, const char *file, time_t t0)
{
	long long id, first;
	int requests;
	char hex[33];
	FILE *f = fopen(file, "r");
	CHECK(f != NULL, "%s: %s", file, strerror(errno));
	int n = fscanf(f, "%lld %lld %d %32s", &id, &first, &requests, hex);
	fclose(f);
	CHECK(n == 4 && strlen(hex) == 32, "%s: not what crash wrote", file);
	/* This process's xids start at its start time in seconds; the first
	   one's ran from its start time for requests+1 xids. */
	CHECK(t0 - first + 1 < requests,
	      "this process started %lld s after the one it resumes, which sent %d requests: its xids do not repeat that one's",
	      (long long)(t0 - first), requests);
	clientid_t cid;
	cid.client_id = id;
	for (int i = 0; i < 16; i++) {
		unsigned v;
		sscanf(hex + 2 * i, "%2x", &v);
		cid.passwd[i] = (char)v;
	}
	struct sess s, w;
	struct tally t;
	struct Stat st;
	int rc = -1;
	memset(&w, 0, sizeof w);
	if (sess_open(&s, servers, &cid) < 0)
		return -1;
	if (zoo_client_id(s.zh)->client_id != id) {
		fail("resuming session %#llx: got %#llx", id, (long long)zoo_client_id(s.zh)->client_id);
		goto out;
	}
	if (sess_open(&w, servers, NULL) < 0 || tally_init(&t, &s, &w, "/c/resume/t") < 0 || round_(&t, "resumed") < 0)
		goto out;
	char buf[16];
	int len = sizeof buf - 1;
	int zrc = zoo_get(s.zh, "/c/resume/p", 0, buf, &len, &st);
	if (zrc != ZOK || st.version != WRITES) {
		fail("/c/resume/p: %s, version %d, want %d (the first process's %d sets)", zerror(zrc), st.version, WRITES, WRITES);
		goto out;
	}
	zrc = zoo_set2(s.zh, "/c/resume/p", "after", 5, WRITES, &st);
	if (zrc != ZOK || st.version != WRITES + 1) {
		fail("a set of /c/resume/p after the resume: %s, version %d", zerror(zrc), st.version);
		goto out;
	}
	rc = 0;
out:
	sess_close(&w);
	sess_close(&s);
	return rc;
}

int main(int argc, char **argv)
{
	time_t t0 = time(NULL);
	if (argc < 3) {
		fprintf(stderr, "usage: %s SERVERS checks | crash FILE | resume FILE\n", argv[0]);
		return 2;
	}
	zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
	const char *servers = argv[1], *mode = argv[2];
	if (strcmp(mode, "checks") == 0) {
		test("socket dropped, the same server: writes, creates, multi and watches after", t_drop, servers);
		test("20 dropped sockets in a row, each followed by writes, creates, multi and watches", t_drops, servers);
		/* Last: it kills a server, which the harness restarts after the suite. */
		test("the session's server killed: writes, creates, multi and watches after", t_kill, servers);
		struct sess s;
		/* After a sync, its server lists every node below /c. */
		if (sess_open(&s, servers, NULL) < 0 || zsync(s.zh, "/c") < 0 || delete_all(s.zh, "/c") < 0) {
			printf("FAIL cleanup: deleting /c: %s\n", why);
			failed++;
		}
		sess_close(&s);
		return failed ? 1 : 0;
	}
	if (argc == 4 && strcmp(mode, "crash") == 0) {
		crash(servers, argv[3], t0);
		fprintf(stderr, "crash: %s\n", why);
		return 1;
	}
	if (argc == 4 && strcmp(mode, "resume") == 0) {
		long long ms = now_ms();
		if (resume(servers, argv[3], t0) < 0) {
			printf("FAIL a new process resuming the session after %d writes: writes, creates, multi and watches: %s\n", WRITES,
			       why);
			return 1;
		}
		printf("ok   a new process resuming the session after %d writes: writes, creates, multi and watches (%lld ms)\n", WRITES,
		       now_ms() - ms);
		return 0;
	}
	fprintf(stderr, "usage: %s SERVERS checks | crash FILE | resume FILE\n", argv[0]);
	return 2;
}
