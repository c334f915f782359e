// Package sasl is the server side of the SASL authentication ZooKeeper's
// clients run over ZooKeeper's protocol (the sasl opcode): the DIGEST-MD5
// mechanism (RFC 2831) exactly as ZooKeeper's server offers it (realm and
// server name "zk-sasl-md5", service "zookeeper", qop auth, no security
// layer), and the users it checks passwords against, read from a JAAS file
// as ZooKeeper reads them (the user_NAME="password" options of its Server
// section) and read again when the file changes.
//
// A DigestMD5 is one exchange: it turns the client's tokens into the
// server's and, once the client proved it knows the password, names the
// user. What the user may then do (the sasl:NAME identity of ACLs, the
// super user) is decided elsewhere: this package knows nothing of sessions,
// ACLs, the log or the wire, imports nothing of coordd's, and never puts a
// password in an error or a log line.
package sasl
