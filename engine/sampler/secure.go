package sampler

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
)

// Secure returns a sampler of the same family, with the same parameters and
// exactly the same law as s, whose random streams come from a cryptographically
// strong generator keyed by key instead of from PCG keyed by the seed: the
// stream (family domain, epoch, step) that the default sampler draws from
// PCG(streamKey(seed, domain, epoch, step)) is drawn from
// ChaCha8(SHA-256(key ‖ "dpsgd/sampler/v1" ‖ domain ‖ epoch ‖ step)), with the
// three numbers as 8-byte little-endian words (math/rand/v2.ChaCha8 is a
// CSPRNG; SHA-256 as a key-derivation function makes the streams independent
// pseudorandom keys). The streams are consumed exactly as in the default
// sampler (per step for the Poisson kinds, per epoch for shuffle and
// allocation), so every batch is still a pure function of (key, epoch, step):
// a checkpoint needs only the key (SecureKey), and the seed of s is ignored.
// Without the key, the batches are unpredictable to anyone who does not hold
// it, which seeded PCG (64-bit seed, invertible generator) is not.
//
// s must come from NewShuffle, NewPoisson, NewTruncatedPoisson or
// NewAllocation (or Secure itself: the key is then replaced); any other
// Sampler gives an error wrapping ErrInvalid. The default samplers and their
// streams are unchanged by this function.
func Secure(s Sampler, key [32]byte) (Sampler, error) {
	k := &key
	switch v := s.(type) {
	case *Shuffle:
		return &Shuffle{n: v.n, b: v.b, m: v.m, seed: v.seed, key: k, cacheEpoch: -1}, nil
	case *Poisson:
		c := *v
		c.key = k
		return &c, nil
	case *TruncatedPoisson:
		c := TruncatedPoisson{Poisson: v.Poisson, maxBatch: v.maxBatch}
		c.key = k
		return &c, nil
	case *Allocation:
		return &Allocation{n: v.n, m: v.m, seed: v.seed, key: k, cacheEpoch: -1}, nil
	case nil:
		return nil, fmt.Errorf("%w: secure: sampler is nil", ErrInvalid)
	default:
		return nil, fmt.Errorf("%w: secure: sampler %q of type %T has no secure variant (need one of %s, %s, %s, %s)",
			ErrInvalid, s.Name(), s, NameShuffle, NamePoisson, NameTruncatedPoisson, NameAllocation)
	}
}

// SecureKey returns the key of a sampler made by Secure, and ok = false (with
// a zero key) for a default, seeded sampler or a foreign Sampler.
func SecureKey(s Sampler) (key [32]byte, ok bool) {
	var k *[32]byte
	switch v := s.(type) {
	case *Shuffle:
		k = v.key
	case *Poisson:
		k = v.key
	case *TruncatedPoisson:
		k = v.key
	case *Allocation:
		k = v.key
	}
	if k == nil {
		return key, false
	}
	return *k, true
}

// NewSecureKey returns a fresh 256-bit sampler key from the operating
// system's generator (crypto/rand). The error is that of crypto/rand.Read
// (which, since Go 1.24, aborts the program rather than fail).
func NewSecureKey() ([32]byte, error) {
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return key, fmt.Errorf("sampler: reading the OS generator for a secure key: %w", err)
	}
	return key, nil
}

// secureLabel separates the sampler's key derivation from any other use of
// the same key.
const secureLabel = "dpsgd/sampler/v1"

// secureSeed returns the ChaCha8 key of stream (domain, epoch, step) under
// key: SHA-256(key ‖ "dpsgd/sampler/v1" ‖ domain ‖ epoch ‖ step), the numbers
// as 8-byte little-endian words. The input has a fixed length, so distinct
// coordinates give distinct inputs.
func secureSeed(key *[32]byte, domain uint64, epoch, step int) [32]byte {
	var buf [32 + len(secureLabel) + 24]byte
	copy(buf[:32], key[:])
	copy(buf[32:], secureLabel)
	o := 32 + len(secureLabel)
	binary.LittleEndian.PutUint64(buf[o:], domain)
	binary.LittleEndian.PutUint64(buf[o+8:], uint64(epoch))
	binary.LittleEndian.PutUint64(buf[o+16:], uint64(step))
	return sha256.Sum256(buf[:])
}

// newSource returns the generator of stream (domain, epoch, step): PCG keyed
// by streamKey(seed, …) for a default sampler (key == nil), ChaCha8 keyed by
// secureSeed(key, …) for a secure one.
func newSource(seed uint64, key *[32]byte, domain uint64, epoch, step int) mrand.Source {
	if key != nil {
		return mrand.NewChaCha8(secureSeed(key, domain, epoch, step))
	}
	return mrand.NewPCG(streamKey(seed, domain, epoch, step))
}
