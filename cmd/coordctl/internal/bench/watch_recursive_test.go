package bench

import (
	"reflect"
	"testing"
)

func TestTreePaths(t *testing.T) {
	got := treePaths("/t", 13, 3)
	want := []string{"/t/n0", "/t/n1", "/t/n2", "/t/n0/n0", "/t/n0/n1", "/t/n0/n2", "/t/n1/n0", "/t/n1/n1", "/t/n1/n2",
		"/t/n2/n0", "/t/n2/n1", "/t/n2/n2", "/t/n0/n0/n0"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("treePaths = %v", got)
	}
	if n := len(treePaths("/t", 100000, 10)); n != 100000 {
		t.Errorf("%d nodes", n)
	}
}
