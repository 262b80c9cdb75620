// Package submit turns an sbatch command line into the submission of an
// EasyScale job; it is the logic of the easyscale-sbatch drop-in wrapper.
//
// The wrapper owns three options, --elastic, --logical-workers and
// --determinism (internal/elastic). It finds them on the command line, in
// the script's #SBATCH directives (read like sbatch does: up to the first
// line that is neither blank nor a comment) and in their EASYSCALE_*
// environment twins; the command line wins over a directive, a directive
// over the environment. Every other argument is passed to the real sbatch
// unchanged and in order, and sbatch's stdout, stderr and exit status are
// the wrapper's.
//
// For an EasyScale job the wrapper
//   - validates the request (errors name the option and where it came from);
//   - prepends --nodes=MIN (the core allocation is submitted at the minimum
//     size; the backfill daemon grows it) for an elastic request, and
//     --comment=<request> in the encoding of elastic.Comment;
//   - sets the resolved EASYSCALE_* twins in sbatch's environment, where the
//     SPANK plugin (when installed on the submit host) reads and checks them
//     and from where they reach the job;
//   - hides its own #SBATCH directives from sbatch, which refuses options it
//     does not know when the plugin is not installed: the lines become
//     "# easyscale-sbatch: …" comments in a private copy of the script that
//     keeps the script's base name (so the default job name is unchanged);
//     the copy is removed when sbatch exits.
//
// It refuses, for an EasyScale job: --nodes/-N (the wrapper sets it),
// --comment (the wrapper records the request there), heterogeneous jobs, and
// #SBATCH lines mixing its options with others. A job without any EasyScale
// option is passed through untouched.
//
// -h/--help prints the wrapper's own help ([Usage]) and exits 0 even where
// sbatch is missing or Slurm is not configured; sbatch's own --help output
// follows when sbatch gives it.
package submit
