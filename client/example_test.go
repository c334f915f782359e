package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/coordd/coordd/client"
)

// ExampleConnect opens a session, creates an ephemeral sequential node,
// watches it, changes it and receives the watch's event.
func ExampleConnect() {
	// The cluster's client addresses, e.g. 10.0.0.1:2181, 10.0.0.2:2181 and
	// 10.0.0.3:2181; here, servers of an in-memory stand-in.
	servers := client.FakeServers(3)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, servers, client.WithSessionTimeout(6*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(context.Background())

	go func() {
		for ev := range c.States() {
			if ev.State == client.StateExpired {
				log.Printf("session %#x expired: %v", c.SessionID(), ev.Err)
			}
		}
	}()

	if _, err := c.Create(ctx, "/workers", nil, client.CreateMode{}); err != nil && !errors.Is(err, client.ErrNodeExists) {
		log.Fatal(err)
	}
	name, err := c.Create(ctx, "/workers/w-", []byte("hello"), client.CreateMode{Kind: client.Ephemeral, Sequential: true})
	if err != nil {
		log.Fatal(err)
	}
	data, stat, changed, err := c.GetW(ctx, name)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s = %q (version %d)\n", name, data, stat.Version)

	// Compare-and-set: applies only if nobody changed the node meanwhile.
	if _, err := c.Set(ctx, name, []byte("busy"), stat.Version); err != nil {
		log.Fatal(err)
	}
	select {
	case ev := <-changed:
		fmt.Println(ev.Type, ev.Path)
	case <-ctx.Done():
		log.Fatal(ctx.Err())
	}
	// Output:
	// /workers/w-0000000000 = "hello" (version 0)
	// NodeDataChanged /workers/w-0000000000
}
