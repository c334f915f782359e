package chaos

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// TestRegisterModel pins what the registers' model accepts: a write of
// unknown outcome may have applied or not, at any time after its call; a
// definite answer must fit the one order there is.
func TestRegisterModel(t *testing.T) {
	const end = 100
	op := func(client int, in regInput, call int64, out regOutput, ret int64) porcupine.Operation {
		if out.Unknown {
			ret = end
		}
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	set := func(v string) regInput { return regInput{Op: opWrite, Key: "/k", Value: v} }
	cas := func(expect int32, v string) regInput { return regInput{Op: opCAS, Key: "/k", Value: v, Expect: expect} }
	get := regInput{Op: opSyncRead, Key: "/k"}
	unknown := regOutput{Unknown: true}
	for _, tc := range []struct {
		name         string
		ops          []porcupine.Operation
		linearizable bool
	}{
		{"an unknown write never applied", []porcupine.Operation{
			op(0, set("a"), 0, unknown, 0),
			op(1, get, 10, regOutput{Value: "init"}, 20),
			op(1, set("b"), 30, regOutput{Version: 1}, 40),
			op(1, get, 50, regOutput{Value: "b", Version: 1}, 60),
		}, true},
		{"an unknown write applied late", []porcupine.Operation{
			op(0, set("a"), 0, unknown, 0),
			op(1, set("b"), 30, regOutput{Version: 1}, 40),
			op(1, get, 50, regOutput{Value: "a", Version: 2}, 60),
		}, true},
		{"an unknown write applied before its call", []porcupine.Operation{
			op(1, get, 0, regOutput{Value: "a", Version: 1}, 10),
			op(0, set("a"), 20, unknown, 0),
		}, false},
		{"an unknown CAS with a stale version", []porcupine.Operation{
			op(0, cas(5, "a"), 0, unknown, 0),
			op(1, get, 10, regOutput{Value: "init"}, 20),
		}, true},
		{"an unknown CAS that matched, then a CAS that depends on it", []porcupine.Operation{
			op(0, cas(0, "a"), 0, unknown, 0),
			op(1, cas(1, "b"), 10, regOutput{Version: 2}, 20),
		}, true},
		{"a write answered with another write's version", []porcupine.Operation{
			op(0, set("a"), 0, regOutput{Version: 1}, 10),
			op(1, set("b"), 20, regOutput{Version: 1}, 30),
		}, false},
		{"BadVersion for a CAS that matched", []porcupine.Operation{
			op(0, cas(0, "a"), 0, regOutput{BadVersion: true}, 10),
		}, false},
		{"a read of a value never written", []porcupine.Operation{
			op(0, get, 0, regOutput{Value: "x", Version: 1}, 10),
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(registerModel, tc.ops); got != tc.linearizable {
				t.Fatalf("linearizable: %v, want %v", got, tc.linearizable)
			}
		})
	}
}
