package checkpoint

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// NoiseSegment is a stretch of a seeded run whose noise is drawn under one key: from step From
// on, under the trajectory whose fingerprint is Trajectory (hex SHA-256 of every configuration
// field that decides the parameters' path: engine.Config's trajectory fingerprint). A run
// starts with one segment at step 0; a resume that changes the trajectory (another cosine
// horizon, another replica count, …) adds one at its step, so that its noise is never the
// noise that another continuation of the same checkpoint draws on other parameters.
type NoiseSegment struct {
	From       int    `json:"from"`
	Trajectory string `json:"trajectory"`
}

// NoiseKey returns the Philox key of the noise of a seeded run that starts with trajectory
// fingerprint trajectory (64 hex digits): the first 8 bytes (little-endian) of
// SHA-256("dpsgd/noise/v1" ‖ 0 ‖ base ‖ trajectory bytes). base is the run's secret noise base
// (the engine's: a hash of the seed and the sampler's batches), which no checkpoint holds.
func NoiseKey(base []byte, trajectory string) (uint64, error) {
	t, err := trajectoryBytes(trajectory)
	if err != nil {
		return 0, err
	}
	h := sha256.New()
	h.Write([]byte("dpsgd/noise/v1\x00"))
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(base))))
	h.Write(base)
	h.Write(t)
	return binary.LittleEndian.Uint64(h.Sum(nil)), nil
}

// ForkNoiseKey returns the key of the segment that starts at step with trajectory fingerprint
// trajectory after a segment with key key: the first 8 bytes of
// SHA-256("dpsgd/noise-fork/v1" ‖ 0 ‖ key ‖ step ‖ trajectory bytes).
func ForkNoiseKey(key uint64, step int, trajectory string) (uint64, error) {
	t, err := trajectoryBytes(trajectory)
	if err != nil {
		return 0, err
	}
	h := sha256.New()
	h.Write([]byte("dpsgd/noise-fork/v1\x00"))
	h.Write(binary.LittleEndian.AppendUint64(nil, key))
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(step)))
	h.Write(t)
	return binary.LittleEndian.Uint64(h.Sum(nil)), nil
}

// SegmentsKey returns the key of the last of segs for a run of noise base base: NoiseKey of the
// first, then ForkNoiseKey along the rest.
func SegmentsKey(base []byte, segs []NoiseSegment) (uint64, error) {
	if len(segs) == 0 {
		return 0, fmt.Errorf("no noise segment")
	}
	key, err := NoiseKey(base, segs[0].Trajectory)
	for _, s := range segs[1:] {
		if err != nil {
			break
		}
		key, err = ForkNoiseKey(key, s.From, s.Trajectory)
	}
	return key, err
}

func trajectoryBytes(s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("trajectory fingerprint %q: want 64 hex digits", s)
	}
	return b, nil
}

// validateNoise checks the segments of a checkpoint at step.
func validateNoise(segs []NoiseSegment, step int) error {
	if len(segs) == 0 {
		return fmt.Errorf("no noise segment: want one from step 0")
	}
	prev := 0
	for i, s := range segs {
		if _, err := trajectoryBytes(s.Trajectory); err != nil {
			return fmt.Errorf("noise segment %d: %w", i, err)
		}
		if (i == 0 && s.From != 0) || s.From < prev || s.From > step {
			return fmt.Errorf("noise segment %d from step %d: want the first from 0 and the others in order, at most the checkpoint's step %d", i, s.From, step)
		}
		prev = s.From
	}
	return nil
}
