package zk

import (
	"fmt"
	"math"
	"math/big"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/coordd/coordd/rpc/engine"
)

// FourLetterWords are the words coordd answers, when allowed.
var FourLetterWords = []string{"conf", "cons", "dirs", "envi", "isro", "mntr", "ruok", "srvr", "stat", "wchc", "wchp", "wchs"}

// DefaultFourLetterWords are the words answered unless configured
// otherwise: those that only report, and cheaply (ZooKeeper answers only
// srvr by default; coordd's client port listens on loopback by default, and
// tools such as kazoo ask envi to learn the server's version). wchc and
// wchp list every watch, which costs time in the size of the watch table:
// ZooKeeper warns they are expensive, and they must be asked for.
var DefaultFourLetterWords = []string{"conf", "cons", "dirs", "envi", "isro", "mntr", "ruok", "srvr", "stat", "wchs"}

// Stats are the server's figures the four-letter words report.
type Stats struct {
	// Version is coordd's build version.
	Version string
	// Mode is "leader", "follower", "observer" or "standalone".
	Mode string
	// Zxid is the last zxid applied.
	Zxid int64
	// Znodes counts the nodes, ZooKeeper's /zookeeper subtree included.
	Znodes     int64
	Ephemerals int64
	// DataSize is the sum of every node's path and data lengths.
	DataSize int64
	// Watches counts watch registrations; WatchedPaths the paths they are
	// on; WatchingSessions the sessions holding them.
	Watches, WatchedPaths, WatchingSessions int64
	// Followers and SyncedFollowers are the leader's (0 elsewhere).
	Followers, SyncedFollowers int64
	// Connections are the sessions connected to this server, over either
	// protocol; GlobalSessions the open sessions of the whole cluster.
	Connections, GlobalSessions int64
	// Received and Sent count the requests and messages of every client,
	// over either protocol (ZooKeeper's packets); Outstanding the requests
	// received and not yet answered.
	Received, Sent, Outstanding int64
	// MinLatency, AvgLatency and MaxLatency are the requests' latencies.
	MinLatency, AvgLatency, MaxLatency time.Duration
	// Config lists the server's settings for conf, in order.
	Config [][2]string
	// DataDirBytes is the size of the data directory.
	DataDirBytes int64
	// OpenFiles and MaxFiles are the process's file descriptors.
	OpenFiles, MaxFiles int64
}

// ZooKeeperVersion is the ZooKeeper protocol version coordd speaks, as the
// four-letter words report it before coordd's own (clients such as kazoo
// parse the leading numbers to decide which requests the server knows).
const ZooKeeperVersion = "3.8.4"

// fourLetterWord answers a four-letter word in plain text and ends the
// stream cleanly whatever the client sent after the word (endAnswer); the
// caller closes the connection.
func (s *Server) fourLetterWord(nc net.Conn, word string) {
	text := word + " is not executed because it is not in the whitelist.\n"
	if s.cfg.FourLetterWords[word] {
		s.log.Debug("zk: four-letter word", "word", word, "remote", nc.RemoteAddr().String())
		text = s.answer(word, nc.RemoteAddr().String())
	}
	_ = nc.SetWriteDeadline(time.Now().Add(connectTimeout))
	if _, err := nc.Write([]byte(text)); err != nil {
		return
	}
	endAnswer(nc)
}

// answer is a four-letter word's text; remote is the address of the
// connection that asked, which ZooKeeper lists and counts among the
// connections (stat, cons, srvr's and mntr's connection counts) while it
// answers.
func (s *Server) answer(word, remote string) string {
	var b strings.Builder
	st := s.cfg.Stats()
	version := fmt.Sprintf("%s-coordd-%s", ZooKeeperVersion, st.Version)
	minL, avgL, maxL := millis(st.MinLatency), millis(st.AvgLatency), millis(st.MaxLatency)
	switch word {
	case "ruok":
		return "imok"
	case "isro":
		return "rw"
	case "srvr", "stat":
		fmt.Fprintf(&b, "Zookeeper version: %s, built on coordd\n", version)
		if word == "stat" {
			b.WriteString("Clients:\n")
			s.dumpConnections(&b, remote, true)
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "Latency min/avg/max: %s/%s/%s\n", minMs(minL), avgMs(avgL), maxMs(maxL))
		fmt.Fprintf(&b, "Received: %d\nSent: %d\nConnections: %d\nOutstanding: %d\nZxid: 0x%x\nMode: %s\nNode count: %d\n",
			st.Received, st.Sent, st.Connections+1, st.Outstanding, st.Zxid, st.Mode, st.Znodes)
	case "mntr":
		kv := func(k string, v any) { fmt.Fprintf(&b, "zk_%s\t%v\n", k, v) }
		kv("version", version)
		kv("server_state", st.Mode)
		kv("avg_latency", avgMs(avgL))
		kv("max_latency", maxMs(maxL))
		kv("min_latency", minMs(minL))
		kv("packets_received", st.Received)
		kv("packets_sent", st.Sent)
		// The sessions connected here, as coordd_sessions_connected
		// (ZooKeeper's also counts the connection asking, as srvr does).
		kv("num_alive_connections", st.Connections)
		kv("outstanding_requests", st.Outstanding)
		kv("znode_count", st.Znodes)
		kv("watch_count", st.Watches)
		kv("ephemerals_count", st.Ephemerals)
		kv("approximate_data_size", st.DataSize)
		kv("global_sessions", st.GlobalSessions)
		kv("local_sessions", st.Connections)
		kv("open_file_descriptor_count", st.OpenFiles)
		kv("max_file_descriptor_count", st.MaxFiles)
		kv("uptime", time.Since(s.started).Milliseconds())
		if st.Mode == "leader" {
			kv("followers", st.Followers)
			kv("synced_followers", st.SyncedFollowers)
			kv("pending_syncs", 0)
		}
	case "conf":
		for _, kv := range st.Config {
			fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
		}
	case "cons":
		s.dumpConnections(&b, remote, false)
		b.WriteString("\n")
	case "envi":
		b.WriteString("Environment:\n")
		fmt.Fprintf(&b, "zookeeper.version=%s, built on coordd\n", version)
		fmt.Fprintf(&b, "coordd.version=%s\n", st.Version)
		for _, kv := range st.Config {
			fmt.Fprintf(&b, "coordd.%s=%s\n", kv[0], kv[1])
		}
	case "wchs":
		fmt.Fprintf(&b, "%d connections watching %d paths\nTotal watches:%d\n", st.WatchingSessions, st.WatchedPaths, st.Watches)
	case "wchc", "wchp":
		s.dumpWatches(&b, word == "wchp")
	case "dirs":
		fmt.Fprintf(&b, "datadir_size: %d\nlogdir_size: 0\n", st.DataDirBytes)
	}
	return b.String()
}

// millis converts a duration to ZooKeeper's milliseconds.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// dumpWatches writes ZooKeeper's wchc (by session: "0x<id>" then a tab and
// a path per line) or, byPath, its wchp (a path, then a tab and "0x<id>" per
// session), then an empty line. As ZooKeeper 3.8 and 3.9 answer them, it
// lists what ZooKeeper keeps in its data-watch table: getData and exists
// watches, and the persistent and recursive ones; a path watched only by
// getChildren is not listed. Sessions come in ascending id, paths sorted
// (ZooKeeper's order is its hash tables').
func (s *Server) dumpWatches(b *strings.Builder, byPath bool) {
	regs := s.cfg.Engine.Watches().Registrations(engine.KindData | engine.KindPersistent | engine.KindPersistentRecursive)
	if byPath {
		sort.SliceStable(regs, func(i, j int) bool { return regs[i].Path < regs[j].Path })
		for i, r := range regs {
			if i == 0 || regs[i-1].Path != r.Path {
				b.WriteString(r.Path + "\n")
			}
			fmt.Fprintf(b, "\t0x%x\n", r.Session)
		}
	} else {
		for i, r := range regs {
			if i == 0 || regs[i-1].Session != r.Session {
				fmt.Fprintf(b, "0x%x\n", r.Session)
			}
			b.WriteString("\t" + r.Path + "\n")
		}
	}
	b.WriteString("\n")
}

// minMs, avgMs and maxMs format the server's latencies (in milliseconds) as
// ZooKeeper's srvr, stat and mntr do: ZooKeeper measures each request in
// whole milliseconds, so its min and max are integers, and its average is
// a Java double rounded to 4 decimals ("0.0", "7.8333", "12.5"). coordd
// measures finer; min is rounded down and max up, so that min <= avg <= max
// holds as it does in ZooKeeper.
func minMs(v float64) string { return strconv.FormatInt(int64(math.Floor(v)), 10) }

func maxMs(v float64) string { return strconv.FormatInt(int64(math.Ceil(v)), 10) }

func avgMs(v float64) string { return javaDouble(round4(v)) }

// round4 rounds v >= 0 to 4 decimals half up, exactly as Java's
// new BigDecimal(v).setScale(4, HALF_UP).doubleValue() does (33/32 is
// 1.0313, where rounding v*1e4 in float64 could give 1.0312).
func round4(v float64) float64 {
	x := new(big.Float).SetPrec(256).SetFloat64(v)
	x.Mul(x, big.NewFloat(1e4))
	x.Add(x, big.NewFloat(0.5))
	i, _ := x.Int(nil) // v >= 0: truncation is the floor
	f, _ := new(big.Rat).SetFrac(i, big.NewInt(1e4)).Float64()
	return f
}

// javaDouble formats v as Java's Double.toString does (the shortest digits
// that identify it): at least one digit after the point, and scientific
// notation ("1.0E-4", "1.25E7") below 10^-3 and from 10^7 on.
func javaDouble(v float64) string {
	if v == 0 {
		return "0.0"
	}
	if a := math.Abs(v); a >= 1e-3 && a < 1e7 {
		s := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	mant, exp, _ := strings.Cut(strconv.FormatFloat(v, 'E', -1, 64), "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}

// dumpConnections writes a line per connection as ZooKeeper's stat (brief)
// and cons do, the one asking (remote) included:
// " /ADDR[1](queued=0,recved=N,sent=N" then, for cons and a connection with
// a session, ",sid=0x..,lop=OP,est=MS,to=MS,lcxid=0x..,lzxid=0x..,lresp=MS,
// llat=MS,minlat=MS,avglat=MS,maxlat=MS" (lcxid once a request other than a
// ping was answered; latencies in whole milliseconds, as ZooKeeper's), then
// ")". The asking connection, with no session and interest in nothing while
// it answers, is " /ADDR[0](queued=0,recved=1,sent=0)". Sorted by address
// (ZooKeeper's order is its hash set's).
func (s *Server) dumpConnections(b *strings.Builder, remote string, brief bool) {
	type line struct{ addr, text string }
	lines := []line{{remote, fmt.Sprintf(" /%s[0](queued=0,recved=1,sent=0)\n", remote)}}
	for _, c := range s.connections() {
		var l strings.Builder
		fmt.Fprintf(&l, " /%s[1](queued=%d,recved=%d,sent=%d", c.remote, c.queued(), c.recved.Load(), c.sent.Load())
		if !brief {
			st := c.respStats()
			fmt.Fprintf(&l, ",sid=0x%x,lop=%s,est=%d,to=%d", c.sess.ID(), c.lastOp.Load(), c.established.UnixMilli(), c.timeoutMs.Load())
			if st.lastCxid >= 0 {
				fmt.Fprintf(&l, ",lcxid=0x%x", st.lastCxid)
			}
			fmt.Fprintf(&l, ",lzxid=0x%x,lresp=%d,llat=%d,minlat=%d,avglat=%d,maxlat=%d",
				st.lastZxid, st.lastResp, st.lastLat, st.minLat0(), st.avgLat(), st.maxLat)
		}
		l.WriteString(")\n")
		lines = append(lines, line{c.remote, l.String()})
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].addr < lines[j].addr })
	for _, l := range lines {
		b.WriteString(l.text)
	}
}

// connections returns the open connections, by remote address.
func (s *Server) connections() []*conn {
	s.mu.Lock()
	out := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].remote < out[j].remote })
	return out
}
