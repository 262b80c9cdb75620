package daemon

import "github.com/easyscale/easyscale-slurm/internal/slurmcli"

// owner is who a record of the daemon says owns a job: the user name
// squeue printed when the record was written and, in records written since
// backfillstore schema version 10, the numeric uid it printed beside it
// ("" before).
type owner struct{ name, uid string }

// recordUID is the uid a record's owner is compared by: the record's own
// (written since backfillstore schema version 10), or, for an older record,
// the uid the name service gives its name now (View.ownerUID; "" while the
// name does not resolve, and then compareOwner compares names). An old
// record naming "nobody" is so compared by nobody's uid, not matched by
// another user's job that 22.05 prints as the stand-in "nobody" (a helper's
// finding: such a job under a reused id was cancelled).
func (v *View) recordUID(name, uid string) string {
	if uid != "" {
		return uid
	}
	return v.ownerUID(name)
}

// ownerKey is the key per-user sums and the planner's per-user rules
// (the per-user cap, fair shares, the horizon of other users' work) use
// for listed job j's owner: the name squeue printed when the name service
// gives it j's uid (the usual case, so keys read as user names), else
// "uid:" and the uid. During a name-service outage Slurm prints stand-ins
// (24.11 the uid, 22.05 "nobody" for every uid it cannot resolve): keyed
// by the printed name, 22.05 would lump every such user, and the real
// nobody, into one. A name cannot hold ':' in the password database, so
// no name is taken for another user's key.
func (v *View) ownerKey(j slurmcli.Job) string {
	if j.UID == "" || v.ownerUID(j.User) == j.UID {
		return j.User
	}
	return "uid:" + j.UID
}

// ownerMatch is how a listed job's owner compares with a record's
// (compareOwner).
type ownerMatch int

const (
	// ownerSame: the record's owner owns the job.
	ownerSame ownerMatch = iota
	// ownerOther: another user owns it (Slurm reused the id, or the job is
	// another user's look-alike); the record does not describe it.
	ownerOther
	// ownerUnknown: the record has no uid and squeue printed the job's
	// owner as a name stand-in (ownerUnresolved); the record waits,
	// unchanged, for a cycle that prints the name.
	ownerUnknown
)

// compareOwner compares the owner a record names with the owner squeue
// lists for job j. A record with a uid is compared by uid, which squeue
// prints from the job record whether or not the name service resolves
// it, so a stand-in name neither hides the owner nor lends another user's
// job the owner's name (the real account "nobody" and 22.05's stand-in
// for an unresolved uid print alike). A record without one (schema before
// 10) is compared by name, and a stand-in makes it ownerUnknown.
func compareOwner(rec owner, j slurmcli.Job) ownerMatch {
	switch {
	case rec.uid != "" && j.UID != "":
		if rec.uid == j.UID {
			return ownerSame
		}
		return ownerOther
	case ownerUnresolved(j.User, rec.name):
		return ownerUnknown
	case j.User == rec.name:
		return ownerSame
	}
	return ownerOther
}

// sameOwner reports whether squeue lists jobs a and b under one owner: by
// uid, or by name for jobs listed without one.
func sameOwner(a, b slurmcli.Job) bool {
	if a.UID != "" && b.UID != "" {
		return a.UID == b.UID
	}
	return a.User == b.User
}

// ownerUnresolved reports whether squeue printed a job's owner as a name
// stand-in where the daemon recorded a user name: when the name service
// cannot resolve a uid (an LDAP or sssd outage on the host squeue or
// slurmctld runs on), Slurm 24.11 prints the uid itself and Slurm 22.05
// prints "nobody" (uid_to_string, src/common/uid.c; both seen on the labs,
// with the owner's passwd entry removed). Such a job is neither taken for
// another user's (a reused id, whose record would end and leave the
// daemon's own job unmanaged) nor acted on: its records wait, unchanged,
// for a cycle that prints the name. A recorded name that is itself all
// digits, or "nobody", is compared as it is. Only records without a uid
// need it (compareOwner).
func ownerUnresolved(printed, recorded string) bool {
	return printed != recorded && standIn(printed) && !standIn(recorded)
}

// standIn reports whether user is what Slurm prints for a uid it cannot
// resolve: the uid's digits (24.11) or "nobody" (22.05).
func standIn(user string) bool { return slurmcli.Digits(user) || user == "nobody" }
