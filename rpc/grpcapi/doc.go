// Package grpcapi is the gRPC front-end of the session engine: the public
// API of rpc/apipb (the Coord service) as a codec in front of rpc/engine.
// It turns a session stream's messages into engine requests, in arrival
// order, and the engine's replies, watch events and vouches into
// ServerMessages, in the order the engine queued them. It keeps no session
// state of its own.
package grpcapi
