package daemon

import "github.com/easyscale/easyscale-slurm/internal/slurmcli"

// ownerUnresolved reports whether squeue printed a job's owner as a name
// stand-in where the daemon recorded a user name: when the name service
// cannot resolve a uid (an LDAP or sssd outage on the host squeue or
// slurmctld runs on), Slurm 24.11 prints the uid itself and Slurm 22.05
// prints "nobody" (uid_to_string, src/common/uid.c; both seen on the labs,
// with the owner's passwd entry removed). Such a job is neither taken for
// another user's (a reused id, whose record would end and leave the
// daemon's own job unmanaged) nor acted on: its records wait, unchanged,
// for a cycle that prints the name. A recorded name that is itself all
// digits, or "nobody", is compared as it is.
func ownerUnresolved(printed, recorded string) bool {
	return printed != recorded && standIn(printed) && !standIn(recorded)
}

// standIn reports whether user is what Slurm prints for a uid it cannot
// resolve: the uid's digits (24.11) or "nobody" (22.05).
func standIn(user string) bool { return slurmcli.Digits(user) || user == "nobody" }
