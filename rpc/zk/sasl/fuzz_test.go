package sasl

import (
	"bytes"
	"errors"
	"testing"

	"github.com/coordd/coordd/rpc/zk/sasl/sasltest"
)

// FuzzJAAS feeds arbitrary files to the JAAS parser: it never panics, fails
// only with its sentinels, and what it accepts has no empty class or
// unknown flag.
func FuzzJAAS(f *testing.F) {
	f.Add([]byte(zkDocExample))
	f.Add([]byte(`Server { M required user_a='x\101\7777\"' /* c */ b=c; }; // end`))
	f.Add([]byte(`Server { M required user_a="${x}"; };`))
	f.Add([]byte("Server {\n M optional user_a=\"b\n\";\n};"))
	f.Add([]byte(`{};=""''`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sections, err := ParseJAAS(data)
		if err != nil {
			if !errors.Is(err, ErrJAAS) {
				t.Fatalf("error %v is not ErrJAAS", err)
			}
			return
		}
		for _, s := range sections {
			for _, m := range s.Modules {
				switch m.Flag {
				case "required", "requisite", "sufficient", "optional":
				default:
					t.Fatalf("accepted flag %q", m.Flag)
				}
				if m.Class == "" {
					t.Fatal("accepted an empty class")
				}
			}
		}
		if _, err := UsersOf(data, ""); err != nil && !errors.Is(err, ErrNoUsers) {
			t.Fatalf("UsersOf of a file ParseJAAS accepts: %v", err)
		}
	})
}

// FuzzResponse feeds arbitrary digest-responses to an exchange, as a client
// could: it never panics, fails only with its sentinels, and succeeds only
// for the user and password it knows (the seeds include the good response,
// so a mutation that keeps it valid is checked too).
func FuzzResponse(f *testing.F) {
	users := Users{"bob": "bobsecret"}
	nonce := make([]byte, nonceBytes)
	ch, err := NewDigestMD5(users, bytes.NewReader(nonce)).Step(nil)
	if err != nil {
		f.Fatal(err)
	}
	good := (&sasltest.Client{User: "bob", Password: "bobsecret", Charset: "utf-8", Authzid: "bob"}).Respond(ch)
	f.Add(good)
	f.Add((&sasltest.Client{User: "bob", Password: "wrong"}).Respond(ch))
	f.Add([]byte(`username="a\"b",, realm = "zk-sasl-md5" ,nonce=x`))
	f.Add([]byte(`a=`))
	f.Add([]byte(`="`))
	f.Fuzz(func(t *testing.T, resp []byte) {
		d := NewDigestMD5(users, bytes.NewReader(nonce))
		if _, err := d.Step(nil); err != nil {
			t.Fatal(err)
		}
		final, err := d.Step(resp)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrAuthFailed) {
				t.Fatalf("error %v is neither ErrMalformed nor ErrAuthFailed", err)
			}
			if d.Done() || final != nil {
				t.Fatal("an error, yet done or a token")
			}
			return
		}
		if !d.Done() || d.User() != "bob" || !bytes.HasPrefix(final, []byte("rspauth=")) {
			t.Fatalf("accepted %q: done %v, user %q, token %q", resp, d.Done(), d.User(), final)
		}
		if _, err := parseDirectives(resp); err != nil {
			t.Fatalf("accepted a response that does not parse: %v", err)
		}
	})
}
