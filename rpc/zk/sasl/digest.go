package sasl

import (
	"crypto/md5"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// What ZooKeeper's server offers: Sasl.createSaslServer("DIGEST-MD5",
// "zookeeper", "zk-sasl-md5", ...), whose challenge (Java's DigestMD5Server)
// names the realm, a nonce, charset=utf-8 and algorithm=md5-sess, and no
// qop (so qop auth only: authentication, no integrity or privacy layer).
const (
	// Realm is the realm ZooKeeper's DIGEST-MD5 offers and its clients
	// hash their passwords with.
	Realm = "zk-sasl-md5"
	// DigestURI is the digest-uri its clients send: the service
	// "zookeeper" and the server name, which for DIGEST-MD5 is the realm
	// whatever the host (kazoo and the Java client both use it).
	DigestURI = "zookeeper/" + Realm
	// nonceBytes is the random bytes of a nonce (40 base64 characters, as
	// Java's are).
	nonceBytes = 30
)

// ErrAuthFailed is the error of an exchange whose client did not prove it
// knows a user's password: an unknown user or a wrong password (the two
// are not told apart).
var ErrAuthFailed = errors.New("sasl: authentication failed")

// ErrExchangeOver is the error of a token sent after the exchange ended,
// in success or in failure.
var ErrExchangeOver = errors.New("sasl: the exchange is over")

// DigestMD5 is the server's side of one DIGEST-MD5 exchange (RFC 2831,
// authentication only): the client's first token (empty, or anything: it
// is not read, as ZooKeeper does not) gets a challenge with a fresh nonce;
// its second, the digest-response, is checked against the user's password
// and answered with rspauth, which proves the server knows it too. Then
// the exchange is done, and User names the client; a failed step ends it.
// A DigestMD5 is for one goroutine.
type DigestMD5 struct {
	users Users
	rand  io.Reader

	step  int // 0: challenge next; 1: response next; 2: over
	nonce string
	user  string
	done  bool
}

// NewDigestMD5 starts an exchange against users, with nonces read from
// rand (crypto/rand.Reader; a test may give fixed bytes).
func NewDigestMD5(users Users, rand io.Reader) *DigestMD5 {
	return &DigestMD5{users: users, rand: rand}
}

// Done reports whether the client authenticated.
func (d *DigestMD5) Done() bool { return d.done }

// User is the user the client authenticated as, once Done: the username
// of its response, whatever authzid it asked for (ZooKeeper authorizes
// the authenticated name, and nothing else).
func (d *DigestMD5) User() string { return d.user }

// Step takes the client's next token and returns the server's. Any error
// ends the exchange; it wraps ErrAuthFailed, ErrMalformed or
// ErrExchangeOver.
func (d *DigestMD5) Step(token []byte) ([]byte, error) {
	switch d.step {
	case 0:
		var b [nonceBytes]byte
		if _, err := io.ReadFull(d.rand, b[:]); err != nil {
			d.step = 2
			return nil, fmt.Errorf("sasl: making a nonce: %w", err)
		}
		d.nonce = base64.StdEncoding.EncodeToString(b[:])
		d.step = 1
		return []byte(`realm="` + Realm + `",nonce="` + d.nonce + `",charset=utf-8,algorithm=md5-sess`), nil
	case 1:
		d.step = 2
		user, rspauth, err := d.check(token)
		if err != nil {
			return nil, err
		}
		d.user, d.done = user, true
		return []byte("rspauth=" + rspauth), nil
	}
	return nil, ErrExchangeOver
}

// check verifies a digest-response as Java's DigestMD5Server does, and
// returns the user and the rspauth value.
func (d *DigestMD5) check(token []byte) (user, rspauth string, err error) {
	dir, err := parseDirectives(token)
	if err != nil {
		return "", "", err
	}
	var missing []string
	for _, k := range []string{"username", "nonce", "cnonce", "nc", "digest-uri", "response"} {
		if _, ok := dir[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return "", "", fmt.Errorf("%w: no %s", ErrMalformed, strings.Join(missing, ", "))
	}
	// charset=utf-8 (which the challenge offered) says the username and
	// realm are UTF-8; without it they are ISO 8859-1.
	utf := false
	if cs, ok := dir["charset"]; ok {
		if !strings.EqualFold(string(cs), "utf-8") {
			return "", "", fmt.Errorf("%w: charset %q, not utf-8", ErrMalformed, short(string(cs)))
		}
		utf = true
	}
	text := func(k string) (string, error) {
		v := dir[k]
		if !utf {
			return latin1(v), nil
		}
		if !utf8.Valid(v) {
			return "", fmt.Errorf("%w: the %s is not UTF-8", ErrMalformed, k)
		}
		return string(v), nil
	}
	if user, err = text("username"); err != nil {
		return "", "", err
	}
	realm := ""
	if _, ok := dir["realm"]; ok {
		if realm, err = text("realm"); err != nil {
			return "", "", err
		}
		if realm != Realm {
			return "", "", fmt.Errorf("%w: realm %q, not %s", ErrMalformed, short(realm), Realm)
		}
	}
	if string(dir["nonce"]) != d.nonce {
		return "", "", fmt.Errorf("%w: not the nonce of the challenge", ErrMalformed)
	}
	if len(dir["cnonce"]) == 0 {
		return "", "", fmt.Errorf("%w: an empty cnonce", ErrMalformed)
	}
	if nc, err := strconv.ParseUint(string(dir["nc"]), 16, 32); err != nil || nc != 1 {
		return "", "", fmt.Errorf("%w: nonce count %q, not 00000001", ErrMalformed, short(string(dir["nc"])))
	}
	qop := []byte("auth")
	if q, ok := dir["qop"]; ok {
		if string(q) != "auth" {
			return "", "", fmt.Errorf("%w: qop %q, not auth (the only one offered)", ErrMalformed, short(string(q)))
		}
		qop = q
	}
	uri := dir["digest-uri"]
	if !strings.EqualFold(string(uri), DigestURI) {
		return "", "", fmt.Errorf("%w: digest-uri %q, not %s", ErrMalformed, short(string(uri)), DigestURI)
	}
	authzid, hasAuthzid := dir["authzid"]

	password, known := d.users[user]
	if !known {
		// Hash anyway, so that an unknown user costs what a known one
		// does.
		password = "\x00unknown"
	}
	// A1 = { H({username ":" realm ":" password}) ":" nonce ":" cnonce [":" authzid] }
	h := md5.New()
	h.Write(hashText(user))
	h.Write([]byte{':'})
	h.Write(hashText(realm))
	h.Write([]byte{':'})
	h.Write(hashText(password))
	a1 := h.Sum(nil)
	a1 = append(a1, ':')
	a1 = append(a1, d.nonce...)
	a1 = append(a1, ':')
	a1 = append(a1, dir["cnonce"]...)
	if hasAuthzid {
		a1 = append(a1, ':')
		a1 = append(a1, authzid...)
	}
	ha1 := hexMD5(a1)
	kd := func(a2 []byte) string {
		// KD(HEX(H(A1)), { nonce ":" nc ":" cnonce ":" qop ":" HEX(H(A2)) })
		s := make([]byte, 0, 160)
		s = append(s, ha1...)
		s = append(s, ':')
		s = append(s, d.nonce...)
		s = append(s, ':')
		s = append(s, dir["nc"]...)
		s = append(s, ':')
		s = append(s, dir["cnonce"]...)
		s = append(s, ':')
		s = append(s, qop...)
		s = append(s, ':')
		s = append(s, hexMD5(a2)...)
		return hexMD5(s)
	}
	want := kd(append([]byte("AUTHENTICATE:"), uri...))
	if subtle.ConstantTimeCompare([]byte(want), dir["response"]) != 1 || !known {
		return "", "", fmt.Errorf("%w: user %q", ErrAuthFailed, short(user))
	}
	return user, kd(append([]byte(":"), uri...)), nil
}

// hexMD5 is HEX(H(b)): MD5, in lower-case hex.
func hexMD5(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// latin1 decodes ISO 8859-1: each byte is the code point of its value.
func latin1(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		s.WriteRune(rune(c))
	}
	return s.String()
}

// hashText is how RFC 2831 (and Java) hash a username, realm or password:
// in ISO 8859-1 when every character has a code point in it, in UTF-8
// otherwise.
func hashText(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff {
			return []byte(s)
		}
		out = append(out, byte(r))
	}
	return out
}
