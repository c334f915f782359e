// Package sasltest is a DIGEST-MD5 client for tests (RFC 2831, qop auth),
// written from the RFC apart from the server in package sasl, so that the
// two check each other; the goldens in sasl's tests pin both to ZooKeeper's
// own server and clients. It is not for production: it trusts what the
// challenge says and checks only what a test needs.
package sasltest

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// Client is what a client sends in a DIGEST-MD5 response.
type Client struct {
	User, Password string
	// Realm is the realm hashed and sent (default: the challenge's).
	Realm string
	// NoRealm leaves the realm out of the response (and hashes "").
	NoRealm bool
	// URI is the digest-uri (default "zookeeper/zk-sasl-md5").
	URI string
	// Cnonce is the client's nonce (default a fixed one: tests want
	// repeatable bytes).
	Cnonce string
	// NC is the nonce count as sent (default "00000001").
	NC string
	// Qop is the qop sent (default "auth").
	Qop string
	// Authzid, when set, is sent and hashed.
	Authzid string
	// Charset, when set, is sent as charset=...; the challenge's
	// charset=utf-8 is not followed otherwise (pure-sasl sends none).
	Charset string
}

var directive = regexp.MustCompile(`([a-z-]+)=("([^"]*)"|[^,]*)`)

// Challenge returns the directives of a challenge (or of the server's
// final token, rspauth=...).
func Challenge(tok []byte) map[string]string {
	out := make(map[string]string)
	for _, m := range directive.FindAllStringSubmatch(string(tok), -1) {
		v := m[2]
		if strings.HasPrefix(v, `"`) {
			v = m[3]
		}
		out[m[1]] = v
	}
	return out
}

func h(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// digest computes the response value (a2 prefix "AUTHENTICATE") or the
// rspauth value (a2 prefix "").
func (c *Client) digest(nonce, a2prefix string) string {
	sum := md5.Sum([]byte(c.User + ":" + c.Realm + ":" + c.Password))
	a1 := string(sum[:]) + ":" + nonce + ":" + c.Cnonce
	if c.Authzid != "" {
		a1 += ":" + c.Authzid
	}
	a2 := a2prefix + ":" + c.URI
	return h(h(a1) + ":" + nonce + ":" + c.NC + ":" + c.Cnonce + ":" + c.Qop + ":" + h(a2))
}

func (c *Client) defaults(challenge map[string]string) {
	if c.Realm == "" && !c.NoRealm {
		c.Realm = challenge["realm"]
	}
	if c.URI == "" {
		c.URI = "zookeeper/zk-sasl-md5"
	}
	if c.Cnonce == "" {
		c.Cnonce = "OA6MHXh6VqTrRk"
	}
	if c.NC == "" {
		c.NC = "00000001"
	}
	if c.Qop == "" {
		c.Qop = "auth"
	}
}

// Respond returns the digest-response to a challenge.
func (c *Client) Respond(challenge []byte) []byte {
	ch := Challenge(challenge)
	c.defaults(ch)
	var b strings.Builder
	if c.Charset != "" {
		fmt.Fprintf(&b, "charset=%s,", c.Charset)
	}
	fmt.Fprintf(&b, `username="%s",`, c.User)
	if !c.NoRealm {
		fmt.Fprintf(&b, `realm="%s",`, c.Realm)
	}
	fmt.Fprintf(&b, `nonce="%s",nc=%s,cnonce="%s",digest-uri="%s",maxbuf=65536,response=%s,qop=%s`,
		ch["nonce"], c.NC, c.Cnonce, c.URI, c.digest(ch["nonce"], "AUTHENTICATE"), c.Qop)
	if c.Authzid != "" {
		fmt.Fprintf(&b, `,authzid="%s"`, c.Authzid)
	}
	return []byte(b.String())
}

// CheckRspauth reports whether the server's final token proves it knows the
// password, for the challenge the response answered.
func (c *Client) CheckRspauth(challenge, final []byte) error {
	want := c.digest(Challenge(challenge)["nonce"], "")
	if got := Challenge(final)["rspauth"]; got != want {
		return fmt.Errorf("sasltest: rspauth %q, want %q", got, want)
	}
	return nil
}
