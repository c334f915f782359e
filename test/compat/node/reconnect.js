'use strict';
// The node-reconnect suite of make compat: node-zookeeper-client 1.1.3
// (npm), unchanged, through reconnects of its session (issue 35), against
// the cluster given by COMPAT_SERVERS. node_reconnect.sh installs the
// client and runs this with NODE_PATH pointing at it.
//
//   COMPAT_SERVERS=h1:p1,h2:p2,h3:p3 COMPAT_CTL=... node reconnect.js [NAME...]
//   node reconnect.js --first SERVER FILE   (the first process of the resume check)
//
// The client numbers its requests per client object, from 0, and goes on
// across its reconnects; a new object resuming a session (createClient's
// sessionId and sessionPassword, as a restarted program does) starts from
// 0 again. After each reconnect (a dropped connection to the same server,
// 20 in a row, the session's server killed, the session resumed by a new
// process after the first one's 31 writes) the same round runs:
// version-checked sets, a plain, a sequential and an ephemeral create, a
// multi, everything read back from this session and another, and watches
// set after the reconnect that must fire. The resumed session makes 30
// sets, then a create at xid 30, where the first process made its last
// set: it must create. It prints "ok NAME" or "FAIL NAME: why" per check
// and exits 1 if any failed. Every wait is bounded (WAIT_MS). Everything it
// creates is under /node.
const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');
const os = require('os');
const zookeeper = require('node-zookeeper-client');

const { CreateMode } = zookeeper;
const WAIT_MS = 30000;
const TIMEOUT = 15000; // session timeout
const DROPS = 20;
const WRITES = 30;
const SERVERS = process.env.COMPAT_SERVERS || '';
const ADDRS = SERVERS.split(',').filter((a) => a);

class Failure extends Error {}

function that(cond, msg) {
  if (!cond) {
    throw new Failure(msg);
  }
}

function eq(want, got, what) {
  const w = JSON.stringify(want);
  const g = JSON.stringify(got);
  if (w !== g) {
    throw new Failure(`${what}: want ${w}, got ${g}`);
  }
}

/** call runs fn(...args, callback) and resolves with the callback's results. */
function call(fn, ...args) {
  return new Promise((resolve, reject) => {
    fn(...args, (err, ...res) => (err ? reject(err) : resolve(res)));
  });
}

/** until polls cond until it holds, for at most WAIT_MS. */
async function until(what, cond) {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const last = await cond();
    if (last === true) {
      return;
    }
    if (Date.now() > deadline) {
      throw new Failure(`not within ${WAIT_MS} ms: ${what}${last ? ` (${last})` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A client whose states are kept in order, so that a reconnect can be
 * waited for: DISCONNECTED, then SYNC_CONNECTED.
 */
class Session {
  constructor(hosts, options) {
    this.states = [];
    this.waiters = [];
    // spinDelay: the client waits up to this long before it tries a
    // server it has just tried (its only one, in the drop checks).
    this.c = zookeeper.createClient(hosts, { sessionTimeout: TIMEOUT, spinDelay: 100, ...options });
    this.c.on('state', (s) => {
      this.states.push(s.name);
      this.waiters.forEach((w) => w());
    });
  }

  static async open(hosts, options) {
    const s = new Session(hosts, options);
    s.c.connect();
    await s.state('SYNC_CONNECTED', 0, `connected to ${hosts}`);
    return s;
  }

  /** state waits for the state at or after index from; the index after it. */
  state(name, from, what) {
    return new Promise((resolve, reject) => {
      const check = () => {
        const i = this.states.indexOf(name, from);
        if (i >= 0) {
          done();
          resolve(i + 1);
        } else if (this.states.indexOf('EXPIRED', from) >= 0) {
          done();
          reject(new Failure(`${what}: the session expired`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Failure(`no ${name} within ${WAIT_MS} ms: ${what}; states: ${this.states.slice(from)}`));
      }, WAIT_MS);
      const done = () => {
        clearTimeout(timer);
        this.waiters = this.waiters.filter((w) => w !== check);
      };
      this.waiters.push(check);
      check();
    });
  }

  /** reconnect marks the states so far; its wait() waits for DISCONNECTED, then SYNC_CONNECTED, after them. */
  reconnect(what) {
    const from = this.states.length;
    return { wait: async () => this.state('SYNC_CONNECTED', await this.state('DISCONNECTED', from, what), what) };
  }

  /** peer is the address of the server the client is connected to. */
  peer() {
    const s = this.c.connectionManager.socket;
    return `${s.remoteAddress}:${s.remotePort}`;
  }

  /** drop destroys the client's socket and waits until it has connected again, to the same server. */
  async drop() {
    const addr = this.peer();
    const id = this.c.getSessionId().toString('hex');
    const r = this.reconnect('the dropped connection');
    this.c.connectionManager.socket.destroy();
    await r.wait();
    eq(addr, this.peer(), 'server after the dropped connection');
    eq(id, this.c.getSessionId().toString('hex'), 'session after the dropped connection');
  }

  close() {
    this.c.close();
  }
}

const create = (c, p, mode) => call(c.create.bind(c), p, Buffer.alloc(0), mode || CreateMode.PERSISTENT).then((r) => r[0]);
const setData = (c, p, data, version) => call(c.setData.bind(c), p, Buffer.from(data), version).then((r) => r[0]);
const exists = (c, p, watcher) => call(c.exists.bind(c), p, ...(watcher ? [watcher] : [])).then((r) => r[0]);
const getData = (c, p, watcher) => call(c.getData.bind(c), p, ...(watcher ? [watcher] : []));
const children = (c, p) => call(c.getChildren.bind(c), p).then((r) => r[0]);

/**
 * One session's writes below base, counted, so that every round can check
 * that each applied exactly once. w is another session, which reads back
 * and makes the changes that fire this one's watches. The client has no
 * sync: the other session's reads are retried until they see the writes.
 */
class Tally {
  constructor(c, w, base) {
    Object.assign(this, { c, w, base, version: 0, seq: 0 });
  }

  async init() {
    await create(this.c, this.base);
    await create(this.c, `${this.base}/counter`);
    await create(this.c, `${this.base}/seq`);
    return this;
  }

  seqName() {
    return `${this.base}/seq/s-${String(this.seq).padStart(10, '0')}`;
  }

  /** round: sets, creates (plain, sequential, ephemeral), a multi and two watches, each checked. */
  async round(tag) {
    const { c, w, base } = this;
    const counter = `${base}/counter`;
    const [plain, eph, multi, fired] = ['', '-eph', '-multi', '-w'].map((s) => `${base}/${tag}${s}`);
    const sid = c.getSessionId().toString('hex');
    for (let i = 0; i < 3; i++) {
      const st = await setData(c, counter, `${tag}-${i}`, this.version);
      this.version++;
      eq(this.version, st.version, `${tag}: the counter's version after a set`);
    }
    eq(plain, await create(c, plain), `${tag}: plain create's path`);
    eq(this.seqName(), await create(c, `${base}/seq/s-`, CreateMode.PERSISTENT_SEQUENTIAL), `${tag}: sequential create's path`);
    this.seq++;
    eq(eph, await create(c, eph, CreateMode.EPHEMERAL), `${tag}: ephemeral create's path`);
    const t = c.transaction();
    t.create(multi, Buffer.alloc(0));
    t.setData(counter, Buffer.from(tag), this.version); // (its version 0 would mean any: never 0 here)
    t.create(`${base}/seq/s-`, Buffer.alloc(0), CreateMode.PERSISTENT_SEQUENTIAL);
    const [res] = await call(t.commit.bind(t));
    eq(multi, res[0].path, `${tag}: multi's create`);
    eq(this.version + 1, res[1].stat && res[1].stat.version, `${tag}: multi's set`);
    eq(this.seqName(), res[2].path, `${tag}: multi's sequential create`);
    this.version++;
    this.seq++;

    const [data, st] = await getData(c, counter);
    eq([tag, this.version], [data.toString(), st.version], `${tag}: the counter read back`);
    const want = Array.from({ length: this.seq }, (_, i) => `s-${String(i).padStart(10, '0')}`);
    for (const [who, s] of [['this session', c], ['another session', w]]) {
      await until(`${tag}: ${who} sees the round's writes`, async () => {
        for (const p of [plain, multi]) {
          if (!(await exists(s, p))) {
            return `${p} is not there`;
          }
        }
        const es = await exists(s, eph);
        if (!es || es.ephemeralOwner.toString('hex') !== sid) {
          return `${eph}: ${es ? `owner ${es.ephemeralOwner.toString('hex')}, not ${sid}` : 'not there'}`;
        }
        const kids = (await children(s, `${base}/seq`)).sort();
        return JSON.stringify(kids) === JSON.stringify(want) || `sequential nodes ${kids}`;
      });
    }

    const events = [];
    const watcher = (e) => events.push(`${e.getName()} ${e.getPath()}`);
    that(!(await exists(c, fired, watcher)), `${tag}: ${fired} exists already`);
    await getData(c, counter, watcher);
    await create(w, fired);
    await setData(w, counter, 'w', this.version);
    this.version++;
    await until(`${tag}: the two watch events (${events})`, async () => events.length >= 2);
    eq([`NODE_CREATED ${fired}`, `NODE_DATA_CHANGED ${counter}`], events, `${tag}: the events of the watches set after the reconnect`);
  }
}

async function drops(base, n) {
  const s = await Session.open(ADDRS[0]);
  const w = await Session.open(SERVERS);
  try {
    const t = await new Tally(s.c, w.c, base).init();
    await t.round('before');
    for (let i = 0; i < n; i++) {
      await s.drop();
      await t.round(n === 1 ? 'after' : `drop${i}`);
    }
  } finally {
    w.close();
    s.close();
  }
}

/**
 * The first process of the resume check: a session on server, a create
 * and WRITES sets (xids 0 to WRITES), its id, password and next xid
 * written to file, then an exit without closing the session.
 */
async function first(server, file) {
  const s = await Session.open(server);
  await create(s.c, '/node/resume/p');
  for (let i = 0; i < WRITES; i++) {
    await setData(s.c, '/node/resume/p', String(i), i);
  }
  fs.writeFileSync(file, JSON.stringify({
    id: s.c.getSessionId().toString('hex'),
    password: s.c.getSessionPassword().toString('hex'),
    xid: s.c.connectionManager.xid,
  }));
  process.exit(0);
}

async function resume() {
  const w = await Session.open(SERVERS);
  let s = null;
  const dir = fs.mkdtempSync(path.join(process.env.COMPAT_TMP || os.tmpdir(), 'node-resume-'));
  try {
    await create(w.c, '/node/resume');
    const file = path.join(dir, 'session.json');
    execFileSync(process.execPath, [__filename, '--first', ADDRS[0], file], { stdio: ['ignore', 'inherit', 'inherit'], timeout: WAIT_MS });
    const old = JSON.parse(fs.readFileSync(file, 'utf8'));
    eq(WRITES + 1, old.xid, "the first process's next xid");
    s = await Session.open(SERVERS, { sessionId: Buffer.from(old.id, 'hex'), sessionPassword: Buffer.from(old.password, 'hex') });
    eq(old.id, s.c.getSessionId().toString('hex'), "the resumed session's id");
    const c = s.c;
    for (let i = 0; i < WRITES; i++) {
      const st = await setData(c, '/node/resume/p', `again ${i}`, WRITES + i);
      eq(WRITES + i + 1, st.version, `/node/resume/p's version after the resumed session's set ${i}`);
    }
    eq(WRITES, c.connectionManager.xid, "the resumed client's next xid (the first process's last set's)");
    eq('/node/resume/new-node', await create(c, '/node/resume/new-node'), `the create at xid ${WRITES}`);
    that(await exists(c, '/node/resume/new-node'), `the create at xid ${WRITES} was answered, but /node/resume/new-node does not exist`);
    const t = await new Tally(c, w.c, '/node/resume/t').init();
    await t.round('resumed');
  } finally {
    if (s) {
      s.close();
    }
    w.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function kill() {
  const s = await Session.open(SERVERS);
  const firstAddr = s.peer();
  // The other session on the servers that stay.
  const w = await Session.open(ADDRS.filter((a) => a !== firstAddr).join(','));
  try {
    const id = s.c.getSessionId().toString('hex');
    const t = await new Tally(s.c, w.c, '/node/kill').init();
    await t.round('before');
    const ctl = process.env.COMPAT_CTL;
    that(ctl, 'COMPAT_CTL is not set: the harness kills servers');
    const r = s.reconnect(`the kill of ${firstAddr}`);
    execFileSync(ctl, ['kill', firstAddr], { stdio: ['ignore', 'inherit', 'inherit'], timeout: WAIT_MS });
    await r.wait();
    that(s.peer() !== firstAddr, `still on the killed server ${firstAddr}`);
    eq(id, s.c.getSessionId().toString('hex'), 'session after the kill');
    await t.round('after');
  } finally {
    w.close();
    s.close();
  }
}

/**
 * deleteAll deletes p and everything below it. The client has no sync, so
 * its server may list a node's children before it has applied another
 * session's last creates, and the delete then finds the node not empty:
 * it lists again, until the deadline.
 */
async function deleteAll(c, p) {
  const code = (e) => e && typeof e.getCode === 'function' && e.getCode();
  await until(`${p} deleted`, async () => {
    let kids;
    try {
      kids = await children(c, p);
    } catch (e) {
      if (code(e) === zookeeper.Exception.NO_NODE) {
        return true;
      }
      throw e;
    }
    for (const k of kids) {
      await deleteAll(c, `${p}/${k}`);
    }
    try {
      await call(c.remove.bind(c), p, -1);
    } catch (e) {
      if (code(e) === zookeeper.Exception.NOT_EMPTY) {
        return 'not empty yet';
      }
      if (code(e) !== zookeeper.Exception.NO_NODE) {
        throw e;
      }
    }
    return true;
  });
}

let passed = 0;
let failed = 0;

async function test(name, fn) {
  const only = process.argv.slice(2);
  if (only.length > 0 && !only.some((o) => name.includes(o))) {
    return;
  }
  const t0 = Date.now();
  try {
    await fn();
    passed++;
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e instanceof Failure ? e.message : String(e)}`);
    console.error(`FAIL ${name}:`, e);
  }
}

async function main() {
  if (process.argv[2] === '--first') {
    await first(process.argv[3], process.argv[4]);
    return 0;
  }
  if (ADDRS.length === 0) {
    console.error('COMPAT_SERVERS: the client addresses of the cluster, comma-separated');
    return 2;
  }
  const admin = await Session.open(SERVERS);
  await create(admin.c, '/node');
  admin.close();
  await test('connection dropped, the same server: writes, creates, multi and watches after', () => drops('/node/drop', 1));
  await test(`${DROPS} dropped connections in a row, each followed by writes, creates, multi and watches`, () => drops('/node/drops', DROPS));
  await test(`a new client resuming the session after ${WRITES + 1} writes: writes, and a create at xid ${WRITES}, creates, multi and watches`, resume);
  // Last: it kills a server, which the harness restarts after the suite.
  await test('the session\'s server killed: writes, creates, multi and watches after', kill);
  const cleanup = await Session.open(SERVERS);
  await deleteAll(cleanup.c, '/node');
  cleanup.close();
  console.log(`node-reconnect: ${passed} passed, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

main().then((rc) => process.exit(rc), (e) => {
  console.log(`FAIL node-reconnect: ${e instanceof Failure ? e.message : String(e)}`);
  console.error(e);
  process.exit(1);
});
