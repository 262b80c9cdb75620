package daemon

import "github.com/easyscale/easyscale-slurm/internal/slurmcli"

// ownerUnresolved reports whether squeue printed a job's owner as a bare
// uid where the daemon recorded a user name. Slurm prints the uid when the
// name service cannot resolve it (uid_to_string, src/common/uid.c, falls
// back to "%u" when getpwuid_r finds no entry: an LDAP or sssd outage on
// the host squeue or slurmctld runs on). Such a job is neither taken for
// another user's (a reused id, whose record would end and leave the
// daemon's own job unmanaged) nor acted on: its record waits, unchanged,
// for a cycle that prints the name. A recorded name that is itself all
// digits is compared as it is.
func ownerUnresolved(printed, recorded string) bool {
	return printed != recorded && slurmcli.Digits(printed) && !slurmcli.Digits(recorded)
}
