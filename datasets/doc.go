// Package datasets loads the labelled classification data that the DP-SGD engine trains on and
// makes synthetic data that needs no files.
//
// Every loader returns a [Dataset]: features as a row-major float32 matrix, integer labels in
// [0, Classes), and the per-example shape. The package provides
//
//   - [ReadIDX], a reader for the IDX format of MNIST (big-endian header, gzip detected by its
//     magic bytes, not by the file name), and [LoadMNIST] on top of it;
//   - [ReadAdultCSV], [FitAdultEncoder] and [LoadAdult] for the UCI Adult (Census Income) files,
//     with one-hot categoricals and standardized continuous columns fitted on the training file;
//   - [Synthetic], a reproducible Gaussian-mixture classification problem;
//   - [TrainTestSplit] and [Dataset.Subset];
//   - [MarkovChain], time-varying data from a finite Markov chain, with seed 003's 4-state
//     birth–death chain and its electricity-use clients as presets ([BirthDeathChain],
//     [ElectricityClients]);
//   - [Fetch], [Verify] and [Resolve], which download files into a cache directory with SHA-256
//     verification (temporary file, verify, rename: never a half-written file).
//
// Malformed input never panics: it gives an error that names the file, the line or byte offset
// and the problem ([ParseError], matched by errors.Is(err, [ErrFormat])). Checksum and size
// mismatches match [ErrChecksum]. The package has no global mutable state; the published file
// tables are returned by functions ([MNISTFiles], [AdultFiles], [MNISTSource], [AdultSource]).
package datasets
