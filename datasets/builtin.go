package datasets

import (
	"fmt"
	"slices"
	"strings"
)

// Builtin is a built-in dataset as a model sees it: its name (dpsgd's --dataset), the
// per-example shape and the number of classes. They are constants of the loader, known
// without reading a file, so a model can be sized, listed or checked against a dataset
// before (or without) loading it.
type Builtin struct {
	Name    string
	Shape   []int // [D] for tabular data, [C, H, W] for images
	Classes int
}

// Builtins returns the built-in datasets, in a fixed order: synthetic, mnist, adult, cifar10.
// The slice and its shapes are fresh copies.
func Builtins() []Builtin {
	syn := DefaultSynthetic()
	return []Builtin{
		{Name: "synthetic", Shape: []int{syn.Features}, Classes: syn.Classes},
		{Name: "mnist", Shape: []int{1, MNISTRows, MNISTCols}, Classes: MNISTClasses},
		{Name: "adult", Shape: []int{AdultDim}, Classes: 2},
		{Name: "cifar10", Shape: []int{CIFARChannels, CIFARRows, CIFARCols}, Classes: CIFAR10Classes},
	}
}

// BuiltinNames returns the names of [Builtins], in order.
func BuiltinNames() []string {
	var names []string
	for _, b := range Builtins() {
		names = append(names, b.Name)
	}
	return names
}

// LookupBuiltin returns the built-in dataset called name, or an error that lists the names.
func LookupBuiltin(name string) (Builtin, error) {
	bs := Builtins()
	if i := slices.IndexFunc(bs, func(b Builtin) bool { return b.Name == name }); i >= 0 {
		return bs[i], nil
	}
	return Builtin{}, fmt.Errorf("datasets: %q is not a built-in dataset: want %s", name, strings.Join(BuiltinNames(), ", "))
}

// D is the number of features of one example: the product of Shape.
func (b Builtin) D() int {
	d := 1
	for _, s := range b.Shape {
		d *= s
	}
	return d
}
