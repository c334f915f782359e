package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/coordd/coordd/client"
)

// ExampleConnect opens a session, creates an ephemeral sequential node and
// watches it. It needs a running cluster, so it has no output check.
func ExampleConnect() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, []string{"127.0.0.1:2181", "127.0.0.1:2182", "127.0.0.1:2183"},
		client.WithSessionTimeout(6*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(context.Background())

	go func() {
		for ev := range c.States() {
			log.Printf("session %d: %v on %s (%v)", c.SessionID(), ev.State, ev.Server, ev.Err)
		}
	}()

	name, err := c.Create(ctx, "/workers/w-", []byte("hello"), client.CreateMode{Kind: client.Ephemeral, Sequential: true})
	if err != nil {
		log.Fatal(err)
	}
	data, stat, changed, err := c.GetW(ctx, name)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s = %q (version %d)\n", name, data, stat.Version)
	select {
	case ev := <-changed:
		fmt.Println(ev.Type, ev.Path)
	case <-ctx.Done():
	}
}
