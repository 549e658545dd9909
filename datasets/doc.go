// Package datasets loads the labelled classification data that the DP-SGD engine trains on and
// makes synthetic data that needs no files.
//
// Every loader returns a [Dataset]: features as a row-major float32 matrix, integer labels in
// [0, Classes), and the per-example shape. The package provides
//
//   - [ReadIDX], a reader for the IDX format of MNIST (big-endian header, gzip detected by its
//     magic bytes, not by the file name), and [LoadMNIST] on top of it;
//   - [ReadCIFAR10] and [LoadCIFAR10] for CIFAR-10's binary batches (1 label byte + 3072 pixel
//     bytes a record, channel-major 3×32×32), pixels p/255 as MNIST's; [ExtractCIFAR10], which
//     unpacks the official archive's batches and nothing else (no path leaving the directory,
//     no link, no member or stream beyond the official sizes), and [FetchCIFAR10], which
//     downloads the archive on request only, checked against its published MD5 and SHA-256;
//   - [ReadAdultCSV], [NewAdultEncoder] and [LoadAdult] for the UCI Adult (Census Income) files,
//     encoded with a public schema ([AdultSchema]): one-hot over the categories adult.names
//     lists plus an other/unknown bucket, continuous columns clamped to fixed public bounds
//     and scaled to [0, 1] ([AdultCategoryLists], [AdultNumericBounds]; D = [AdultDim] = 113);
//   - [Schema], the public description of the user's own data (JSON: label classes, per column
//     numeric bounds, categories or ignore; docs/datasets.md), its [Encoder], which encodes each
//     record from its own fields ([RowEncoder.Encode] does one row, [RowEncoder.Features] one
//     row to predict on), [ReadCSV] and [LoadCSV] for CSV files ([Encoder.ReadFeatures] for a
//     table to predict on, without labels), [LoadIDX] and [IDXDataset] for IDX pairs
//     ([IDXFeatures] for images without labels), and [DraftSchema]
//     and [DraftIDXSchema], which propose a schema from the data, marked with [DraftWarning]
//     because its values are statistics of the data;
//   - [Synthetic], a reproducible Gaussian-mixture classification problem;
//   - [TrainTestSplit] and [Dataset.Subset];
//   - [MarkovChain], time-varying data from a finite Markov chain, with the 4-state birth–death
//     chain of Lin, Lin, Hsu & Huang ("Age aware scheduling for differentially-private
//     federated learning") and its electricity-use clients as presets ([BirthDeathChain],
//     [ElectricityClients]);
//   - [Fetch], [Verify] and [Resolve], which download files into a cache directory with SHA-256
//     verification (temporary file, verify, rename: never a half-written file).
//
// # Preprocessing never looks at the data
//
// In differentially private training the preprocessing is part of the mechanism: anything
// fitted on the training records (a vocabulary, a mean, a maximum) makes every encoded
// example, and possibly the model's input width, depend on every record, outside the privacy
// accounting. So every loader here encodes each record with a fixed, public map that reads
// that record only: MNIST and CIFAR-10 pixels p/255, Adult's public schema, synthetic and
// Markov data from their parameters alone, the user's data with the user's [Schema]. Removing
// or changing one record changes its own row and nothing else; the input shape is a constant
// of the loader ([Builtins] lists the built-in datasets' shapes).
// Tests check this for Adult, MNIST, CIFAR-10, CSV and IDX data.
//
// # Bad numeric input
//
// The policy is the same for every loader and every record. A value that is not a finite
// number (NaN, ±Inf, "nan", "inf" or "Infinity" in any case, hexadecimal or "_"-separated
// spellings that strconv.ParseFloat would accept, a number beyond float64, a missing number)
// rejects the whole file with a [ParseError] naming the file, the record's line (or byte
// offset) and the field; nothing is loaded. A finite value outside the field's public bounds
// is clamped to the nearer bound (Adult's continuous columns; MNIST's bytes cannot leave
// [0, 255]). No rule ever changes one record because of another.
//
// Malformed input never panics: it gives an error that names the file, the line or byte offset
// and the problem ([ParseError], matched by errors.Is(err, [ErrFormat])). Checksum and size
// mismatches match [ErrChecksum]. The package has no global mutable state; the published file
// tables are returned by functions ([MNISTFiles], [AdultFiles], [CIFAR10Files], [MNISTSource],
// [AdultSource], [CIFAR10Source], [Builtins]).
package datasets
