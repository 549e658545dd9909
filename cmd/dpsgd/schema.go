package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/internal/atomicfile"
)

const schemaHeader = `Usage: dpsgd schema --data FILE --label COLUMN [--out FILE]
       dpsgd schema --data IMAGES --labels LABELS [--out FILE]

Drafts the schema that dpsgd train --data needs, from the data itself: numeric columns bounded
by their observed minimum and maximum, categorical columns with their most frequent values, the
label's classes as they occur (IDX: the labels' values, and the element type's range for bytes).
These are statistics of the data, NOT private: review the draft, replace every bound, category
and class with a public value, and delete its "warning" field; dpsgd train refuses a schema
that still has it (docs/datasets.md).`

// schemaWarning is printed on stderr by every draft.
const schemaWarning = "dpsgd schema: WARNING: the drafted bounds, categories and classes come from %s and are NOT private: " +
	"review the schema, replace each with a public value, then delete its \"warning\" field (dpsgd train refuses it until then; docs/datasets.md)\n"

func cmdSchema(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dpsgd schema")
	data := fs.String("data", "", "the data to draft a schema for: a CSV file with a header, or IDX images with --labels")
	label := fs.String("label", "", "CSV: the label column")
	labels := fs.String("labels", "", "IDX: the labels file of --data")
	maxCat := fs.Int("max-categories", datasets.DefaultDraftCategories, "CSV: most categories proposed per column (the most frequent values; the rest go to the other bucket)")
	out := fs.String("out", "", "write the schema to this file (atomically) instead of stdout")
	set, err := parseFlags(fs, args, stdout, schemaHeader)
	if err != nil {
		return err // pflag.ErrHelp after --help: report exits 0
	}
	switch {
	case *data == "":
		return usagef("--data FILE is required (a CSV, or IDX images with --labels)")
	case *labels != "" && set["label"]:
		return usagef("--label names a CSV column; with --labels (IDX) the labels are that file's values")
	case *labels == "" && *label == "":
		return usagef("--label COLUMN is required for a CSV: the column that holds the label")
	case *labels != "" && set["max-categories"]:
		return usagef("--max-categories is for a CSV; an IDX schema has one numeric column")
	case *maxCat < 1 || *maxCat > datasets.MaxSchemaCategories:
		return usagef("--max-categories %d: want 1 to %d", *maxCat, datasets.MaxSchemaCategories)
	}
	var s *datasets.Schema
	if *labels != "" {
		s, err = datasets.DraftIDXSchema(*data, *labels)
	} else {
		s, err = datasets.DraftCSVSchema(*data, datasets.DraftOptions{Label: *label, MaxCategories: *maxCat})
	}
	if err != nil {
		return usageError{fmt.Errorf("--data: %w", err)}
	}
	text, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the schema: %w", err)
	}
	text = append(text, '\n')
	if *out == "" {
		if _, err := stdout.Write(text); err != nil {
			return err
		}
	} else if err := atomicfile.WriteFile(*out, text, 0o644); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	fmt.Fprintf(stderr, schemaWarning, quoteArg(*data))
	if *labels != "" {
		c := s.Columns[0]
		fmt.Fprintf(stderr, "dpsgd schema: %d classes; every element bounded by [%g, %g]\n", len(s.Label.Classes), c.Lo, c.Hi)
	} else {
		count := map[string]int{}
		for _, c := range s.Columns {
			count[c.Type]++
		}
		fmt.Fprintf(stderr, "dpsgd schema: label %q with %d classes; %d numeric, %d categorical and %d ignored columns; D = %d\n",
			s.Label.Column, len(s.Label.Classes), count[datasets.ColumnNumeric], count[datasets.ColumnCategorical], count[datasets.ColumnIgnore], s.Dim())
	}
	return nil
}
