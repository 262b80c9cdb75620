package daemon

// noteNotReady logs, once per job and reason, each running elastic job
// the daemon will not grow, lend for or shrink because it is not ready
// (ElasticJob.NotReady: no working directory, its owner printed as a
// stand-in the name service does not resolve, rendezvous files missing,
// not the owner's or written before this run): without it an admin sees
// an elastic job beside idle GPUs and no reason. A job is logged again
// when its reason changes, and once more when it becomes ready.
func (d *Daemon) noteNotReady(v *View) {
	seen := make(map[string]bool, len(v.Elastic))
	for _, e := range v.Elastic {
		if !e.Request.Elastic() {
			continue
		}
		id := e.Job.ID
		seen[id] = true
		last, logged := d.notReady[id]
		switch {
		case !e.Ready && e.NotReady != last:
			d.notReady[id] = e.NotReady
			d.log.Named("snapshot").Info("an elastic job is not ready: it is neither grown nor shrunk until it is",
				"job_id", id, "user", e.User, "reason", e.NotReady)
		case e.Ready && logged:
			delete(d.notReady, id)
			d.log.Named("snapshot").Info("an elastic job is ready again", "job_id", id, "user", e.User)
		}
	}
	for id := range d.notReady {
		if !seen[id] {
			delete(d.notReady, id)
		}
	}
}
