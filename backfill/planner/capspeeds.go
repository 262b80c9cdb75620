package planner

// CapSpeeds returns a job's declared speeds (own: GPU type → throughput
// relative to the reference type, as the job's comment gives them) scaled
// down, all by one factor, so that the job is on no type faster than the
// site's table says (site; a type it does not list counts 1.0, the
// reference): own × min(1, min over the types t own lists of site[t] /
// own[t]). The job's ratios between types, which decide where it runs
// best, are kept; a declaration already within the table is returned as
// it is; nil or empty own gives own.
//
// The planner weighs GPUs by the speed each job gains from them, so a
// declared scale alone would win another user's GPUs: a job that said
// speeds=v100:100 took 5 of 6 lent V100s from an equal job (a tester's
// live finding). Only the site's table may say how fast a GPU is; a job
// may say only how its own speed differs between types.
func CapSpeeds(own, site map[string]float64) map[string]float64 {
	scale := 1.0
	for t, v := range own {
		ref, ok := site[t]
		if !ok {
			ref = 1
		}
		if v > 0 && ref/v < scale {
			scale = ref / v
		}
	}
	if scale == 1 {
		return own
	}
	out := make(map[string]float64, len(own))
	for t, v := range own {
		out[t] = v * scale
	}
	return out
}
