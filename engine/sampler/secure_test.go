package sampler

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

// testKey returns a fixed 256-bit key for the secure variants in tests.
func testKey(b byte) [32]byte { return [32]byte{b, 0xd7, 0x5e, 0xc0, 31: b} }

// forModes runs f on s and on its secure variant Secure(s, key), as the
// subtests "default" and "secure": the law tests of the four samplers run on
// both, which checks that the secure samplers have the same law.
func forModes(t *testing.T, s Sampler, f func(t *testing.T, s Sampler)) {
	t.Helper()
	sec, err := Secure(s, testKey(byte(s.DatasetSize())))
	if err != nil {
		t.Fatalf("Secure(%s): %v", s.Name(), err)
	}
	t.Run("default", func(t *testing.T) { f(t, s) })
	t.Run("secure", func(t *testing.T) { f(t, sec) })
}

// secured returns a function that makes the secure variant, keyed by
// testKey(seed), of a constructor's result.
func secured(seed uint64) func(Sampler, error) (Sampler, error) {
	return func(s Sampler, err error) (Sampler, error) {
		if err != nil {
			return nil, err
		}
		return Secure(s, testKey(byte(seed)))
	}
}

// foreign is a Sampler that Secure does not know.
type foreign struct{ Sampler }

func (foreign) Name() string { return "foreign" }

// TestSecureKeyRoundTrip: SecureKey returns the key given to Secure (and
// ok = false for default samplers); Secure of a secure sampler replaces its
// key; every parameter of the sampler is kept; unknown samplers are refused
// with ErrInvalid; NewSecureKey gives distinct non-zero keys.
func TestSecureKeyRoundTrip(t *testing.T) {
	k1, err := NewSecureKey()
	if err != nil {
		t.Fatal(err)
	}
	k2, err := NewSecureKey()
	if err != nil {
		t.Fatal(err)
	}
	if k1 == k2 || k1 == ([32]byte{}) {
		t.Fatalf("NewSecureKey gave %x and %x", k1, k2)
	}
	for _, s := range []Sampler{
		must(NewShuffle(103, 10, 1)), must(NewPoisson(1000, 0.004, 1)),
		must(NewTruncatedPoisson(1000, 0.004, 9, 1)), must(NewAllocation(1000, 8, 1)),
	} {
		if _, ok := SecureKey(s); ok {
			t.Errorf("%s: default sampler reports a secure key", s.Name())
		}
		sec := must(Secure(s, k1))
		if got, ok := SecureKey(sec); !ok || got != k1 {
			t.Errorf("%s: SecureKey = %x, %v; want %x, true", s.Name(), got, ok, k1)
		}
		if sec.Name() != s.Name() || sec.DatasetSize() != s.DatasetSize() || sec.StepsPerEpoch() != s.StepsPerEpoch() ||
			sec.MaxBatchSize() != s.MaxBatchSize() || sec.ExpectedBatchSize() != s.ExpectedBatchSize() ||
			sec.SampleRate() != s.SampleRate() {
			t.Errorf("%s: Secure changed the sampler's parameters", s.Name())
		}
		if tr, ok := s.(*TruncatedPoisson); ok && sec.(*TruncatedPoisson).TruncationProbability() != tr.TruncationProbability() {
			t.Errorf("truncation probability changed")
		}
		re := must(Secure(sec, k2))
		if got, _ := SecureKey(re); got != k2 {
			t.Errorf("%s: Secure of a secure sampler kept key %x, want %x", s.Name(), got, k2)
		}
		if got, _ := SecureKey(sec); got != k1 {
			t.Errorf("%s: Secure modified its argument's key", s.Name())
		}
	}
	for _, s := range []Sampler{nil, foreign{must(NewPoisson(10, 0.5, 1))}} {
		if _, err := Secure(s, k1); !errors.Is(err, ErrInvalid) {
			t.Errorf("Secure(%T) error = %v, want ErrInvalid", s, err)
		}
		if _, ok := SecureKey(s); ok {
			t.Errorf("SecureKey(%T) ok", s)
		}
	}
}

// TestSecureDeterministic: a secure batch is a pure function of (key, epoch,
// step): samplers built separately, from different seeds, with the same key
// agree on every batch; another key, or the default stream, gives other
// batches.
func TestSecureDeterministic(t *testing.T) {
	key := testKey(1)
	other := key
	other[31] ^= 1 // one bit
	for _, mk := range []func(seed uint64) Sampler{
		func(seed uint64) Sampler { return must(NewShuffle(300, 32, seed)) },
		func(seed uint64) Sampler { return must(NewPoisson(300, 0.1, seed)) },
		func(seed uint64) Sampler { return must(NewTruncatedPoisson(300, 0.1, 28, seed)) },
		func(seed uint64) Sampler { return must(NewAllocation(300, 10, seed)) },
	} {
		def := mk(1)
		a, b, c := must(Secure(def, key)), must(Secure(mk(2), key)), must(Secure(def, other))
		m := a.StepsPerEpoch()
		var diffKey, diffDefault int
		for e := 0; e < 3; e++ {
			for st := m - 1; st >= 0; st-- {
				x := a.Batch(e, st, nil)
				if !slices.Equal(x, b.Batch(e, st, nil)) {
					t.Fatalf("%s: epoch %d step %d differs between samplers with the same key", a.Name(), e, st)
				}
				if !slices.Equal(x, c.Batch(e, st, nil)) {
					diffKey++
				}
				if !slices.Equal(x, def.Batch(e, st, nil)) {
					diffDefault++
				}
			}
		}
		if diffKey < 3*m-1 || diffDefault < 3*m-1 {
			t.Errorf("%s: of %d batches, %d differ under a one-bit key change and %d from the default stream",
				a.Name(), 3*m, diffKey, diffDefault)
		}
	}
}

// TestSecureTruncatedCoupling: with the same key, the secure truncated
// Poisson batch is a subset of the secure Poisson batch, equal to it when no
// truncation happens (the two share the Poisson stream domain, as the
// default samplers do).
func TestSecureTruncatedCoupling(t *testing.T) {
	key := testKey(9)
	po := must(Secure(must(NewPoisson(200, 0.1, 0)), key))
	tr := must(Secure(must(NewTruncatedPoisson(200, 0.1, 20, 0)), key))
	truncated := 0
	for e := 0; e < 20; e++ {
		for st := 0; st < po.StepsPerEpoch(); st++ {
			full, cut := po.Batch(e, st, nil), tr.Batch(e, st, nil)
			if len(full) <= 20 && !slices.Equal(full, cut) {
				t.Fatalf("epoch %d step %d: untruncated batches differ", e, st)
			}
			if len(full) > 20 {
				truncated++
				if len(cut) != 20 {
					t.Fatalf("truncated batch has %d examples", len(cut))
				}
				for _, v := range cut {
					if _, ok := slices.BinarySearch(full, v); !ok {
						t.Fatalf("truncated batch has %d, not in the Poisson batch", v)
					}
				}
			}
		}
	}
	if truncated == 0 {
		t.Error("no step truncated; the test checks nothing")
	}
}

// TestSecureSeedDerivation: the ChaCha8 key of a stream is SHA-256 of the
// documented byte string (rebuilt here independently), and distinct
// coordinates give distinct keys.
func TestSecureSeedDerivation(t *testing.T) {
	key := testKey(3)
	msg := append([]byte{}, key[:]...)
	msg = append(msg, "dpsgd/sampler/v1"...)
	msg = binary.LittleEndian.AppendUint64(msg, domainPoisson)
	msg = binary.LittleEndian.AppendUint64(msg, 7)
	msg = binary.LittleEndian.AppendUint64(msg, 11)
	if got, want := secureSeed(&key, domainPoisson, 7, 11), sha256.Sum256(msg); got != want {
		t.Errorf("secureSeed = %x, want SHA-256 of the documented string %x", got, want)
	}
	seen := map[[32]byte]bool{}
	for _, d := range []uint64{domainShuffle, domainPoisson, domainAllocation} {
		for e := 0; e < 4; e++ {
			for st := 0; st < 4; st++ {
				seen[secureSeed(&key, d, e, st)] = true
			}
		}
	}
	if len(seen) != 48 {
		t.Errorf("%d distinct stream keys for 48 coordinates", len(seen))
	}
}
