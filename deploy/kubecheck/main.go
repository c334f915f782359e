// Command kubecheck checks coordd's Kubernetes manifests (deploy/kubernetes)
// without a cluster, for make deploy-check.
//
// Every file that kustomization.yaml lists is decoded strictly into the
// k8s.io/api type of its kind, as the API server's strict field validation
// does: an unknown or misspelt field, a duplicate key, a wrong type or a bad
// quantity is an error. Then the objects are checked together for what a
// coordd cluster needs (check.go): each pod's --id is its ordinal and its
// --peer-addr its own name in --peers, which names every replica under the
// headless Service; that Service publishes pods before they are ready; the
// disruption budget keeps a majority; and so on.
//
// Usage:
//
//	kubecheck [-coordd BIN] DIR
//
// With -coordd, it also runs BIN with each pod's arguments, expanded as the
// kubelet would, followed by --version: coordd parses every flag before it
// acts on --version, so a flag it does not have, or a value of the wrong
// form (a duration, a number), fails there. Values coordd checks only when
// it starts, such as the log level, are not checked this way.
//
// It is a module of its own so that coordd's module does not depend on the
// Kubernetes API packages.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	coordd := flag.String("coordd", "", "a coordd binary to run with each pod's arguments and --version")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: kubecheck [-coordd BIN] DIR\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	dir := flag.Arg(0)
	m, err := load(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	errs := check(m)
	if *coordd != "" && len(errs) == 0 {
		errs = runCoordd(m, *coordd)
	}
	for _, err := range errs {
		fmt.Fprintln(os.Stderr, err)
	}
	if len(errs) > 0 {
		os.Exit(1)
	}
	fmt.Printf("kubecheck: %s: %d objects, strict decoding and checks pass\n", dir, m.count())
}
