package sasl

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// zkDocExample is the Server section of ZooKeeper's documentation (the
// ZooKeeper and SASL wiki page), with a Client section beside it as Kafka
// deployments have.
const zkDocExample = `
Server {
       org.apache.zookeeper.server.auth.DigestLoginModule required
       user_super="adminsecret"
       user_bob="bobsecret";
};
Client {
       org.apache.zookeeper.server.auth.DigestLoginModule required
       username="bob"
       password="bobsecret";
};
`

func TestUsersOf(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		section string
		want    Users
		err     error
		msg     string // in the error
	}{
		{name: "ZooKeeper's example", file: zkDocExample, want: Users{"super": "adminsecret", "bob": "bobsecret"}},
		{name: "another section", file: zkDocExample, section: "Client", err: ErrNoUsers, msg: "section Client has no option user_NAME"},
		{name: "comments, single quotes, escapes, words", file: `
			// a comment
			/* a block
			   comment */ Server {
			  org.apache.zookeeper.server.auth.DigestLoginModule REQUIRED // the flag in any case
			    user_a='it' user_b="quote\"back\\slash\101" user_c=plain-word_1.2 debug=true;
			  com.example.Other optional user_d="tab\tend";
			};`,
			want: Users{"a": "it", "b": `quote"back\slashA`, "c": "plain-word_1.2", "d": "tab\tend"}},
		{name: "a name given twice keeps the last", file: `Server { M required user_x="1" user_x="2"; N optional user_x="3"; };`, want: Users{"x": "3"}},
		{name: "non-ASCII", file: `Server { M required user_josé="pässwörd" user_日本="語"; };`, want: Users{"josé": "pässwörd", "日本": "語"}},
		{name: "missing section", file: `Client { M required username="u"; };`, err: ErrNoUsers, msg: "no section Server (it has Client)"},
		{name: "empty file", file: "", err: ErrNoUsers, msg: "it has none"},
		{name: "kerberos only", file: `Server { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/k" principal="zookeeper/host@R"; };`, err: ErrNoUsers, msg: "not Kerberos"},
		{name: "no semicolon after the section", file: `Server { M required user_a="b"; }`, err: ErrJAAS, msg: "line 1"},
		{name: "no semicolon after the module", file: "Server {\n M required user_a=\"b\"\n};", err: ErrJAAS, msg: "line 3"},
		{name: "bad flag", file: `Server { M mandatory user_a="b"; };`, err: ErrJAAS, msg: "control flag"},
		{name: "no value", file: `Server { M required user_a=; };`, err: ErrJAAS, msg: "value of option user_a"},
		{name: "no equals", file: `Server { M required user_a "b"; };`, err: ErrJAAS, msg: `'=' after option user_a`},
		{name: "unclosed string", file: "Server { M required user_a=\"b;\n };", err: ErrJAAS, msg: "not closed"},
		{name: "unclosed comment", file: `Server { /* M required user_a="b"; };`, err: ErrJAAS, msg: "comment is not closed"},
		{name: "section twice", file: `Server { M required user_a="b"; }; Server { M required user_c="d"; };`, err: ErrJAAS, msg: "given twice"},
		{name: "property expansion", file: `Server { M required user_a="${secret}"; };`, err: ErrJAAS, msg: "${...}"},
		{name: "not UTF-8", file: "Server { M required user_a=\"\xff\"; };", err: ErrJAAS, msg: "UTF-8"},
		{name: "a brace for a name", file: `{ };`, err: ErrJAAS, msg: "section name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := UsersOf([]byte(tt.file), tt.section)
			if tt.err != nil {
				if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.msg) {
					t.Fatalf("err = %v, want %v containing %q", err, tt.err, tt.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("users = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseJAASModules(t *testing.T) {
	got, err := ParseJAAS([]byte(zkDocExample))
	if err != nil {
		t.Fatal(err)
	}
	want := []Section{
		{Name: "Server", Modules: []Module{{Class: "org.apache.zookeeper.server.auth.DigestLoginModule", Flag: "required",
			Options: map[string]string{"user_super": "adminsecret", "user_bob": "bobsecret"}}}},
		{Name: "Client", Modules: []Module{{Class: "org.apache.zookeeper.server.auth.DigestLoginModule", Flag: "required",
			Options: map[string]string{"username": "bob", "password": "bobsecret"}}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseJAAS = %+v, want %+v", got, want)
	}
}

// TestJAASErrorsHoldNoPassword: an error quotes the file's structure,
// never a value.
func TestJAASErrorsHoldNoPassword(t *testing.T) {
	for _, file := range []string{
		`Server { M required user_a="s3cret" "s3cret"; };`,
		`Server { M required user_a="s3cret" }`,
		`Server { M required user_a="s3cret" = ; };`,
	} {
		_, err := UsersOf([]byte(file), "")
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("UsersOf(%q): err = %v, want an error without the value", file, err)
		}
	}
}
