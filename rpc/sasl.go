package rpc

import (
	"errors"
	"fmt"

	"github.com/coordd/coordd/rpc/zk/sasl"
)

// This file reads the users of ZooKeeper's SASL authentication, which the
// ZooKeeper front-end serves (rpc/zk/sasl.go): a JAAS file, as ZooKeeper's
// server reads it from java.security.auth.login.config.

// checkSASL checks the SASL settings that do not need the file.
func (c *Config) checkSASL() error {
	if c.SASLUsers == "" && (c.SASLSection != "" || c.SASLSuperUser != "") {
		return errors.New("rpc: --sasl-section and --sasl-super-user need --sasl-users (the JAAS file of the SASL users)")
	}
	return nil
}

// loadSASL reads the SASL users, when there is a file of them. A file that
// cannot be used stops the server with an error naming it; later changes
// are read by the exchanges that follow them.
func (n *Node) loadSASL() error {
	if n.cfg.SASLUsers == "" {
		return nil
	}
	src, err := sasl.Load(n.cfg.SASLUsers, sasl.Options{Section: n.cfg.SASLSection, Logger: n.log})
	if err != nil {
		return fmt.Errorf("rpc: --sasl-users: %w", err)
	}
	n.sasl = src
	n.log.Info("serving SASL DIGEST-MD5", "file", src.Path(), "users", len(src.Users()), "super_user", n.cfg.SASLSuperUser)
	return nil
}
