/*
 * easyscale_spank.c - the exported SPANK entry points of the easyscale plugin
 * and their dispatch to one file per Slurm context (see plugin.h). These are
 * the only symbols the shared object exports.
 *
 * Contract: spank(8). Options are checked in the local (srun) and allocator
 * (sbatch, salloc) contexts, where a failure rejects the submission with a
 * message; the remote context (slurmstepd) never fails a task, because a
 * failing required plugin there fails steps and can drain nodes.
 */
#include "plugin.h"

#pragma GCC visibility push(default)

SPANK_PLUGIN(easyscale, 1);

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	if (es_parse_args(ac, av) < 0)
		return -1;
	return es_register_options(sp);
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	switch (spank_context()) {
	case S_CTX_LOCAL:
	case S_CTX_ALLOCATOR:
		return es_local_post_opt(sp);
	default:
		return 0;
	}
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (spank_remote(sp) != 1)
		return 0;
	return es_remote_task_init(sp);
}

#pragma GCC visibility pop
