package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/spf13/pflag"
)

// dataFlags are dpsgd train's flags for the user's own data (--dataset csv or idx), each
// file encoded with a public schema (docs/datasets.md).
type dataFlags struct {
	data, labels         string // --data: a CSV, or IDX images with --labels
	schema, label        string // --schema FILE; --label COLUMN overrides the schema's label column
	testData, testLabels string
	testSplit            float64
	// userColumn (--user-column) names the CSV column of the records' users: a user-level
	// run; maxUserRecords (--max-user-records) caps a user's records per step.
	userColumn     string
	maxUserRecords int
	// encodedWith is the validated schema the data was encoded with (--label applied), once
	// loadTrainTest has read it: what --save stores in the model.
	encodedWith *datasets.Schema
}

// ownDataFlags are the names of dataFlags' flags.
var ownDataFlags = []string{"data", "labels", "schema", "label", "test-data", "test-labels", "test-split", "user-column"}

// defaultTestSplit is the fraction held out as the test set without --test-data or
// --test-split.
const defaultTestSplit = 0.2

// publicSplitSeed seeds the shuffle of --test-split. It is fixed, not --seed: the split is
// public (the same file always splits the same way, and the training N it gives is public
// anyway), while --seed, which drives the noise, is private.
const publicSplitSeed = 0

func (d *dataFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&d.data, "data", "", "your own training data: a CSV file with a header (--dataset csv, implied by a .csv or .csv.gz name), or IDX images with --labels (--dataset idx); needs --schema")
	fs.StringVar(&d.labels, "labels", "", "--dataset idx: the IDX labels file of --data")
	fs.StringVar(&d.schema, "schema", "", "the public schema of --data (JSON: label classes, each column's bounds or categories; docs/datasets.md); dpsgd schema drafts one")
	fs.StringVar(&d.label, "label", "", "--dataset csv: the label column, instead of the schema's label.column")
	fs.StringVar(&d.testData, "test-data", "", "test set file, encoded with the same schema (IDX: with --test-labels); default: --test-split of --data")
	fs.StringVar(&d.testLabels, "test-labels", "", "--dataset idx: the IDX labels file of --test-data")
	fs.StringVar(&d.userColumn, "user-column", "", "--dataset csv: the column naming each record's user (opaque ids, removed from the features): a user-level run, whose unit of privacy is a user with all its records — users are sampled (--batch-size is then the expected users per step), each user's summed gradient is clipped to --clip, and the guarantee is user-level with N = the number of users. CPU only; no checkpoints")
	fs.IntVar(&d.maxUserRecords, "max-user-records", 0, "--user-column: the most records one user brings to a step, a seeded uniform subset of a user that owns more, in [1, --physical-batch] (default: --physical-batch); it bounds a step's cost, the guarantee holds whatever it is")
	fs.Float64Var(&d.testSplit, "test-split", 0, "fraction of --data held out as the test set by a fixed public shuffle (the split, and so the training N, are public); default 0.2 without --test-data")
}

// dataDirCIFARUsage is the help of --data-dir where cifar10 is among the datasets (train and
// eval).
const dataDirCIFARUsage = "directory holding the dataset files (MNIST IDX, Adult CSV or CIFAR-10 batches); empty: --cache-dir, where mnist and adult are downloaded (cifar10 only with --download)"

// addDataDirFlags registers --data-dir, with the help dataDirUsage (which names the datasets
// the command reads), and --cache-dir.
func addDataDirFlags(fs *pflag.FlagSet, dataDir, cacheDir *string, dataDirUsage string) {
	fs.StringVar(dataDir, "data-dir", "", dataDirUsage)
	fs.StringVar(cacheDir, "cache-dir", "", "download cache (default: the user cache directory/dpsgd)")
}

// addBuiltinDataFlags registers --dataset (synthetic, mnist or adult; default synthetic),
// --data-dir and --cache-dir: the data flags of the commands that read the built-in datasets
// but not CIFAR-10 (bench samplers, federated).
func addBuiltinDataFlags(fs *pflag.FlagSet, dataset, dataDir, cacheDir *string) {
	fs.StringVar(dataset, "dataset", "synthetic", "synthetic, mnist or adult")
	addDataDirFlags(fs, dataDir, cacheDir, "directory holding the dataset files (MNIST IDX or Adult CSV); empty: download into --cache-dir")
}

// resolveDataset infers --dataset from --data (idx with --labels, csv for a .csv or .csv.gz
// name) and checks that the data flags fit the dataset.
func (f *trainFlags) resolveDataset() error {
	d, set := &f.own, f.set
	if d.data != "" && !set["dataset"] {
		lower := strings.ToLower(d.data)
		switch {
		case d.labels != "":
			f.dataset = "idx"
		case strings.HasSuffix(lower, ".csv") || strings.HasSuffix(lower, ".csv.gz"):
			f.dataset = "csv"
		default:
			return usagef("--data %s: its format does not show in the name; give --dataset csv, or --dataset idx with --labels", quoteArg(d.data))
		}
	}
	own := f.dataset == "csv" || f.dataset == "idx"
	for _, name := range ownDataFlags {
		if set[name] && !own {
			return usagef("--%s: for --dataset csv or idx (your own data); --dataset %s reads its files from --data-dir", name, quoteArg(f.dataset))
		}
	}
	if !own {
		return nil
	}
	switch {
	case d.data == "":
		return usagef("--dataset %s needs --data FILE", f.dataset)
	case set["data-dir"] || set["cache-dir"]:
		return usagef("--data-dir and --cache-dir are for --dataset mnist, adult or cifar10; --dataset %s reads --data", f.dataset)
	case set["test-split"] && d.testData != "":
		return usagef("--test-split %v with --test-data: give one of them", d.testSplit)
	case set["test-split"] && !(d.testSplit > 0 && d.testSplit < 1):
		return usagef("--test-split %v: want a fraction in (0, 1)", d.testSplit)
	}
	if set["max-user-records"] && d.userColumn == "" {
		return usagef("--max-user-records %d: for a user-level run (--user-column)", d.maxUserRecords)
	}
	if d.userColumn != "" {
		switch {
		case f.dataset != "csv":
			return usagef("--user-column: for --dataset csv")
		case strings.TrimSpace(d.userColumn) == "":
			return usagef("--user-column %q: want a column name", d.userColumn)
		case set["max-user-records"] && d.maxUserRecords < 1:
			return usagef("--max-user-records %d: want ≥ 1", d.maxUserRecords)
		case f.checkpoint != "" || f.resume != "":
			return usagef("--checkpoint and --resume with --user-column: checkpoints of user-level runs are not supported")
		}
	}
	if f.dataset == "csv" {
		for _, name := range []string{"labels", "test-labels"} {
			if set[name] {
				return usagef("--%s: for --dataset idx; a CSV's label is a column, named by the schema or --label", name)
			}
		}
		return nil
	}
	switch {
	case set["label"]:
		return usagef("--label names a CSV column; --dataset idx reads the labels from --labels FILE")
	case d.labels == "":
		return usagef("--dataset idx needs --labels FILE, the labels of --data")
	case (d.testData == "") != (d.testLabels == ""):
		return usagef("--test-data and --test-labels go together for --dataset idx")
	}
	return nil
}

// loadTrainTest loads the training and test sets: the built-in datasets by loadData, the
// user's own data with its public schema.
func (f *trainFlags) loadTrainTest(ctx context.Context) (train, test *datasets.Dataset, err error) {
	if f.dataset == "cifar10" {
		return loadCIFAR10(ctx, f.dataDir, f.cacheDir, f.download)
	}
	if f.dataset != "csv" && f.dataset != "idx" {
		return loadData(ctx, f.dataset, f.dataDir, f.cacheDir, f.seed)
	}
	d := &f.own
	s, err := d.loadSchema(f.dataset)
	if err != nil {
		return nil, nil, err
	}
	d.encodedWith = s
	load := func(data, labels string) (*datasets.Dataset, error) {
		var ds *datasets.Dataset
		var err error
		if f.dataset == "csv" {
			ds, err = datasets.LoadCSVUsers(data, s, d.userColumn)
		} else {
			ds, err = datasets.LoadIDX(data, labels, s)
		}
		if err != nil {
			return nil, usageError{fmt.Errorf("dataset %s: %w", f.dataset, err)}
		}
		return ds, nil
	}
	if train, err = load(d.data, d.labels); err != nil {
		return nil, nil, err
	}
	if d.testData != "" {
		if test, err = load(d.testData, d.testLabels); err != nil {
			return nil, nil, err
		}
		return train, test, nil
	}
	frac := d.testSplit
	if !f.set["test-split"] {
		frac = defaultTestSplit
	}
	train, test, err = datasets.TrainTestSplit(train, frac, publicSplitSeed)
	if err != nil {
		return nil, nil, usagef("--test-split %v of --data %s: %v", frac, quoteArg(d.data), err)
	}
	return train, test, nil
}

// loadSchema reads --schema, refusing a drafted one, and applies --label. Without --schema it
// is a usage error that names what needs one and how to draft it.
func (d *dataFlags) loadSchema(dataset string) (*datasets.Schema, error) {
	if d.schema == "" {
		return nil, d.noSchema(dataset)
	}
	s, err := datasets.LoadSchema(d.schema)
	if err != nil {
		return nil, usagef("--schema: %v", err)
	}
	if s.Warning != "" {
		return nil, usagef("--schema %s was drafted from the data (its \"warning\" field is still there): its bounds, categories and classes "+
			"are statistics of the data, outside the privacy guarantee; replace them with public values, then delete the warning (docs/datasets.md)", quoteArg(d.schema))
	}
	if d.label != "" {
		s.Label.Column = d.label
		if err := s.Validate(); err != nil {
			return nil, usagef("--label %s with --schema %s: %v", quoteArg(d.label), quoteArg(d.schema), err)
		}
	}
	return s, nil
}

// noSchema is the refusal to train on --data without --schema: it lists the columns (or the
// IDX files) that need public bounds, categories or classes, and the command that drafts a
// schema.
func (d *dataFlags) noSchema(dataset string) error {
	why := "without a public schema, bounds, categories and classes would be fitted on the data, and every encoded record would depend on the others outside the privacy guarantee (docs/datasets.md)"
	if dataset == "idx" {
		return usagef("--schema is required for --data %s: the images need public bounds and the labels their classes; %s. Draft one with "+
			"`dpsgd schema --data %s --labels %s --out schema.json`, then replace its drafted values with public ones",
			quoteArg(d.data), why, quoteArg(d.data), quoteArg(d.labels))
	}
	header, err := datasets.CSVHeader(d.data)
	if err != nil {
		return usagef("--data: %v", err)
	}
	cols := make([]string, len(header))
	for i, h := range header {
		cols[i] = strconv.Quote(h)
	}
	label := d.label
	if label == "" {
		label = "COLUMN"
	}
	return usagef("--schema is required for --data %s: its columns %s need public bounds or categories, and the label its classes; %s. "+
		"Draft one with `dpsgd schema --data %s --label %s --out schema.json`, then replace its drafted values with public ones",
		quoteArg(d.data), strings.Join(cols, ", "), why, quoteArg(d.data), quoteArg(label))
}
