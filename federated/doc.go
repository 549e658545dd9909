// Package federated trains a model by federated learning with per-client differential privacy
// (the personalized-DP FL appendix, see privacy/personalized; docs/federated.md): N clients
// hold disjoint parts of a training set (PartitionIndices: IID or non-IID by label), each with
// its own budget (εᵢ, δᵢ), sample rate qᵢ and data share pᵢ (dpsgd.Client; ParseClients reads
// CSV or JSON clients files).
//
// The privacy side of a run is the front door's: a dpsgd.FederatedPlan, resolved by
// dpsgd.FederatedPlan.Resolve, checks every budget, clip norm and δ, fixes each client's
// selection bound, noise and accountant, and states the guarantees; New runs a resolved plan
// and validates none of them itself. A run has R rounds of K draws (Sampling: client i's count over the
// run is Binomial(K·R, qᵢ), as the appendix's Lemma 1 assumes); a selected client trains I
// local DP-SGD steps from the global model with its own noise (gradient perturbation, the
// default) or releases one noisy update (output perturbation), its noise calibrated by
// privacy/personalized to its budget and to Lemma 1's bound Rᵢ on its selections; the server
// aggregates by the appendix's eq. 15 with weights Cₙᵗ·pₙ/(K·qₙ) (Aggregate). Every round
// checks each client's selections against its Rᵢ and retires a client that has reached it, so
// the promised guarantee always holds. The report lists, per client, the budget, the noise, the
// selections, whether it was retired and the ε actually spent, plus eq. 11's utility cost and
// the test accuracy.
//
// Local training runs on engine.Learner: the engine's per-example clipping, counter-based
// Gaussian noise and optimizer. Runs are reproducible from the plan's Seed.
//
// Role: one of the repository's two research studies (with package ageaware), built on the
// front door (package dpsgd), the engine and the privacy packages, and driven by
// `dpsgd federated` and examples/federated_mnist. It imports the front door, never the reverse;
// the engine never imports it (internal/layering checks the import rules).
package federated
