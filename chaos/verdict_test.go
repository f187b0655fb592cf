package main

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

// TestTallyAddsEveryField: add sums each count into itself and no other,
// whatever fields tally has.
func TestTallyAddsEveryField(t *testing.T) {
	typ := reflect.TypeFor[tally]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		var sum, more tally
		reflect.ValueOf(&sum).Elem().Field(i).SetInt(2)
		reflect.ValueOf(&more).Elem().Field(i).SetInt(3)
		sum.add(more)
		got := reflect.ValueOf(sum)
		for j := range typ.NumField() {
			want := int64(0)
			if j == i {
				want = 5
			}
			if n := got.Field(j).Int(); n != want {
				t.Errorf("2 + 3 in %s: %s is %d, want %d", name, typ.Field(j).Name, n, want)
			}
		}
	}
}

// TestVerdictMergeTakesEveryField: merging a key's verdict, every field
// of it counts in the run's verdict — a field added to verdict fails here
// until merge takes it, or it is named below as one checkKeys works out
// over every key at once.
func TestVerdictMergeTakesEveryField(t *testing.T) {
	overAllKeys := []string{"RecoveryMS", "BoundMS", "AcquireP99", "AcquireP99MS"}
	var key verdict
	kv := reflect.ValueOf(&key).Elem()
	var fields []string
	for _, f := range reflect.VisibleFields(kv.Type()) {
		if f.Anonymous || slices.Contains(overAllKeys, f.Name) {
			continue
		}
		fields = append(fields, f.Name)
		switch v := kv.FieldByIndex(f.Index); v.Kind() {
		case reflect.String:
			v.SetString("illegal")
		case reflect.Int, reflect.Int64:
			v.SetInt(7)
		default:
			t.Fatalf("verdict.%s is a %s: teach this test and merge how to take it", f.Name, v.Kind())
		}
	}
	run := verdict{Linearizable: "ok"}
	run.merge(1, key)
	rv := reflect.ValueOf(run)
	for _, name := range fields {
		if rv.FieldByName(name).IsZero() {
			t.Errorf("verdict.%s of a key is not in the run's verdict: merge drops it", name)
		}
	}
	if run.Linearizable != "illegal" || run.Example != "key 1: illegal" || run.DoubleGrant != "key 1: illegal" {
		t.Errorf("merged into a clean run: %+v", run)
	}
	// A second key adds to the counts and keeps the first descriptions.
	run.merge(2, key)
	if run.Sections != 14 || run.FencedFinal != 14 || run.Unrecovered != 7 || run.Example != "key 1: illegal" {
		t.Errorf("merged twice: %+v", run)
	}
}

// TestVerdictJSON: the verdict's counts, in their own structs, are
// fields of the verdict's JSON object, under their names.
func TestVerdictJSON(t *testing.T) {
	b, err := json.Marshal(verdict{tally: tally{Sections: 3, ControlLost: 1}, slowest: slowest{Unrecovered: 2}, Linearizable: "ok", Example: "e", DoubleGrant: "d"})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["sections"] != 3.0 || m["control_lost_updates"] != 1.0 || m["unrecovered"] != 2.0 || m["linearizable"] != "ok" || len(m) != 22 {
		t.Fatalf("verdict as JSON: %s", b)
	}
}
