package grpcapi

import (
	"strings"
	"testing"
	"unicode"

	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/engine"
	"github.com/coordd/coordd/tree"
	"github.com/coordd/coordd/watch"
)

// snake turns "NoChildrenForEphemerals" into "NO_CHILDREN_FOR_EPHEMERALS"
// (and "APIError" into "API_ERROR").
func snake(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i, c := range r {
		if i > 0 && unicode.IsUpper(c) && (unicode.IsLower(r[i-1]) || i+1 < len(r) && unicode.IsLower(r[i+1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(c))
	}
	return b.String()
}

// TestEveryCodeHasItsAPIName: each engine code reaches a gRPC client as
// the public enum value of the same name, whose number is ZooKeeper's
// absolute value (coordd's UNAVAILABLE is 200).
func TestEveryCodeHasItsAPIName(t *testing.T) {
	for _, c := range engine.Codes() {
		got := codeToAPI(c)
		if want := snake(c.String()); got.String() != want {
			t.Errorf("%s reaches the API as %s, want %s", c, got, want)
		}
		if c != engine.Unavailable && int32(got) != -int32(c) {
			t.Errorf("%s is %d in the API, want %d", c, int32(got), -int32(c))
		}
	}
	if codeToAPI(engine.Unavailable) != apipb.ErrorCode_UNAVAILABLE || apipb.ErrorCode_UNAVAILABLE != 200 {
		t.Error("Unavailable is not the API's UNAVAILABLE (200)")
	}
	if len(apipb.ErrorCode_name) != len(engine.Codes()) {
		t.Errorf("the API has %d codes, the engine %d", len(apipb.ErrorCode_name), len(engine.Codes()))
	}
}

// TestEventAndKindNumbers: event types and node kinds cross by number.
func TestEventAndKindNumbers(t *testing.T) {
	for ev, want := range map[tree.EventType]apipb.EventType{
		tree.EventNodeCreated: apipb.EventType_NODE_CREATED, tree.EventNodeDeleted: apipb.EventType_NODE_DELETED,
		tree.EventNodeDataChanged: apipb.EventType_NODE_DATA_CHANGED, tree.EventNodeChildrenChanged: apipb.EventType_NODE_CHILDREN_CHANGED,
	} {
		if got := eventToAPI(&engine.Event{Type: ev}).Type; got != want {
			t.Errorf("%v reaches the API as %v, want %v", ev, got, want)
		}
	}
	for k, want := range map[tree.Kind]apipb.NodeKind{
		tree.Persistent: apipb.NodeKind_PERSISTENT, tree.Ephemeral: apipb.NodeKind_EPHEMERAL,
		tree.Container: apipb.NodeKind_CONTAINER, tree.TTL: apipb.NodeKind_TTL,
	} {
		if got := statToAPI(&tree.Stat{Kind: k}).Kind; got != want {
			t.Errorf("kind %v reaches the API as %v, want %v", k, got, want)
		}
		if got := createOf(&apipb.CreateRequest{Kind: want}).Create.Kind; got != k {
			t.Errorf("API kind %v arrives as %v, want %v", want, got, k)
		}
	}
}

// TestWatchKindBits: the event's kinds travel as the watch table's bits,
// which the public API documents.
func TestWatchKindBits(t *testing.T) {
	for k, want := range map[watch.Kind]uint32{watch.Data: 1, watch.Child: 2, watch.Persistent: 4, watch.PersistentRecursive: 8} {
		if got := eventToAPI(&engine.Event{Kinds: k}).Kinds; got != want {
			t.Errorf("%v travels as %d, the API says %d", k, got, want)
		}
	}
	for kind, want := range map[apipb.WatchKind]engine.WatcherType{
		apipb.WatchKind_WATCH_ANY: engine.WatchAny, apipb.WatchKind_WATCH_DATA: engine.WatchData,
		apipb.WatchKind_WATCH_CHILD: engine.WatchChildren, apipb.WatchKind_WATCH_PERSISTENT: engine.WatchPersistent,
		apipb.WatchKind_WATCH_PERSISTENT_RECURSIVE: engine.WatchPersistentRecursive,
	} {
		if got := watcherTypeOf(kind); got != want {
			t.Errorf("%v maps to %v, want %v", kind, got, want)
		}
	}
	if got := watcherTypeOf(apipb.WatchKind(42)); got.Kinds() != 0 {
		t.Errorf("an unknown kind maps to %v, which selects watches", got)
	}
}
