package datasets

import (
	"slices"
	"strings"
	"testing"
)

// TestBuiltinsMatchLoaders: each built-in's shape and classes are those its loader gives.
func TestBuiltinsMatchLoaders(t *testing.T) {
	got := map[string]Builtin{}
	for _, b := range Builtins() {
		got[b.Name] = b
		if b.D() < 1 || b.Classes < 2 {
			t.Errorf("%+v", b)
		}
	}
	if !slices.Equal(BuiltinNames(), []string{"synthetic", "mnist", "adult", "cifar10"}) {
		t.Fatalf("names %v", BuiltinNames())
	}
	check := func(name string, d *Dataset) {
		t.Helper()
		b := got[name]
		if !slices.Equal(b.Shape, d.Shape) || b.Classes != d.Classes || b.D() != d.D {
			t.Errorf("%s: registry shape %v classes %d, loader shape %v classes %d D %d", name, b.Shape, b.Classes, d.Shape, d.Classes, d.D)
		}
	}
	cfg := DefaultSynthetic()
	cfg.Train, cfg.Test = 20, 10
	syn, _, err := Synthetic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	check("synthetic", syn)
	dir := t.TempDir()
	writeCIFAR10(t, dir, cifarBatches())
	cif, _, err := LoadCIFAR10(dir)
	if err != nil {
		t.Fatal(err)
	}
	check("cifar10", cif)
	if n := len(NewAdultEncoder().FeatureNames()); got["adult"].D() != n {
		t.Errorf("adult: registry D %d, encoder %d", got["adult"].D(), n)
	}
	if b := got["mnist"]; !slices.Equal(b.Shape, []int{1, 28, 28}) || b.Classes != 10 {
		t.Errorf("mnist: %+v", b)
	}
	if _, err := LookupBuiltin("cifar100"); err == nil || !strings.Contains(err.Error(), "synthetic, mnist, adult, cifar10") {
		t.Errorf("LookupBuiltin(cifar100): %v", err)
	}
	b, err := LookupBuiltin("cifar10")
	if err != nil || b.D() != 3072 {
		t.Fatalf("%+v, %v", b, err)
	}
	b.Shape[0] = 99
	if again, _ := LookupBuiltin("cifar10"); again.Shape[0] != 3 {
		t.Error("Builtins returns shared state")
	}
}
