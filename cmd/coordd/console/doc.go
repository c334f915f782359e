// Package console is coordd's web console: a page served on the admin HTTP
// address that shows the cluster (members, roles, Raft indexes, traffic),
// the znode tree, the open sessions, the locks and elections there are and
// the holders and waiters of each, and a live feed of watch events, and,
// when allowed, creates, sets and deletes znodes.
//
// It reads through the same public API a client uses, so it shows exactly
// what a client of its server would see: one session of the Go client
// (package client, and lockrecipe to read locks) on its own server's client
// port, and the public API's unary calls (Status, Sessions) there. It must
// not know the server's internals: it imports client, lockrecipe and
// rpc/apipb only (scripts/check-deps.sh), and cmd/coordd mounts its Handler.
//
// The page is plain HTML, CSS and JavaScript embedded in the binary (no
// build step, nothing fetched from elsewhere); every value from the tree is
// inserted as text, never as markup, and a strict Content-Security-Policy
// allows only the console's own scripts and styles. Writes are POSTs that
// must come from the console's own page (a same-origin check and a token),
// and are refused unless the console was started with writes enabled.
package console
