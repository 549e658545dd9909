package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/internal/seedmix"
	"github.com/dpsgd/dpsgd/kernels"
)

// User-level DP (Config.UserLevel; docs/privacy-math.md, "User-level privacy"): the unit of
// privacy is a user: neighbouring datasets differ in all records of one user. The
// sampler draws users (its N is the number of users); each drawn user brings its records, at
// most Config.MaxUserRecords of them per step (a seeded subset of a user that owns more); the
// user's gradient g_u = Σ_{i∈u} gᵢ over those records is clipped as one vector,
// c_u = min(1, C′/‖g_u‖) (0, and counted, when ‖g_u‖ is not finite), and the step's sum is
// Σ_u c_u·g_u. Removing a user then moves the sum by ‖c_u·g_u‖ ≤ C, however many records it
// owns: the same sensitivity as one record of a record-level run, so the same accountants
// apply with N = users and the rate over users (McMahan, Ramage, Talwar & Zhang 2018,
// "Learning Differentially Private Recurrent Language Models").
//
// The user's gradient is materialized for every layer — dense layers' A_uᵀ·E_u (a GEMM in
// float64 over the user's rows), convolutions' and materialized rules' per-example gradients
// summed over the user, an embedding's grouped rows summed — and the vector whose norm is
// measured is the vector summed. The ghost form of a group's norm,
// ‖[A_u, 1]ᵀE_u‖² = Σ_{i,j∈u}(aᵢ·aⱼ + 1)(eᵢ·eⱼ), is not used to clip: its Gram sums cancel
// when the user's records have nearly opposite gradients, its rounding error is then of the
// order of the records' gradients rather than of their sum, and a hostile user can make it
// hide a summed gradient thousands of times C (TestGroupGhostNormCancellation). The
// materialized gradient costs a dense layer Σ_u (|u| + 3)·In·Out operations (the GEMM, then
// writing, measuring and adding In·Out values per user), against B·In·Out for the record-level
// clipped GEMM: about 2× the record-level step for users of one record, 1.5× for users of
// eight (docs/benchmarks.md, "The user-level step").

// userIndex lists each user's records, for a user-level run: user u's are
// rec[off[u]:off[u+1]], in increasing order.
type userIndex struct {
	off, rec []int
	// limit is the most records of one user a step takes; seed keys the subsets.
	limit int
	seed  uint64
}

// newUserIndex indexes ds's users (ds.User must be valid) for steps of at most limit records
// per user, the subsets drawn from seed.
func newUserIndex(ds *datasets.Dataset, limit int, seed uint64) *userIndex {
	ui := &userIndex{off: make([]int, ds.Users+1), rec: make([]int, ds.N), limit: limit, seed: seed}
	for _, u := range ds.User {
		ui.off[u+1]++
	}
	for u := range ds.Users {
		ui.off[u+1] += ui.off[u]
	}
	next := slices.Clone(ui.off[:ds.Users])
	for i, u := range ds.User {
		ui.rec[next[u]] = i
		next[u]++
	}
	return ui
}

// userBatch is one step's users and their records: user k's records are
// rows[start[k]:start[k+1]].
type userBatch struct {
	rows  []int
	start []int
	pick  []int // scratch of the subset draw
}

// domainUserCap keeps the cap's subset streams apart from every other use of the seed.
const domainUserCap uint64 = 0x75736572636170 // "usercap"

// batch sets b to the records of users (a step's draw) at global step step: all of a user's
// records, or limit of them drawn uniformly without replacement from the stream (seed, step,
// user) and kept in increasing order when it owns more. A user's subset depends on the seed,
// the step and the user alone, never on the other users in the step.
func (ui *userIndex) batch(users []int, step int, b *userBatch) {
	b.rows, b.start = b.rows[:0], append(b.start[:0], 0)
	for _, u := range users {
		recs := ui.rec[ui.off[u]:ui.off[u+1]]
		if len(recs) <= ui.limit {
			b.rows = append(b.rows, recs...)
		} else {
			s := seedmix.Mix(seedmix.Mix(ui.seed^domainUserCap, uint64(step)), uint64(u))
			r := rand.New(rand.NewPCG(s, seedmix.Next(s)))
			b.pick = append(b.pick[:0], recs...)
			// Partial Fisher–Yates: the first limit entries are a uniform subset.
			for j := range ui.limit {
				k := j + r.IntN(len(b.pick)-j)
				b.pick[j], b.pick[k] = b.pick[k], b.pick[j]
			}
			sub := b.pick[:ui.limit]
			slices.Sort(sub)
			b.rows = append(b.rows, sub...)
		}
		b.start = append(b.start, len(b.rows))
	}
}

// userChunks packs a step's users into physical batches of phys rows, no user split across
// two (each has at most phys records): user after user, a new batch started when the next
// user does not fit. It returns rows, mask and gid resliced to k·phys entries: the dataset
// row, 1 for a real row and 0 for padding (pointing at row 0), and the row's user (its index
// in b, −1 for padding). An empty step gives one batch of padding: its noise is still added.
func userChunks(b *userBatch, phys int, rows []int, mask []float64, gid []int) ([]int, []float64, []int, int) {
	rows, mask, gid = rows[:0], mask[:0], gid[:0]
	pad := func() {
		for len(rows)%phys != 0 {
			rows, mask, gid = append(rows, 0), append(mask, 0), append(gid, -1)
		}
	}
	for k := range len(b.start) - 1 {
		recs := b.rows[b.start[k]:b.start[k+1]]
		if len(recs) > phys {
			panic(fmt.Sprintf("engine: userChunks: user with %d records in a step, physical batch %d", len(recs), phys))
		}
		if fill := len(rows) % phys; fill > 0 && fill+len(recs) > phys {
			pad()
		}
		for _, i := range recs {
			rows, mask, gid = append(rows, i), append(mask, 1), append(gid, k)
		}
	}
	pad()
	if len(rows) == 0 {
		for range phys {
			rows, mask, gid = append(rows, 0), append(mask, 0), append(gid, -1)
		}
	}
	return rows, mask, gid, len(rows) / phys
}

// userSummer is a backend that runs grouped steps — user-level steps, and augmented steps
// whose groups are an example's views (augment.go) — (the CPU's; CUDASupport refuses them).
type userSummer interface {
	clippedSumUsers(ds *datasets.Dataset, b *userBatch, clip float64, views *viewStep) (StepStats, error)
}

func (b *cpuBackend[T]) clippedSumUsers(ds *datasets.Dataset, ub *userBatch, clip float64, views *viewStep) (StepStats, error) {
	return gradStepUsers(b.reps, ds, ub, b.phys, clip, b.sums, &b.uc, views)
}

// userChunkBufs are the reusable buffers of userChunks.
type userChunkBufs struct {
	rows []int
	mask []float64
	gid  []int
}

// gradStepUsers is gradStep for a user-level step: the clipped sum Σ_u c_u·g_u of the users
// of ub into grads, in float64, combined over physical batches and replicas in a fixed order
// as gradStep's. The statistics count records: Clipped and NonFinite the records of the users
// whose gradient was clipped or not finite. With views (an augmented step) the groups are
// examples' views and the statistics count examples (physicalUsers).
func gradStepUsers[T kernels.Float](reps []*replica[T], ds *datasets.Dataset, ub *userBatch, phys int, clip float64, grads [][]float64, bufs *userChunkBufs, views *viewStep) (StepStats, error) {
	rows, mask, gid, k := userChunks(ub, phys, bufs.rows, bufs.mask, bufs.gid)
	bufs.rows, bufs.mask, bufs.gid = rows, mask, gid
	for _, r := range reps {
		r.reset()
	}
	var wg sync.WaitGroup
	errs := make([]error, len(reps))
	for ri, r := range reps {
		if ri >= k {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := ri; j < k; j += len(reps) {
				lo, hi := j*phys, (j+1)*phys
				if err := r.physicalUsers(ds, rows[lo:hi], mask[lo:hi], gid[lo:hi], clip, views); err != nil {
					errs[ri] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return reduceReplicas(reps[:min(k, len(reps))], errs, grads)
}

// physicalUsers runs one physical batch of whole users through the graph and adds each
// user's clipped gradient c_u·g_u into r.grads. gid gives each row's user (−1: padding); a
// user's rows are contiguous.
//
// With views (augment.go) a group is one example's K views: the rows are filled with the
// views (fillViews), the group's gradient is the mean (1/K)·Σ_k g_{i,k}, clipped as one
// vector, and the statistics count the example once: Clipped and NonFinite per example, its
// loss the mean of its views' losses, correct when its first view is classified correctly.
func (r *replica[T]) physicalUsers(ds *datasets.Dataset, rows []int, mask []float64, gid []int, clip float64, views *viewStep) error {
	r.fill(ds, rows, mask)
	if views != nil {
		fillViews(r.x.Data().([]T), ds, rows, mask, gid, views)
	}
	if err := r.setDropoutSeeds(rows); err != nil {
		return err
	}
	if err := r.runNet(); err != nil {
		return err
	}
	b := len(rows)
	taps, mats := r.net.Taps(), r.net.MatTaps()
	// The per-example gradients of the convolutions and materialized rules (their norms,
	// written into norm2, are not used: the user's norm is taken of the user's sum).
	clear(r.norm2)
	for li, t := range taps {
		if t.Shape.Positions > 1 {
			convGrads(r.norm2, r.conv[li], t.A().Data().([]T), t.E().Data().([]T), b, t.Shape)
		}
	}
	for k, t := range mats {
		matGrads(r.norm2, r.mat[k], t, b)
	}
	if r.ug == nil {
		for _, g := range r.tmp {
			r.ug = append(r.ug, make([]float64, len(g)))
		}
	}
	for _, g := range r.tmp {
		clear(g)
	}
	logits, y, k := r.net.Logits().Data().([]T), r.y.Data().([]T), ds.Classes
	n2, c := make([]float64, 1), make([]float64, 1)
	for lo := 0; lo < b; {
		if mask[lo] == 0 {
			lo++
			continue
		}
		hi := lo + 1
		for hi < b && gid[hi] == gid[lo] && mask[hi] != 0 {
			hi++
		}
		r.userGrad(lo, hi)
		units := hi - lo // the records the group counts for: its records, or one example
		if views != nil {
			units = 1
			inv := 1 / float64(hi-lo)
			for _, g := range r.ug {
				for j := range g {
					g[j] *= inv
				}
			}
		}
		n2[0] = 0
		for _, g := range r.ug {
			n2[0] += kernels.SqNorm(g)
		}
		nf := kernels.ClipCoefs(c, n2, nil, clip)
		if nf > 0 {
			r.nonFinite += units
		}
		if c[0] < 1 {
			r.clipped += units
		}
		if c[0] != 0 {
			for p, g := range r.ug {
				d := r.tmp[p]
				for j, v := range g {
					d[j] += c[0] * v
				}
			}
		}
		// The records' statistics; a user whose gradient is not finite adds neither loss nor
		// a correct prediction (as a non-finite record in a record-level step).
		finite := nf == 0
		if views != nil {
			r.count++
			if finite {
				for i := lo; i < hi; i++ {
					r.loss += nn.RowLoss(r.net.Arch.Loss, logits[i*k:(i+1)*k], y[i*k:(i+1)*k]) / float64(hi-lo)
				}
				if argmax(logits[lo*k:(lo+1)*k]) == argmax(y[lo*k:(lo+1)*k]) {
					r.correct++
				}
			}
			lo = hi
			continue
		}
		for i := lo; i < hi; i++ {
			r.count++
			if !finite {
				continue
			}
			zi, yi := logits[i*k:(i+1)*k], y[i*k:(i+1)*k]
			r.loss += nn.RowLoss(r.net.Arch.Loss, zi, yi)
			if argmax(zi) == argmax(yi) {
				r.correct++
			}
		}
		lo = hi
	}
	for p, g := range r.tmp {
		addInto(r.grads[p], g)
	}
	if r.inspect != nil {
		r.inspect(r, rows, mask)
	}
	return nil
}

// userGrad sets r.ug to the gradient of the user whose rows are [lo, hi) of the last run:
// every parameter's Σ_{i∈[lo,hi)} gᵢ, in float64, from that user's rows alone.
func (r *replica[T]) userGrad(lo, hi int) {
	n := hi - lo
	for li, t := range r.net.Taps() {
		s := t.Shape
		gw, gb := r.ug[2*li], r.ug[2*li+1]
		clear(gb)
		if s.Positions > 1 {
			d, h := s.In, s.Out
			w := (d + 1) * h
			clear(gw)
			for i := lo; i < hi; i++ {
				gi := r.conv[li][i*w : (i+1)*w]
				for j, v := range gi[:d*h] {
					gw[j] += float64(v)
				}
				for j, v := range gi[d*h:] {
					gb[j] += float64(v)
				}
			}
			continue
		}
		// A dense layer: A_uᵀ·E_u, a GEMM over the user's rows widened exactly to float64,
		// and the bias Σ eᵢ.
		a := t.A().Data().([]T)[lo*s.In : hi*s.In]
		e := t.E().Data().([]T)[lo*s.Out : hi*s.Out]
		r.uwA = widenInto(r.uwA, a)
		r.uwE = widenInto(r.uwE, e)
		kernels.Gemm(true, false, s.In, s.Out, n, 1, r.uwA, s.In, r.uwE, s.Out, 0, gw, s.Out)
		for i := range n {
			for j, v := range r.uwE[i*s.Out : (i+1)*s.Out] {
				gb[j] += v
			}
		}
	}
	for k, t := range r.net.MatTaps() {
		off := 0
		for _, p := range t.Params {
			clear(r.ug[p])
		}
		for _, p := range t.Params {
			d := r.ug[p]
			for i := lo; i < hi; i++ {
				gi := r.mat[k][i*t.Width+off : i*t.Width+off+len(d)]
				for j, v := range gi {
					d[j] += v
				}
			}
			off += len(d)
		}
	}
	for _, t := range r.net.SparseTaps() {
		d := r.ug[t.Param]
		clear(d)
		for i := lo; i < hi; i++ {
			t.AddClipped(d, i, 1) // 1·v is exact: the user's grouped rows, summed
		}
	}
}

// widenInto returns x widened to float64 in dst (grown as needed).
func widenInto[T kernels.Float](dst []float64, x []T) []float64 {
	if cap(dst) < len(x) {
		dst = make([]float64, len(x))
	}
	dst = dst[:len(x)]
	for j, v := range x {
		dst[j] = float64(v)
	}
	return dst
}

// checkUserLevel checks a user-level run's data and sampler.
func checkUserLevel(train *datasets.Dataset, n int) error {
	if train.User == nil || train.Users < 1 {
		return fmt.Errorf("a user-level run needs user ids on the training set (Dataset.User; dpsgd train --user-column)")
	}
	if err := train.Validate(); err != nil {
		return err
	}
	if n != train.Users {
		return fmt.Errorf("sampler is for %d units, the training set has %d users: a user-level run samples users", n, train.Users)
	}
	return nil
}
