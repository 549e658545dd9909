package engine

import "github.com/dpsgd/dpsgd/engine/sampler"

// samplerKey returns the key of a secure sampler (sampler.Secure), which a checkpoint stores
// so that a resumed secure run draws the same batches for the rest of the epoch.
func samplerKey(s sampler.Sampler) ([32]byte, bool) { return sampler.SecureKey(s) }
