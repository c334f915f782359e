package sasl

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/coordd/coordd/rpc/zk/sasl/sasltest"
)

// nonceRand returns a source whose bytes make exactly the given nonce (40
// base64 characters, 30 bytes), as a recorded exchange had it.
func nonceRand(t testing.TB, nonce string) *bytes.Reader {
	b, err := base64.StdEncoding.DecodeString(nonce)
	if err != nil || len(b) != nonceBytes {
		t.Fatalf("bad recorded nonce %q: %v", nonce, err)
	}
	return bytes.NewReader(b)
}

var zkUsers = Users{"super": "adminsecret", "bob": "bobsecret"}

// TestDigestMD5Golden replays exchanges recorded between ZooKeeper 3.8's
// server (Java 17's DigestMD5Server, the Server section of
// zkDocExample) and two clients: kazoo's pure-sasl (no charset, no
// authzid) and ZooKeeper's Java client (Java's DigestMD5Client: charset,
// maxbuf and authzid). coordd's challenge must be byte for byte ZooKeeper's
// for the same nonce, and its rspauth the one ZooKeeper sent.
func TestDigestMD5Golden(t *testing.T) {
	tests := []struct {
		name                     string
		first                    []byte // the client's first token
		nonce, response, rspauth string
		user                     string
	}{
		{
			name:     "kazoo (pure-sasl)",
			first:    []byte{},
			nonce:    "05zFK6cBiwg61G8JykfEEpjWVnT1fMO9aYScN3G+",
			response: `qop=auth,realm="zk-sasl-md5",username="bob",nonce="05zFK6cBiwg61G8JykfEEpjWVnT1fMO9aYScN3G+",cnonce="48987841430191237",nc=00000001,digest-uri="zookeeper/zk-sasl-md5",response=6526217d3c28a9305c5d53ba9dabf42f`,
			rspauth:  "rspauth=621df43ed7379d45e72b0ed647733089",
			user:     "bob",
		},
		{
			name:     "kazoo as super",
			first:    []byte{},
			nonce:    "cAIOlFQIuV/IO6cAKUarJCxdaRfWiKeFw/Br0dpW",
			response: `qop=auth,realm="zk-sasl-md5",username="super",nonce="cAIOlFQIuV/IO6cAKUarJCxdaRfWiKeFw/Br0dpW",cnonce="29571220025582756",nc=00000001,digest-uri="zookeeper/zk-sasl-md5",response=2ee0bfe060770370ee06d5f870e248a5`,
			rspauth:  "rspauth=72f7c5846bc657cf793b836b9eee8229",
			user:     "super",
		},
		{
			name:     "the Java client",
			first:    nil,
			nonce:    "spnpL0eZwau/o499TK6pdqKNaEu/JK3TDNhNnuI+",
			response: `charset=utf-8,username="bob",realm="zk-sasl-md5",nonce="spnpL0eZwau/o499TK6pdqKNaEu/JK3TDNhNnuI+",nc=00000001,cnonce="aQmzJq8pFZd1IO061BGuOXNG7x7c0xn6ofQtXKiS",digest-uri="zookeeper/zk-sasl-md5",maxbuf=65536,response=8a62bf1f87da85ea078f15151c8e1730,qop=auth,authzid="bob"`,
			rspauth:  "rspauth=84e118c857a4fab40257c3f10aab2db2",
			user:     "bob",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDigestMD5(zkUsers, nonceRand(t, tt.nonce))
			ch, err := d.Step(tt.first)
			if err != nil {
				t.Fatal(err)
			}
			if want := `realm="zk-sasl-md5",nonce="` + tt.nonce + `",charset=utf-8,algorithm=md5-sess`; string(ch) != want {
				t.Fatalf("challenge %q, ZooKeeper's was %q", ch, want)
			}
			if d.Done() {
				t.Fatal("done after the challenge")
			}
			final, err := d.Step([]byte(tt.response))
			if err != nil {
				t.Fatal(err)
			}
			if string(final) != tt.rspauth {
				t.Fatalf("final token %q, ZooKeeper's was %q", final, tt.rspauth)
			}
			if !d.Done() || d.User() != tt.user {
				t.Fatalf("done %v, user %q; want true, %q", d.Done(), d.User(), tt.user)
			}
			if _, err := d.Step(nil); !errors.Is(err, ErrExchangeOver) {
				t.Fatalf("a step after success: err = %v, want ErrExchangeOver", err)
			}
		})
	}
}

// TestDigestMD5 drives the server with the test client, changing one
// thing at a time from a response that succeeds.
func TestDigestMD5(t *testing.T) {
	users := Users{"bob": "bobsecret", "josé": "pässwörd", "日本": "語", "empty": ""}
	tests := []struct {
		name   string
		client sasltest.Client
		edit   func(resp []byte) []byte // applied to the client's response
		err    error                    // nil: success
		user   string
	}{
		{name: "ok", client: sasltest.Client{User: "bob", Password: "bobsecret"}, user: "bob"},
		{name: "ok with charset, authzid of another user", client: sasltest.Client{User: "bob", Password: "bobsecret", Charset: "utf-8", Authzid: "super"}, user: "bob"},
		{name: "ok without realm", client: sasltest.Client{User: "bob", Password: "bobsecret", NoRealm: true}, user: "bob"},
		{name: "ok, empty password", client: sasltest.Client{User: "empty"}, user: "empty"},
		{name: "ok, digest-uri in another case", client: sasltest.Client{User: "bob", Password: "bobsecret", URI: "ZooKeeper/ZK-SASL-MD5"}, user: "bob"},
		{name: "ok, nc without leading zeros", client: sasltest.Client{User: "bob", Password: "bobsecret", NC: "1"}, user: "bob"},
		{name: "ok, UTF-8 beyond Latin-1", client: sasltest.Client{User: "日本", Password: "語", Charset: "utf-8"}, user: "日本"},
		// Without charset the name is ISO 8859-1: the bytes of "josé" in
		// Latin-1 name josé, hashed in Latin-1 on both sides.
		{name: "ok, Latin-1 without charset", client: sasltest.Client{User: "jos\xe9", Password: "p\xe4ssw\xf6rd"}, user: "josé"},
		// pure-sasl sends UTF-8 without charset, which reads as another
		// name (as on ZooKeeper).
		{name: "UTF-8 without charset", client: sasltest.Client{User: "josé", Password: "pässwörd"}, err: ErrAuthFailed},
		{name: "wrong password", client: sasltest.Client{User: "bob", Password: "bobsecreT"}, err: ErrAuthFailed},
		{name: "unknown user", client: sasltest.Client{User: "eve", Password: "bobsecret"}, err: ErrAuthFailed},
		{name: "other realm", client: sasltest.Client{User: "bob", Password: "bobsecret", Realm: "elsewhere"}, err: ErrMalformed},
		{name: "other digest-uri", client: sasltest.Client{User: "bob", Password: "bobsecret", URI: "zookeeper/zk1.example.com"}, err: ErrMalformed},
		{name: "nonce count 2", client: sasltest.Client{User: "bob", Password: "bobsecret", NC: "00000002"}, err: ErrMalformed},
		{name: "qop auth-int", client: sasltest.Client{User: "bob", Password: "bobsecret", Qop: "auth-int"}, err: ErrMalformed},
		{name: "charset latin-1", client: sasltest.Client{User: "bob", Password: "bobsecret", Charset: "iso-8859-1"}, err: ErrMalformed},
		{name: "another nonce", client: sasltest.Client{User: "bob", Password: "bobsecret"},
			edit: func(b []byte) []byte { return bytes.Replace(b, []byte(`nonce="A`), []byte(`nonce="B`), 1) }, err: ErrMalformed},
		{name: "empty cnonce", client: sasltest.Client{User: "bob", Password: "bobsecret", Cnonce: "x"},
			edit: func(b []byte) []byte { return bytes.Replace(b, []byte(`cnonce="x"`), []byte(`cnonce=""`), 1) }, err: ErrMalformed},
		{name: "no response", client: sasltest.Client{User: "bob", Password: "bobsecret"},
			edit: func(b []byte) []byte { return bytes.Replace(b, []byte(",response="), []byte(",xresponse="), 1) }, err: ErrMalformed},
		{name: "the response in upper case", client: sasltest.Client{User: "bob", Password: "bobsecret"},
			edit: func(b []byte) []byte {
				i := bytes.Index(b, []byte("response=")) + len("response=")
				return append(append(b[:i:i], bytes.ToUpper(b[i:i+32])...), b[i+32:]...)
			}, err: ErrAuthFailed},
		{name: "username twice", client: sasltest.Client{User: "bob", Password: "bobsecret"},
			edit: func(b []byte) []byte { return append(b, `,username="super"`...) }, err: ErrMalformed},
		{name: "not UTF-8 with charset", client: sasltest.Client{User: "\xff", Password: "x", Charset: "utf-8"}, err: ErrMalformed},
		{name: "garbage", client: sasltest.Client{User: "bob"}, edit: func([]byte) []byte { return []byte("hello") }, err: ErrMalformed},
		{name: "empty", client: sasltest.Client{User: "bob"}, edit: func([]byte) []byte { return nil }, err: ErrMalformed},
		{name: "too long", client: sasltest.Client{User: "bob", Password: "bobsecret"},
			edit: func(b []byte) []byte { return append(b, ","+strings.Repeat("x", maxResponse)+"=1"...) }, err: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A nonce starting with "A" (zero bytes), so that the edits
			// above can change it.
			d := NewDigestMD5(users, bytes.NewReader(make([]byte, nonceBytes)))
			ch, err := d.Step(nil)
			if err != nil {
				t.Fatal(err)
			}
			resp := tt.client.Respond(ch)
			if tt.edit != nil {
				resp = tt.edit(resp)
			}
			final, err := d.Step(resp)
			if tt.err != nil {
				if !errors.Is(err, tt.err) || d.Done() || final != nil {
					t.Fatalf("err = %v, done %v, token %q; want %v, not done, no token", err, d.Done(), final, tt.err)
				}
				if strings.Contains(err.Error(), tt.client.Password) && tt.client.Password != "" {
					t.Fatalf("the error %q holds the password", err)
				}
				if _, err := d.Step(resp); !errors.Is(err, ErrExchangeOver) {
					t.Fatalf("a step after a failure: err = %v, want ErrExchangeOver", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !d.Done() || d.User() != tt.user {
				t.Fatalf("done %v, user %q; want true, %q", d.Done(), d.User(), tt.user)
			}
			if err := tt.client.CheckRspauth(ch, final); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDigestMD5Nonces: every exchange has its own nonce, and a failing
// random source fails the exchange rather than reuse one.
func TestDigestMD5Nonces(t *testing.T) {
	seen := make(map[string]bool)
	for range 100 {
		ch, err := NewDigestMD5(zkUsers, rand.Reader).Step(nil)
		if err != nil {
			t.Fatal(err)
		}
		n := sasltest.Challenge(ch)["nonce"]
		if len(n) != 40 || seen[n] {
			t.Fatalf("nonce %q: length %d, seen before %v", n, len(n), seen[n])
		}
		seen[n] = true
	}
	d := NewDigestMD5(zkUsers, iotest.ErrReader(errors.New("no entropy")))
	if _, err := d.Step(nil); err == nil {
		t.Fatal("no error from a failing random source")
	}
	if _, err := d.Step(nil); !errors.Is(err, ErrExchangeOver) {
		t.Fatalf("after a failed challenge: err = %v, want ErrExchangeOver", err)
	}
}

// BenchmarkDigestMD5 is one whole exchange on the server's side: the
// challenge (a nonce from crypto/rand) and the response checked.
func BenchmarkDigestMD5(b *testing.B) {
	c := sasltest.Client{User: "bob", Password: "bobsecret", Charset: "utf-8"}
	d := NewDigestMD5(zkUsers, rand.Reader)
	ch, err := d.Step(nil)
	if err != nil {
		b.Fatal(err)
	}
	nonce := sasltest.Challenge(ch)["nonce"]
	resp := c.Respond(ch)
	b.ReportAllocs()
	for b.Loop() {
		d := NewDigestMD5(zkUsers, nonceRand(b, nonce))
		if _, err := d.Step(nil); err != nil {
			b.Fatal(err)
		}
		if _, err := d.Step(resp); err != nil {
			b.Fatal(err)
		}
	}
}
