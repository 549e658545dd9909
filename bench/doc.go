// Package bench compares DP-SGD samplers and measures the cost of a private step: it is the
// library behind `dpsgd bench samplers` and `dpsgd bench step`.
//
// Samplers trains one model on one dataset with each sampler (shuffle, poisson,
// poisson-truncated, allocation) at each target (ε, δ): each run is assembled by the front door
// (package dpsgd), as `dpsgd train` assembles its own, so σ is calibrated with the sampler's own
// proven accountant (privacy/accounting, docs/accounting.md "Which statement for which
// sampler") and every number in the comparison is a guarantee for the sampler actually run. Shuffling is never accounted as if it were Poisson: the privacy-only
// comparison (PrivacyCurves) shows what Poisson accounting would claim for shuffling next to
// Chua et al.'s (2024) lower bound for shuffling, and labels it as not a valid guarantee.
//
// WriteReport writes the results into a directory as report.md (tables and figure links),
// results.json, results.csv (one row per training run) and PNG/SVG figures, each file written
// to a temporary file in that directory, synced and renamed, so that a reader never sees a
// half-written file. The numbers in report.md are the values of results.json, rounded once
// (Round) before both are written.
//
// Step times one DP-SGD step against one non-private step of the same model, interleaved in
// one run, as engine's BenchmarkStep does.
package bench
