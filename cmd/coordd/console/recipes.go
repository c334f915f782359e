package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
)

// The Locks view opens on the locks and elections that exist, to pick one
// from. ZooKeeper keeps no index of them, and a recipe's path can be any
// node, so the console lists the children of the paths where coordctl puts
// them: "coordctl elect NAME" elects at /elections/NAME, and the locks of
// docs/cli.md's examples are under /locks. A recipe elsewhere is followed by
// typing its path, or from the tree ("Follow as lock").

// recipeRoots are the paths whose children the Locks view lists.
var recipeRoots = []struct {
	path string
	kind string // what an idle child there is
}{
	{"/locks", "lock"},
	{"/elections", "election"},
}

// maxRecipes bounds how many children of one root are listed (and read).
const maxRecipes = 100

// recipeJSON is one lock or election of the list.
type recipeJSON struct {
	Path string `json:"path"`
	// Kind is what its contenders' nodes say it is ("lock", "read/write
	// lock", "semaphore", "election"), or, with none, what its root holds.
	Kind    string `json:"kind"`
	Holders int    `json:"holders"`
	Waiting int    `json:"waiting"`
}

// recipesJSON lists the locks and elections under the roots.
type recipesJSON struct {
	Roots   []string     `json:"roots"`
	Recipes []recipeJSON `json:"recipes"`
	// More counts the children not listed, beyond maxRecipes per root.
	More int `json:"more"`
}

// handleRecipes lists the children of each of recipeRoots that exists,
// each with who holds it and how many wait, by path.
func (c *Console) handleRecipes(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := call(r)
	defer cancel()
	cl, err := c.session(ctx)
	if err != nil {
		fail(w, err)
		return
	}
	out := recipesJSON{Recipes: []recipeJSON{}}
	for _, root := range recipeRoots {
		out.Roots = append(out.Roots, root.path)
		names, _, err := cl.Children(ctx, root.path)
		if errors.Is(err, client.ErrNoNode) {
			continue
		}
		if err != nil {
			fail(w, fmt.Errorf("%s: %w", root.path, err))
			return
		}
		slices.Sort(names)
		if len(names) > maxRecipes {
			out.More += len(names) - maxRecipes
			names = names[:maxRecipes]
		}
		found, err := inspectAll(ctx, cl, root.path, root.kind, names)
		if err != nil {
			fail(w, err)
			return
		}
		out.Recipes = append(out.Recipes, found...)
	}
	writeJSON(w, http.StatusOK, out)
}

// inspectAll reads the contenders of each child of root, a few at a time
// (a child deleted meanwhile shows as one nobody holds).
func inspectAll(ctx context.Context, cl *client.Client, root, idle string, names []string) ([]recipeJSON, error) {
	found := make([]*recipeJSON, len(names))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for range min(statWorkers, len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				path := root + "/" + names[i]
				cs, err := lockrecipe.Inspect(ctx, cl, path)
				if err != nil {
					mu.Lock()
					first = cmp.Or(first, fmt.Errorf("%s: %w", path, err))
					mu.Unlock()
					continue
				}
				found[i] = &recipeJSON{Path: path, Kind: recipeKind(cs, idle), Holders: len(cs.Holders), Waiting: len(cs.Waiting)}
			}
		}()
	}
	for i := range names {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		return nil, first
	}
	out := make([]recipeJSON, 0, len(names))
	for _, f := range found {
		if f != nil {
			out = append(out, *f)
		}
	}
	return out, nil
}

// recipeKind says what a recipe is from its contenders' nodes; with none,
// it is what its root holds (idle).
func recipeKind(cs lockrecipe.Contenders, idle string) string {
	if cs.Semaphore {
		return "semaphore"
	}
	for _, k := range slices.Concat(cs.Holders, cs.Waiting) {
		switch k.Kind {
		case "read", "write":
			return "read/write lock"
		case "elect":
			return "election"
		case "lock":
			return "lock"
		}
	}
	return idle
}
