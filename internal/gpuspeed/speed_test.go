package gpuspeed

import (
	"errors"
	"testing"
)

func TestGRESTypesAreTheModelsInLowerCase(t *testing.T) {
	got := GRESTypes()
	want := map[string]float64{"p100": 0.68, "v100": 1, "t4": 0.52, "a30": 0.66, "a100": 1.24, "h100": 4.27, "h200": 4.27}
	if len(got) != len(want) {
		t.Fatalf("GRESTypes() = %v, want %v", got, want)
	}
	for typ, speed := range want {
		if got[typ] != speed {
			t.Errorf("GRESTypes()[%q] = %v, want %v", typ, got[typ], speed)
		}
		if s, ok := Default.Lookup(typ); !ok || s != speed {
			t.Errorf("Default.Lookup(%q) = %v, %v; want the same speed as its GRES type", typ, s, ok)
		}
	}
	if _, ok := got["h100 pcie"]; ok {
		t.Error(`"H100 PCIe" has no GRES spelling but got one`)
	}
	got["v100"] = 9
	if GRESTypes()["v100"] != 1 {
		t.Error("GRESTypes returns the table itself: a caller's change leaked into it")
	}
}

func TestParse(t *testing.T) {
	tab, err := Parse(" A100 = 1.3 ,T4=0.5")
	if err != nil || tab["A100"] != 1.3 || tab["T4"] != 0.5 || len(tab) != 2 {
		t.Fatalf("Parse = %v, %v", tab, err)
	}
	for _, bad := range []string{"A100", "=1", "A100=0", "A100=1001", "A100=x", "A=B=1"} {
		var e *Error
		if _, err := Parse(bad); !errors.As(err, &e) {
			t.Errorf("Parse(%q) = %v, want an *Error", bad, err)
		}
	}
}
