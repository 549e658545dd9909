package cuda

import "fmt"

// OptimizerState downloads the optimizer's state into m and v, one slice per parameter
// tensor in nn.Params order (each of the tensor's length): m is the momentum ("momentum") or
// Adam's first moment, v Adam's second moment. Pass nil for a state the optimizer does not
// keep (m for "sgd", v for everything but "adam"). It returns the number of optimizer steps
// taken, Adam's bias-correction count (engine's optimizer.t). With the parameters
// (CopyParams) this is everything a checkpoint needs to continue the run on the device.
func (t *Trainer) OptimizerState(m, v [][]float32) (steps int, err error) {
	if err := t.checkState(m, v); err != nil {
		return 0, err
	}
	for li, l := range t.layers {
		if m != nil {
			if err := firstErr(Download(t.d, m[2*li], l.mw), Download(t.d, m[2*li+1], l.mb)); err != nil {
				return 0, err
			}
		}
		if v != nil {
			if err := firstErr(Download(t.d, v[2*li], l.vw), Download(t.d, v[2*li+1], l.vb)); err != nil {
				return 0, err
			}
		}
	}
	return t.adamT, nil
}

// SetOptimizerState uploads the optimizer's state (as OptimizerState returns it) and sets
// its step count, e.g. after a resume from a checkpoint.
func (t *Trainer) SetOptimizerState(m, v [][]float32, steps int) error {
	if steps < 0 {
		return fmt.Errorf("cuda: Trainer: optimizer steps %d: want ≥ 0", steps)
	}
	if err := t.checkState(m, v); err != nil {
		return err
	}
	for li, l := range t.layers {
		if m != nil {
			if err := firstErr(Upload(t.d, l.mw, m[2*li]), Upload(t.d, l.mb, m[2*li+1])); err != nil {
				return err
			}
		}
		if v != nil {
			if err := firstErr(Upload(t.d, l.vw, v[2*li]), Upload(t.d, l.vb, v[2*li+1])); err != nil {
				return err
			}
		}
	}
	t.adamT = steps
	return nil
}

// checkState checks that m and v are present exactly when the optimizer keeps them, with
// the parameters' shapes.
func (t *Trainer) checkState(m, v [][]float32) error {
	wantM, wantV := t.cfg.Optimizer != "sgd", t.cfg.Optimizer == "adam"
	if (m != nil) != wantM || (v != nil) != wantV {
		return fmt.Errorf("cuda: Trainer: optimizer %s state: moment1 given %v, moment2 given %v; want %v and %v",
			t.cfg.Optimizer, m != nil, v != nil, wantM, wantV)
	}
	for _, s := range []struct {
		name string
		ts   [][]float32
	}{{"moment1", m}, {"moment2", v}} {
		if s.ts == nil {
			continue
		}
		if len(s.ts) != 2*len(t.layers) {
			return fmt.Errorf("cuda: Trainer: %s: %d tensors, the model has %d", s.name, len(s.ts), 2*len(t.layers))
		}
		for li, l := range t.layers {
			if len(s.ts[2*li]) != l.in*l.out || len(s.ts[2*li+1]) != l.out {
				return fmt.Errorf("cuda: Trainer: %s of layer %d: %d and %d values, want %d and %d",
					s.name, li, len(s.ts[2*li]), len(s.ts[2*li+1]), l.in*l.out, l.out)
			}
		}
	}
	return nil
}

// ParamsFinite reports whether every parameter on the device is finite (the engine's guard
// against a diverged run), by the nonfinite_f32 kernel and one 4-byte download.
func (t *Trainer) ParamsFinite() (bool, error) {
	d := t.d
	if err := d.Zero(t.flag, 4); err != nil {
		return false, err
	}
	for _, l := range t.layers {
		if err := firstErr(d.Launch("nonfinite_f32", grid(int64(l.in*l.out)), t.flag, l.w, int64(l.in*l.out)),
			d.Launch("nonfinite_f32", grid(int64(l.out)), t.flag, l.b, int64(l.out))); err != nil {
			return false, err
		}
	}
	if err := Download(d, t.hFlag, t.flag); err != nil {
		return false, err
	}
	return t.hFlag[0] == 0, nil
}
