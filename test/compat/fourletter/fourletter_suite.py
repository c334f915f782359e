#!/usr/bin/env python3
"""The fourletter suite of make compat: the tools that ask a server's health
with a four-letter word and read the answer to the end of the stream, against
every server of the cluster given by COMPAT_SERVERS.

    COMPAT_SERVERS=h1:p1,h2:p2,h3:p3 /usr/bin/python3 fourletter_suite.py

- zktop (Debian's zktop, unchanged: its own code asks the server): sends
  "stat\\n", shuts its sending side and reads to the end; with --fix_330 it
  does not shut it. A server whose answer ends in a reset is shown
  "Unavailable".
- `echo ruok | nc HOST PORT` (netcat-openbsd), the health check of many
  deployments: "ruok\\n", the sending side left open; with -N shut. nc
  exits 0 even after a reset, and when the reset comes before it read the
  answer it prints nothing, so its output is checked.
- a plain socket sending a word and each trailer a tool may send (nothing,
  "\\n", "\\r\\n", more bytes), with and without shutting its sending side,
  reading to the end of the stream: a reset (ECONNRESET) fails the check.

A reset does not come every time, so each check asks TRIES times (default
20) and every answer must be whole and end cleanly. ZooKeeper 3.8 shuts its
output and then closes with the client's newline unread, which resets the
connection: nc loses 10-14% of its answers there, zktop now and then shows
it Unavailable. So against ZooKeeper (COMPAT_TARGET=zookeeper) a check
passes with one good answer, and the count of bad ones is printed: the
suite proves the answers' format on ZooKeeper, and on coordd that they
always arrive.

It prints "ok NAME" or "FAIL NAME: why" per check and exits 1 if any failed.
It creates nothing on the servers. Every connection has a time limit (WAIT
seconds, default 10).
"""
import os
import socket
import subprocess
import sys

WAIT = float(os.environ.get("WAIT", "10"))
TRIES = int(os.environ.get("TRIES", "20"))
ZOOKEEPER = os.environ.get("COMPAT_TARGET") == "zookeeper"
ADDRS = [a for a in os.environ.get("COMPAT_SERVERS", "").split(",") if a]

passed = 0
failed = 0


def check(name, ask, good):
    """Runs ask() TRIES times; each answer must pass good (which returns
    None, or what is wrong); against ZooKeeper, one must."""
    global passed, failed
    wrong = [w for w in (good(ask()) for _ in range(TRIES)) if w is not None]
    if ZOOKEEPER and wrong and len(wrong) < TRIES:
        print("     (ZooKeeper: %d of %d bad, e.g. %s)" % (len(wrong), TRIES, wrong[0]), flush=True)
        wrong = []
    if not wrong:
        print("ok   " + name, flush=True)
        passed += 1
    else:
        print("FAIL %s: %d of %d bad, e.g. %s" % (name, len(wrong), TRIES, wrong[0]), flush=True)
        failed += 1


def split(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def zktop_mode(addr, fix_330):
    """The mode zktop shows for addr ("Unavailable" when asking failed)."""
    sys.argv = ["zktop", "-t", str(WAIT)]
    import zktop  # parses sys.argv once, into zktop.options
    zktop.options.fix_330 = fix_330
    return zktop.ZKServer(addr, 1).mode


def nc(addr, text, shut):
    """What `printf TEXT | nc [-N] HOST PORT` prints."""
    host, port = split(addr)
    args = ["nc"] + (["-N"] if shut else []) + ["-w", str(int(WAIT)), host, str(port)]
    r = subprocess.run(args, input=text.encode(), capture_output=True, timeout=WAIT + 5)
    return r.stdout.decode(errors="replace")


def ask(addr, text, shut):
    """Sends text, shuts the sending side if shut, reads to the end of the
    stream. Returns (answer, the error that ended it or None)."""
    s = socket.create_connection(split(addr), timeout=WAIT)
    got = b""
    try:
        s.sendall(text.encode())
        if shut:
            s.shutdown(socket.SHUT_WR)
        while True:
            d = s.recv(65536)
            if not d:
                return got.decode(errors="replace"), None
            got += d
    except OSError as e:
        return got.decode(errors="replace"), e
    finally:
        s.close()


def is_srvr(out):
    return out.startswith("Zookeeper version: ") and "\nMode: " in out and out.endswith("\n")


def main():
    if not ADDRS:
        print("fourletter: COMPAT_SERVERS is the list of client addresses", file=sys.stderr)
        return 2
    for i, addr in enumerate(ADDRS, 1):
        for fix_330 in (False, True):
            check("zktop server %d%s" % (i, " --fix_330" if fix_330 else ""),
                  lambda: zktop_mode(addr, fix_330),
                  lambda m: None if m in ("leader", "follower", "standalone") else "shown " + m)

        check("echo ruok | nc server %d" % i, lambda: nc(addr, "ruok\n", False),
              lambda o: None if o == "imok" else repr(o))
        check("echo stat | nc -N server %d" % i, lambda: nc(addr, "stat\n", True),
              lambda o: None if is_srvr(o) else repr(o[:80]))
        check("printf 'srvr\\r\\n' | nc server %d" % i, lambda: nc(addr, "srvr\r\n", False),
              lambda o: None if is_srvr(o) else repr(o[:80]))

        for word, whole in (("ruok", lambda o: o == "imok"), ("srvr", is_srvr)):
            for trailer in ("", "\n", "\r\n", "\nmore bytes\n" * 100):
                for shut in (False, True):
                    def good(r, whole=whole):
                        got, err = r
                        if err is not None:
                            return "%r after %r" % (err, got[:40])
                        return None if whole(got) else repr(got[:80])
                    check("%s%s%s server %d" % (word, repr(trailer[:12]), " shut" if shut else "", i),
                          lambda: ask(addr, word + trailer, shut), good)

    print("%d ok, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
