package datasets

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// idxLabelColumn and idxValueColumn name the label and the one feature column of a drafted
// IDX schema.
const (
	idxLabelColumn = "label"
	idxValueColumn = "value"
)

// idxSchema checks that s describes IDX data: exactly one column, numeric (its bounds and
// scale apply to every element of an example), and integer classes ("0", "7", "-1": the
// label values of the labels file, written as strconv.Itoa writes them). It returns the
// column's map and the class of each label value.
func idxSchema(s *Schema) (numericScale, map[int]int, error) {
	if err := s.Validate(); err != nil {
		return numericScale{}, nil, err
	}
	if len(s.Columns) != 1 || s.Columns[0].Type != ColumnNumeric {
		return numericScale{}, nil, &SchemaError{Field: "columns", Msg: "IDX data takes exactly one column, numeric: its bounds and scale apply to every element of an example"}
	}
	c := s.Columns[0]
	classes := make(map[int]int, len(s.Label.Classes))
	for k, v := range s.Label.Classes {
		n, err := strconv.Atoi(v)
		if err != nil || strconv.Itoa(n) != v {
			return numericScale{}, nil, &SchemaError{Field: fmt.Sprintf("label.classes[%d]", k), Msg: fmt.Sprintf("%q: IDX labels are integers, written in decimal without sign + or leading zeros", clip(v))}
		}
		classes[n] = k
	}
	return numericScale{lo: c.Lo, hi: c.Hi, log: c.Scale == ScaleLog}, classes, nil
}

// idxIsInteger reports whether an IDX element type holds integers.
func idxIsInteger(t byte) bool {
	return t == IDXUint8 || t == IDXInt8 || t == IDXInt16 || t == IDXInt32
}

// idxShape returns the per-example shape of images with dims [N, …]: [D] for 2 dims,
// [1, H, W] for 3 (one channel), the dims after N as they are for more (read as [C, H, W]).
func idxShape(dims []int) []int {
	switch len(dims) {
	case 2:
		return []int{dims[1]}
	case 3:
		return []int{1, dims[1], dims[2]}
	}
	return slices.Clone(dims[1:])
}

// IDXDataset encodes an IDX pair (images: dims [N, …], any element type; labels: dims [N],
// an integer type) with schema s, which must have exactly one numeric column and integer
// classes: every element v becomes (t(v) − t(lo)) / (t(hi) − t(lo)) after clamping to the
// column's [lo, hi], and label value L becomes the index of the class written L. name labels
// the errors and the dataset. The per-example shape is [D] for 2-dimensional images, [1, H, W]
// for 3, and the dims after N, read as [C, H, W], for 4. Each example is encoded from its own
// elements only.
//
// A NaN or infinite element, or a label the schema does not list, rejects the pair with a
// *ParseError giving the byte offset and the example's index; so do mismatched counts, float
// labels, and images with fewer than 2 dimensions or no example.
func IDXDataset(images, labels *IDX, name string, s *Schema) (*Dataset, error) {
	scale, classes, err := idxSchema(s)
	if err != nil {
		return nil, err
	}
	return idxDataset(images, labels, name, name, scale, classes, len(s.Label.Classes))
}

// idxDataset is IDXDataset with the two inputs' names for the errors.
func idxDataset(images, labels *IDX, imgName, lblName string, scale numericScale, classes map[int]int, k int) (*Dataset, error) {
	if len(images.Dims) < 2 {
		return nil, idxDimsError(images, imgName)
	}
	if len(labels.Dims) != 1 || !idxIsInteger(labels.Type) {
		return nil, &ParseError{File: lblName, Offset: 2, Msg: fmt.Sprintf("IDX labels of type 0x%02x with %d dimension(s), want integers (type 0x08, 0x09, 0x0B or 0x0C) in 1 dimension", labels.Type, len(labels.Dims))}
	}
	n := images.Dims[0]
	if labels.Dims[0] != n {
		return nil, &ParseError{File: lblName, Offset: 4, Msg: fmt.Sprintf("%d labels for %d examples in the images", labels.Dims[0], n)}
	}
	x, d, err := idxFeatures(images, imgName, scale)
	if err != nil {
		return nil, err
	}
	y := make([]int, n)
	lblOff := int64(4 + 4*len(labels.Dims))
	for i := range y {
		v := int(labels.At(i))
		c, ok := classes[v]
		if !ok {
			return nil, &ParseError{File: lblName, Offset: lblOff + int64(i*labels.ElemSize()), Msg: fmt.Sprintf("label %d of example %d is not one of the schema's %d classes", v, i, k)}
		}
		y[i] = c
	}
	return &Dataset{Name: imgName, X: x, Y: y, N: n, D: d, Classes: k, Shape: idxShape(images.Dims)}, nil
}

// idxDimsError is the error of images with fewer than 2 dimensions.
func idxDimsError(images *IDX, name string) error {
	return &ParseError{File: name, Offset: 3, Msg: fmt.Sprintf("IDX images with %d dimension(s), want at least 2 (examples × features)", len(images.Dims))}
}

// idxFeatures encodes every element of images (dims [N, …], N ≥ 1) with scale: N·D features,
// row-major, and D.
func idxFeatures(images *IDX, name string, scale numericScale) ([]float32, int, error) {
	if len(images.Dims) < 2 {
		return nil, 0, idxDimsError(images, name)
	}
	n := images.Dims[0]
	if n == 0 {
		return nil, 0, &ParseError{File: name, Offset: 4, Msg: "no examples"}
	}
	d := 1
	for _, v := range images.Dims[1:] {
		d *= v
	}
	if d == 0 {
		return nil, 0, &ParseError{File: name, Offset: 8, Msg: fmt.Sprintf("examples of dims %v hold no element", images.Dims[1:])}
	}
	x := make([]float32, n*d)
	imgOff := int64(4 + 4*len(images.Dims))
	if images.Type == IDXUint8 {
		var lut [256]float32
		for v := range lut {
			lut[v] = float32(scale.apply(float64(v)))
		}
		for i, b := range images.Data {
			x[i] = lut[b]
		}
		return x, d, nil
	}
	for i := range x {
		v := images.At(i)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, 0, &ParseError{File: name, Offset: imgOff + int64(i*images.ElemSize()), Msg: fmt.Sprintf("element %d of example %d is %v, want a finite number", i%d, i/d, v)}
		}
		x[i] = float32(scale.apply(v))
	}
	return x, d, nil
}

// IDXFeatures encodes IDX images to predict on (dims [N, …], any element type) with schema s
// as [IDXDataset] encodes them, without labels: it returns the N examples' features,
// row-major, and the per-example shape ([D] for 2 dimensions, [1, H, W] for 3, the dims after
// N for 4). Its errors are IDXDataset's.
func IDXFeatures(images *IDX, name string, s *Schema) (x []float32, shape []int, err error) {
	scale, _, err := idxSchema(s)
	if err != nil {
		return nil, nil, err
	}
	if x, _, err = idxFeatures(images, name, scale); err != nil {
		return nil, nil, err
	}
	return x, idxShape(images.Dims), nil
}

// LoadIDX reads the IDX pair images, labels (raw or gzip-compressed, detected by content) and
// encodes it with schema s ([IDXDataset]). MNIST's files with the schema of
// [MNISTSchema] give the features of [LoadMNIST].
func LoadIDX(images, labels string, s *Schema) (*Dataset, error) {
	scale, classes, err := idxSchema(s)
	if err != nil {
		return nil, err
	}
	img, lbl, err := readIDXPair(images, labels)
	if err != nil {
		return nil, err
	}
	return idxDataset(img, lbl, images, labels, scale, classes, len(s.Label.Classes))
}

func readIDXPair(images, labels string) (img, lbl *IDX, err error) {
	if lbl, err = readIDXFile(labels); err != nil {
		return nil, nil, err
	}
	if img, err = readIDXFile(images); err != nil {
		return nil, nil, err
	}
	return img, lbl, nil
}

// MNISTSchema returns the public schema of MNIST as IDX data: classes "0" to "9", and the
// pixels' byte range [0, 255] mapped linearly to [0, 1] (p/255, as [LoadMNIST] does).
func MNISTSchema() *Schema {
	s := &Schema{Label: Label{Column: idxLabelColumn}, Columns: []Column{{Name: "pixel", Type: ColumnNumeric, Lo: 0, Hi: 255}}}
	for k := range MNISTClasses {
		s.Label.Classes = append(s.Label.Classes, strconv.Itoa(k))
	}
	return s
}

// DraftIDXSchema reads an IDX pair and proposes a schema for it: every label value it holds
// as a class (in numeric order), and one numeric column bounded by the element type's range
// for bytes (uint8 [0, 255], int8 [−128, 127]), else by the observed minimum and maximum.
// Like [DraftSchema], the result carries [DraftWarning]: the classes (and observed bounds)
// are statistics of the data, to be replaced by public values.
func DraftIDXSchema(images, labels string) (*Schema, error) {
	img, lbl, err := readIDXPair(images, labels)
	if err != nil {
		return nil, err
	}
	if len(lbl.Dims) != 1 || !idxIsInteger(lbl.Type) {
		return nil, &ParseError{File: labels, Offset: 2, Msg: fmt.Sprintf("IDX labels of type 0x%02x with %d dimension(s), want integers in 1 dimension", lbl.Type, len(lbl.Dims))}
	}
	seen := map[int]bool{}
	for i := range lbl.Len() {
		seen[int(lbl.At(i))] = true
	}
	values := make([]int, 0, len(seen))
	for v := range seen {
		values = append(values, v)
	}
	slices.Sort(values)
	if len(values) < 2 || len(values) > MaxSchemaClasses {
		return nil, &ParseError{File: labels, Offset: -1, Msg: fmt.Sprintf("%d distinct labels, want 2 to %d classes", len(values), MaxSchemaClasses)}
	}
	s := &Schema{Warning: DraftWarning, Label: Label{Column: idxLabelColumn}}
	for _, v := range values {
		s.Label.Classes = append(s.Label.Classes, strconv.Itoa(v))
	}
	col := Column{Name: idxValueColumn, Type: ColumnNumeric}
	switch img.Type {
	case IDXUint8:
		col.Lo, col.Hi = 0, 255
	case IDXInt8:
		col.Lo, col.Hi = -128, 127
	default:
		col.Lo, col.Hi = math.Inf(1), math.Inf(-1)
		for i := range img.Len() {
			v := img.At(i)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, &ParseError{File: images, Offset: int64(4+4*len(img.Dims)) + int64(i*img.ElemSize()), Msg: fmt.Sprintf("element %d is %v, want a finite number", i, v)}
			}
			col.Lo, col.Hi = min(col.Lo, v), max(col.Hi, v)
		}
		if !(col.Lo < col.Hi) { // constant or empty images: a valid range holding the value
			col.Lo, col.Hi = min(col.Lo, 0), max(col.Hi, 0)
			if col.Lo == col.Hi {
				col.Hi = 1
			}
		}
	}
	s.Columns = []Column{col}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("datasets: %s: the drafted schema is invalid: %w", images, err)
	}
	return s, nil
}
