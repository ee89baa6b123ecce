package migrate

import (
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0002_b.sql":  {Data: []byte("B")},
		"m/0001_a.sql":  {Data: []byte("A")},
		"m/README.md":   {Data: []byte("x")},
		"bad/1_a.sql":   {Data: []byte("A")},
		"bad/3_c.sql":   {Data: []byte("C")},
		"worse/x_y.sql": {Data: []byte("?")},
	}
	ms, err := Load(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].SQL != "A" || ms[1].Version != 2 {
		t.Fatalf("Load = %+v", ms)
	}
	if p := Pending(ms, 1); len(p) != 1 || p[0].Version != 2 {
		t.Fatalf("Pending(1) = %+v", p)
	}
	if p := Pending(ms, 5); p != nil {
		t.Fatalf("Pending(5) = %+v", p)
	}
	if _, err := Load(fsys, "bad"); err == nil {
		t.Fatal("a gap in versions was accepted")
	}
	if _, err := Load(fsys, "worse"); err == nil {
		t.Fatal("a name without a version was accepted")
	}
}
