package ageaware

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/internal/seedmix"
	"github.com/dpsgd/dpsgd/kernels"
	"github.com/dpsgd/dpsgd/privacy"
)

// maxSampleValues bounds trials·m·(t_agg + 2), the float64s a Sample holds.
const maxSampleValues = 1 << 28

// laplaceStep is the NoiseKey.Step of the unit Laplace draws of a Sample (the
// client index is the Tensor).
const laplaceStep = 0x0003_6167_6561 // "age" in ASCII after 3: any fixed constant

// Sample is a set of simulated runs of the protocol, shared by every
// schedule and noise level (common random numbers): in each trial every
// client draws its |Dᵢ| records' trajectories from Initᵢ over t_agg steps with
// datasets.MarkovChain, and one unit Laplace draw from kernels.AddLaplace. A
// client with collection time t_c collects the states at t_c, whose values
// have the law of time 0 of the trajectory; its fresh data at t_agg are the
// same records t_agg − t_c steps later. So one trial gives, for each client,
// the collected mean Wᵢ, the fresh mean Fᵢ(a) at every age a and the noise
// direction Lᵢ; a schedule's noisy upload is clip(Wᵢ + ηᵢLᵢ, loᵢ, hiᵢ).
type Sample struct {
	p      *Problem
	trials int
	w      []float64 // [t·m + k]
	f      []float64 // [(t·m + k)·(T+1) + a]
	lap    []float64 // [t·m + k]
}

// Simulate draws trials independent runs (see Sample) from seed: the same
// seed gives the same Sample on every machine, whatever the number of
// goroutines. It stops early with ctx's error. trials must be ≥ 1.
func (p *Problem) Simulate(ctx context.Context, trials int, seed uint64) (*Sample, error) {
	if trials < 1 || trials > maxSampleValues/(p.m*(p.T+2)) {
		return nil, fmt.Errorf("ageaware: trials = %d, want trials in [1, %d] for %d clients and t_agg = %d: %w", trials, maxSampleValues/(p.m*(p.T+2)), p.m, p.T, privacy.ErrInvalidArgument)
	}
	m, L := p.m, p.T+1
	s := &Sample{p: p, trials: trials, w: make([]float64, trials*m), f: make([]float64, trials*m*L), lap: make([]float64, trials*m)}
	buf := make([]float64, trials)
	for k := range p.clients {
		clear(buf)
		kernels.AddLaplace(buf, 1, kernels.NoiseKey{Seed: seed, Step: laplaceStep, Tensor: uint32(k)})
		for t, v := range buf {
			s.lap[t*m+k] = v
		}
	}
	workers := min(runtime.GOMAXPROCS(0), max(1, trials/64))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for wk := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			trs := make([]datasets.Trajectories, m)
			for k, c := range p.clients {
				trs[k] = datasets.Trajectories{N: c.n, Len: L}
			}
			for t := wk; t < trials; t += workers {
				if (t/workers)%32 == 0 {
					if err := ctx.Err(); err != nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
						return
					}
				}
				for k, c := range p.clients {
					rng := rand.New(rand.NewPCG(seedmix.Next(seed^seedmix.Next(uint64(t))), seedmix.Next(uint64(k)+0x5851_f42d_4c95_7f2d)))
					tr := &trs[k]
					c.gen.Sample(tr, c.init, rng)
					sums := s.f[(t*m+k)*L : (t*m+k+1)*L]
					for j := 0; j < c.n; j++ {
						row := tr.States[j*L : (j+1)*L]
						for a, x := range row {
							sums[a] += c.values[x]
						}
					}
					nf := float64(c.n)
					s.w[t*m+k] = sums[0] / nf
					for a := range sums {
						sums[a] /= nf
					}
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return s, nil
}

// Trials returns the number of trials.
func (s *Sample) Trials() int { return s.trials }

// trialLoss is one trial's loss difference (W̃ − W^{agg})².
func (s *Sample) trialLoss(t int, ages []int, eta []float64) float64 {
	m, L := s.p.m, s.p.T+1
	acc := 0.0
	for k, c := range s.p.clients {
		u := s.w[t*m+k] + eta[k]*s.lap[t*m+k]
		u = math.Min(math.Max(u, c.lo), c.hi)
		acc += s.p.weights[k] * (u - s.f[(t*m+k)*L+ages[k]])
	}
	return acc * acc
}

// loss returns the mean loss over the trials and its standard error.
func (s *Sample) loss(ages []int, eta []float64) (mean, se float64) {
	var w welford
	for t := 0; t < s.trials; t++ {
		w.add(s.trialLoss(t, ages, eta))
	}
	return w.mean, w.stderr()
}

// Loss returns the Monte Carlo estimate of the expected loss difference of
// schedule s under target epsBar and mode, and its standard error. Errors as
// for Problem.Noise.
func (s *Sample) Loss(epsBar float64, mode NoiseMode, sch Schedule) (mean, stderr float64, err error) {
	ages, eta, err := s.p.prepare(epsBar, mode, sch)
	if err != nil {
		return 0, 0, err
	}
	mean, stderr = s.loss(ages, eta)
	return mean, stderr, nil
}

// welford accumulates a mean and variance (Welford 1962).
type welford struct {
	n       int
	mean, q float64
}

func (w *welford) add(x float64) {
	w.n++
	d := x - w.mean
	w.mean += d / float64(w.n)
	w.q += d * (x - w.mean)
}

func (w *welford) stderr() float64 {
	if w.n < 2 {
		return math.NaN()
	}
	return math.Sqrt(w.q / float64(w.n-1) / float64(w.n))
}

// lossCache evaluates many schedules on one Sample fast: a client's term
// pₖ(clip(Wₖ + ηₖLₖ) − Fₖ(aₖ)) over all trials depends only on (k, aₖ, ηₖ), so
// it is computed once per triple and a schedule costs m vector additions.
type lossCache struct {
	s    *Sample
	vec  map[lossKey][]float64
	acc  []float64
	size int // float64s held
}

type lossKey struct {
	k, a int
	eta  uint64
}

// maxCacheValues bounds the float64s a lossCache keeps before it starts over.
const maxCacheValues = 1 << 25

func (s *Sample) newLossCache() *lossCache {
	return &lossCache{s: s, vec: map[lossKey][]float64{}, acc: make([]float64, s.trials)}
}

func (c *lossCache) term(k, a int, eta float64) []float64 {
	key := lossKey{k, a, math.Float64bits(eta)}
	if v, ok := c.vec[key]; ok {
		return v
	}
	s := c.s
	if c.size+s.trials > maxCacheValues {
		clear(c.vec)
		c.size = 0
	}
	m, L := s.p.m, s.p.T+1
	cl := s.p.clients[k]
	w := s.p.weights[k]
	v := make([]float64, s.trials)
	for t := range v {
		u := s.w[t*m+k] + eta*s.lap[t*m+k]
		u = math.Min(math.Max(u, cl.lo), cl.hi)
		v[t] = w * (u - s.f[(t*m+k)*L+a])
	}
	c.vec[key] = v
	c.size += len(v)
	return v
}

// loss returns the mean loss of the schedule over the trials (as Sample.loss,
// up to the order of the floating-point sums).
func (c *lossCache) loss(ages []int, eta []float64) float64 {
	acc := c.acc
	copy(acc, c.term(0, ages[0], eta[0]))
	for k := 1; k < len(ages); k++ {
		v := c.term(k, ages[k], eta[k])
		for t, x := range v {
			acc[t] += x
		}
	}
	sum := 0.0
	for _, x := range acc {
		sum += x * x
	}
	return sum / float64(len(acc))
}
