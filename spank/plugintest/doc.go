// Package plugintest holds the tests of the C SPANK plugin in spank/plugin:
// it builds the plugin with the repository's make rules (spank/spank.mk) and
// checks the built file (only the slurm_spank_* entry points and SPANK data
// symbols exported; RELRO, BIND_NOW, stack protector, FORTIFY_SOURCE), checks the
// C validation against internal/elastic's shared case table, drives the
// helper runner (helper.c) against fake helpers, and, when the lab cluster is
// available, runs srun/sbatch against it. It has no non-test code.
package plugintest
