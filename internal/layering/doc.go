// Package layering has no code of its own: its test (layering_test.go) enforces the import
// rules between the repository's packages, the layers of docs/design.md:
//
//   - privacy imports none of engine, kernels, cuda, datasets (it is pure math);
//   - datasets imports none of engine, privacy;
//   - cuda imports none of engine, datasets, and no Go package of kernels (the device layer is a
//     leaf; PTX should come in as bytes);
//   - engine imports nothing of cmd, bench, audit, federated, ageaware, nor the front door (the
//     module's root package dpsgd, "." here): the studies, the command and the front door sit
//     on top of the engine, never under it;
//   - nothing imports cmd.
//
// Each rule covers the whole subtree of the packages it names (privacy/pld is privacy,
// kernels/cuda is kernels). The test reads `go list -json ./...` and fails on any import,
// test imports included, that breaks a rule, and on any dependency that reaches a forbidden
// package through packages that no rule covers. Known back edges are listed, with the reason
// they exist, in the test's allowlist, which must only shrink.
package layering
