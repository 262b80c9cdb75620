package trainer

import (
	"math"
	"slices"
)

// SparseDigester is an Engine whose digest may be left uncomputed for some
// steps, because hashing the model costs more than 1 % of a step (the torch
// engine: sha256 of ResNet-18's 44.7 MB takes about 32 ms on this CPU). The
// trainer decides which steps are hashed (digestPolicy) and records the
// others in the ledger as unhashed. The native engine does not implement
// it and is hashed every step.
type SparseDigester interface {
	Engine
	// HashNext says whether the next Step computes the digest; Digest
	// returns "" after a Step that did not.
	HashNext(hash bool)
	// HashSeconds is how long the last Step spent computing the digest (0
	// when it did not).
	HashSeconds() float64
	// DigestEvery is the interval the job file fixes (the torch engine's
	// [torch] digest_every_steps), 0 to let the trainer measure.
	DigestEvery() int
}

// Constants of the digest interval's measurement.
const (
	// digestBudget is the most hashing may cost, as a fraction of a step.
	digestBudget = 0.01
	// digestSamples is how many hashed steps are measured before K is chosen.
	digestSamples = 3
)

// digestPolicy chooses K, the interval of the ledger's digest, and says
// which completed steps are hashed: pure, fed with measured seconds.
//
// A step whose number (counted from 1, as the ledger's) is a multiple of K
// is hashed, so two runs with intervals K1 and K2 share the multiples of
// their least common multiple. Until K is known (the first digestSamples
// steps of a run) every step is hashed and measured; then K is the
// smallest integer with median(hash) / (K · median(step without hash)) ≤
// digestBudget. A fixed interval (the job file's) is used as given.
type digestPolicy struct {
	every      int
	fixed      bool
	hash, step []float64
}

// newDigestPolicy returns the policy of a run: fixed > 0 is the job file's
// interval, 0 measures. An engine that is not a SparseDigester has K = 1.
func newDigestPolicy(fixed int) *digestPolicy {
	if fixed > 0 {
		return &digestPolicy{every: fixed, fixed: true}
	}
	return &digestPolicy{}
}

// Every returns K, 0 while it is being measured.
func (p *digestPolicy) Every() int { return p.every }

// Hashed reports whether completed step s (>= 1) is hashed by the interval.
func (p *digestPolicy) Hashed(s int64) bool {
	return p.every == 0 || s%int64(p.every) == 0
}

// Observe records one hashed step: the seconds spent hashing and the
// step's whole wall time (hash included). After digestSamples of them K is
// chosen, unless fixed.
func (p *digestPolicy) Observe(hashSeconds, stepSeconds float64) {
	if hashSeconds <= 0 || stepSeconds <= hashSeconds || math.IsNaN(hashSeconds+stepSeconds) {
		return
	}
	p.hash = append(p.hash, hashSeconds)
	p.step = append(p.step, stepSeconds-hashSeconds)
	if !p.fixed && p.every == 0 && len(p.hash) >= digestSamples {
		p.every = chooseDigestEvery(median(p.hash), median(p.step))
	}
}

// Cost returns the median hash seconds measured and their ratio to the
// median step without hashing; ok is false before any measurement.
func (p *digestPolicy) Cost() (hashSeconds, ratio float64, ok bool) {
	if len(p.hash) == 0 {
		return 0, 0, false
	}
	h, s := median(p.hash), median(p.step)
	return h, h / s, true
}

// chooseDigestEvery is the smallest K >= 1 with hash / (K · step) <= digestBudget.
func chooseDigestEvery(hash, step float64) int {
	if hash <= 0 || step <= 0 {
		return 1
	}
	k := math.Ceil(hash/(digestBudget*step) - 1e-9)
	return int(max(1, min(k, 1e9)))
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
