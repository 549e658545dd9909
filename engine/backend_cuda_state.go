package engine

import (
	"fmt"

	"github.com/dpsgd/dpsgd/cuda"
)

// The host mirror of a device run: the parameters (b.params) and the optimizer's moments
// (b.opt.m, b.opt.v) on the host are brought up to date by pull before every use there (the
// moving average, evaluation, a checkpoint) and uploaded by push after a restore. The step
// count b.opt.t is the host's alone: the device kernels take each step's scalars.

// pull downloads the parameters and, with moments, the optimizer's moments into the mirror.
func (b *cudaBackend) pull(moments bool) error {
	if err := b.transfer(false, moments); err != nil {
		return fmt.Errorf("on the CUDA device: %w", err)
	}
	return nil
}

// push uploads the mirror's parameters and moments.
func (b *cudaBackend) push() error {
	if err := b.transfer(true, true); err != nil {
		return fmt.Errorf("on the CUDA device: %w", err)
	}
	return nil
}

// transfer copies parameters (and, with moments, the moments the optimizer keeps) between the
// mirror and the device: up uploads, else downloads.
func (b *cudaBackend) transfer(up, moments bool) error {
	move := func(host []float32, dev cuda.Buffer) error {
		if up {
			return cuda.Upload(b.d, dev, host)
		}
		return cuda.Download(b.d, host, dev)
	}
	for li, l := range b.layers {
		w, ok1 := b.params.List[2*li].Value.Data().([]float32)
		bias, ok2 := b.params.List[2*li+1].Value.Data().([]float32)
		if !ok1 || !ok2 || len(w) != l.in*l.out || len(bias) != l.out {
			return fmt.Errorf("parameters of layer %d do not match the model", li)
		}
		if err := firstErr(move(w, l.w), move(bias, l.b)); err != nil {
			return err
		}
		if !moments {
			continue
		}
		if b.opt.m != nil {
			if err := firstErr(move(b.opt.m[2*li], l.mw), move(b.opt.m[2*li+1], l.mb)); err != nil {
				return err
			}
		}
		if b.opt.v != nil {
			if err := firstErr(move(b.opt.v[2*li], l.vw), move(b.opt.v[2*li+1], l.vb)); err != nil {
				return err
			}
		}
	}
	nl := 2 * len(b.layers)
	for k, o := range b.others {
		w, ok := b.params.List[nl+k].Value.Data().([]float32)
		if !ok || len(w) != o.n {
			return fmt.Errorf("parameter %d does not match the model", nl+k)
		}
		if err := move(w, o.w); err != nil {
			return err
		}
		if !moments {
			continue
		}
		if b.opt.m != nil {
			if err := move(b.opt.m[nl+k], o.m); err != nil {
				return err
			}
		}
		if b.opt.v != nil {
			if err := move(b.opt.v[nl+k], o.v); err != nil {
				return err
			}
		}
	}
	return nil
}
