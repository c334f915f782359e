package sasl

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// DefaultSection is the JAAS section ZooKeeper's server reads its users
// from unless told otherwise (its zookeeper.sasl.serverconfig).
const DefaultSection = "Server"

// userPrefix marks the options that are users: user_NAME="password".
const userPrefix = "user_"

// ErrNoUsers is the error of a JAAS file that gives the server no SASL user:
// its section is missing or lists none.
var ErrNoUsers = errors.New("sasl: no SASL users")

// Users are the users of DIGEST-MD5, name to password. A Users is never
// modified once made, so it is shared freely.
type Users map[string]string

// UsersOf returns the users that the JAAS file data gives the section
// named section (DefaultSection when empty), as ZooKeeper's
// SaslServerCallbackHandler reads them: every option user_NAME of every
// login module of the section, NAME's password its value (a name given
// twice keeps its last password). A section without one is an error:
// ZooKeeper would serve no one (a Kerberos section, for one, lists none;
// coordd serves DIGEST-MD5 only).
func UsersOf(data []byte, section string) (Users, error) {
	if section == "" {
		section = DefaultSection
	}
	sections, err := ParseJAAS(data)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range sections {
		if s.Name != section {
			names = append(names, s.Name)
			continue
		}
		users := make(Users)
		for _, m := range s.Modules {
			for key, v := range m.Options {
				if name, ok := strings.CutPrefix(key, userPrefix); ok {
					users[name] = v
				}
			}
		}
		if len(users) == 0 {
			return nil, fmt.Errorf("%w: section %s has no option user_NAME=\"password\" (coordd serves DIGEST-MD5, not Kerberos)", ErrNoUsers, section)
		}
		return users, nil
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: the file has no section %s (it has none)", ErrNoUsers, section)
	}
	return nil, fmt.Errorf("%w: the file has no section %s (it has %s)", ErrNoUsers, section, strings.Join(names, ", "))
}

// Names returns the users' names, sorted (for log lines: never the
// passwords).
func (u Users) Names() []string {
	names := make([]string, 0, len(u))
	for n := range u {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
