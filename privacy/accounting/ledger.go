package accounting

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/dpsgd/dpsgd/internal/boundedio"
	"github.com/dpsgd/dpsgd/privacy"
)

// LedgerVersion is the version of the ledger's JSON layout.
const LedgerVersion = 1

// maxLedgerBytes bounds what ReadLedger accepts.
const maxLedgerBytes = 1 << 20

// Ledger is the accounting state of a run: which accountant, the budget, the
// steps taken so far and what each epoch spent. It is small, serializes to
// JSON, and rebuilds its accountant (Accountant), so a checkpoint that carries
// it resumes with the same accounting.
type Ledger struct {
	Version int `json:"version"`
	Spec
	Adjacency string          `json:"adjacency"`
	Kind      Kind            `json:"kind"`
	Delta     float64         `json:"delta"`
	Budget    *privacy.Budget `json:"budget,omitempty"`
	Steps     int             `json:"steps"`
	Epochs    []EpochEntry    `json:"epochs"`
}

// EpochEntry is what one epoch spent: the steps done at its end and ε at the
// ledger's δ after it.
type EpochEntry struct {
	Epoch   int     `json:"epoch"`
	Steps   int     `json:"steps"`
	Epsilon float64 `json:"epsilon"`
}

// NewLedger starts an empty ledger for spec, reporting ε at delta, with an
// optional budget.
func NewLedger(spec Spec, delta float64, budget *privacy.Budget) (*Ledger, error) {
	acc, err := spec.New()
	if err != nil {
		return nil, err
	}
	if !(delta > 0 && delta < 1) {
		return nil, fmt.Errorf("accounting: delta = %g out of range (0, 1): %w", delta, privacy.ErrInvalidArgument)
	}
	if budget != nil {
		if err := budget.Validate(); err != nil {
			return nil, err
		}
		b := *budget
		budget = &b
	}
	kind, _ := spec.Kind()
	return &Ledger{Version: LedgerVersion, Spec: spec, Adjacency: acc.Adjacency(), Kind: kind,
		Delta: delta, Budget: budget, Epochs: []EpochEntry{}}, nil
}

// Accountant rebuilds the ledger's accountant.
func (l *Ledger) Accountant() (privacy.Accountant, error) { return l.Spec.New() }

// Record appends an epoch that ended after steps steps with ε spent. Steps
// must not decrease and ε must be a number.
func (l *Ledger) Record(epoch, steps int, eps float64) error {
	if steps < l.Steps {
		return fmt.Errorf("accounting: ledger steps = %d below the steps already recorded (%d): %w", steps, l.Steps, privacy.ErrInvalidArgument)
	}
	if math.IsNaN(eps) || eps < 0 {
		return fmt.Errorf("accounting: ledger epsilon = %g out of range [0, +Inf]: %w", eps, privacy.ErrInvalidArgument)
	}
	l.Steps = steps
	l.Epochs = append(l.Epochs, EpochEntry{Epoch: epoch, Steps: steps, Epsilon: eps})
	return nil
}

// MarshalJSON writes an epoch entry, with an ε that does not exist at the
// ledger's δ (+Inf) as null, so the output is always valid JSON.
func (e EpochEntry) MarshalJSON() ([]byte, error) {
	var eps *float64
	if !math.IsInf(e.Epsilon, 1) {
		eps = &e.Epsilon
	}
	return json.Marshal(struct {
		Epoch   int      `json:"epoch"`
		Steps   int      `json:"steps"`
		Epsilon *float64 `json:"epsilon"`
	}{e.Epoch, e.Steps, eps})
}

// UnmarshalJSON reads what MarshalJSON writes (null ε is +Inf).
func (e *EpochEntry) UnmarshalJSON(b []byte) error {
	var v struct {
		Epoch   int      `json:"epoch"`
		Steps   int      `json:"steps"`
		Epsilon *float64 `json:"epsilon"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	e.Epoch, e.Steps, e.Epsilon = v.Epoch, v.Steps, math.Inf(1)
	if v.Epsilon != nil {
		e.Epsilon = *v.Epsilon
	}
	return nil
}

// ReadLedger parses and validates a ledger written by MarshalJSON. Every field
// is checked: a ledger from a checkpoint decides what a resumed run may spend.
func ReadLedger(r io.Reader) (*Ledger, error) {
	data, err := boundedio.ReadAll(r, maxLedgerBytes, "accounting: ledger", fmt.Errorf("accounting: ledger: %w", privacy.ErrInvalidArgument))
	if err != nil {
		return nil, err
	}
	type plain Ledger
	var p plain
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("accounting: ledger JSON: %v: %w", err, privacy.ErrInvalidArgument)
	}
	if dec.More() {
		return nil, fmt.Errorf("accounting: ledger JSON: trailing data: %w", privacy.ErrInvalidArgument)
	}
	l := Ledger(p)
	if err := l.validate(); err != nil {
		return nil, err
	}
	return &l, nil
}

// validate checks a parsed ledger.
func (l *Ledger) validate() error {
	if l.Version != LedgerVersion {
		return fmt.Errorf("accounting: ledger version = %d, want %d: %w", l.Version, LedgerVersion, privacy.ErrInvalidArgument)
	}
	if err := l.Spec.Validate(); err != nil {
		return err
	}
	kind, _ := l.Spec.Kind()
	if l.Kind != kind {
		return fmt.Errorf("accounting: ledger kind = %q, want %q for %s/%s: %w", l.Kind, kind, l.Sampler, l.Method, privacy.ErrInvalidArgument)
	}
	if !(l.Delta > 0 && l.Delta < 1) {
		return fmt.Errorf("accounting: ledger delta = %g out of range (0, 1): %w", l.Delta, privacy.ErrInvalidArgument)
	}
	if l.Budget != nil {
		if err := l.Budget.Validate(); err != nil {
			return err
		}
	}
	if l.Steps < 0 {
		return fmt.Errorf("accounting: ledger steps = %d out of range [0, +Inf): %w", l.Steps, privacy.ErrInvalidArgument)
	}
	prev := 0
	for i, e := range l.Epochs {
		if e.Steps < prev || e.Steps > l.Steps {
			return fmt.Errorf("accounting: ledger epochs[%d].steps = %d out of range [%d, steps = %d]: %w", i, e.Steps, prev, l.Steps, privacy.ErrInvalidArgument)
		}
		if !(e.Epsilon >= 0) {
			return fmt.Errorf("accounting: ledger epochs[%d].epsilon = %g out of range [0, +Inf): %w", i, e.Epsilon, privacy.ErrInvalidArgument)
		}
		prev = e.Steps
	}
	if l.Epochs == nil {
		l.Epochs = []EpochEntry{}
	}
	acc, err := l.Spec.New()
	if err != nil {
		return err
	}
	if l.Adjacency != acc.Adjacency() {
		return fmt.Errorf("accounting: ledger adjacency = %q, want %q: %w", l.Adjacency, acc.Adjacency(), privacy.ErrInvalidArgument)
	}
	return nil
}
