#!/usr/bin/env bash
# current-smoke.sh - `make lab-current-smoke`: bring the current lab up (Slurm 24.11 in a
# Debian 13 root, EASYSCALE_LAB_CURRENT=1) and check what the project relies on: the
# versions (prints "slurm 24.11" and "torch 2.6"), 4 nodes with typed GPU GRES (v100 on n1,
# n2; t4 on n3, n4), a GPU job's CUDA_VISIBLE_DEVICES, a shrink with
# `scontrol update JobId=X NumNodes=1`, a second shrink and a comment update (slurmdbd),
# a reservation that `squeue --start` shows for a job that must wait, the SPANK plugin
# built against 24.11's spank.h (bin/slurm-24.11) loaded by sbatch and srun, and the Debian
# package (docs/deploy.md): make deb for 24.11, its contents, apt-get install ./easyscale_*.deb
# in the root (this lab's overlay of it), the installed easyscale-sbatch, plugin and helper
# in a job, the installed daemon's dry cycle, python3 -c 'import easyscale', then apt-get
# remove (only the conffiles stay) and purge (nothing stays).
# Ends with "N passed, M failed"; exit status 1 when a check failed. A lab that was down
# is taken down again at the end; one that was up is left up (its jobs are not touched,
# the checks cancel only their own).
set -Eeuo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export EASYSCALE_LAB_CURRENT=1
t0=$SECONDS
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
check() { # check NAME CMD...: pass when CMD succeeds
	local name=$1
	shift
	if "$@"; then ok "$name"; else bad "$name"; fi
}

# shellcheck disable=SC2016 # dpkg-query formats and sh -c scripts are single-quoted on purpose
# package_checks DEB: the package's contents, then install, use, remove and purge it in the root
package_checks() {
	local deb=$1 multi=x86_64-linux-gnu contents out id
	local plugin=/usr/lib/$multi/slurm-wlm/easyscale_spank.so
	contents=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|')
	local want=(/usr/bin/easyscale /usr/bin/easyscale-sbatch /usr/bin/easyscale-plot /usr/bin/easyscale-simulate
		/usr/sbin/easyscale-backfilld /usr/libexec/easyscale/easyscale-gpuctx "$plugin"
		/etc/slurm/plugstack.conf.d/easyscale.conf /etc/easyscale/backfill.toml
		/usr/lib/systemd/system/easyscale-backfilld.service /usr/lib/python3/dist-packages/easyscale/__init__.py
		/usr/share/man/man1/easyscale.1.gz /usr/share/man/man1/easyscale-sbatch.1.gz
		/usr/share/man/man8/easyscale-backfilld.8.gz /usr/share/man/man8/easyscale-spank.8.gz
		/usr/share/doc/easyscale/copyright /usr/share/doc/easyscale/deploy.md)
	local missing=()
	for f in "${want[@]}"; do grep -qxF "$f" <<<"$contents" || missing+=("$f"); done
	check "dpkg-deb -c lists the programs, plugin, conffiles, unit, Python package, man pages${missing[*]:+ (missing: ${missing[*]})}" [ ${#missing[@]} = 0 ]
	check "it depends on Slurm 24.11's plugins only: $(dpkg-deb -f "$deb" Depends)" \
		grep -q 'slurm-wlm-basic-plugins (>= 24.11~), slurm-wlm-basic-plugins (<< 24.12~)' <(dpkg-deb -f "$deb" Depends)
	check "its conffiles are the plugstack line and the daemon's configuration" \
		[ "$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | sort | tr '\n' ' ')" = "/etc/easyscale/backfill.toml /etc/slurm/plugstack.conf.d/easyscale.conf " ]

	# apt-get install ./…deb in the root, as docs/deploy.md says (dependencies already there)
	if ! "$X" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "./$deb" >"$EASYSCALE_LAB_DIR/apt-install.log" 2>&1; then
		tail -n 5 "$EASYSCALE_LAB_DIR/apt-install.log" | sed 's/^/     /'
		bad "apt-get install ./$(basename "$deb") in the root"
		return
	fi
	ok "apt-get install ./$(basename "$deb") in the root"
	check "dpkg says it is installed" [ "$("$X" dpkg-query -W -f='${Status}' easyscale)" = "install ok installed" ]
	check "easyscale-sbatch on PATH is the installed one" [ "$("$X" sh -c 'command -v easyscale-sbatch')" = /usr/bin/easyscale-sbatch ]
	check "easyscale version prints the package's version" \
		[ "$("$X" easyscale version)" = "$(dpkg-deb -f "$deb" Version | sed 's/+slurm.*//')" ]
	out=$("$X" sh -c 'cd / && python3 -c "import easyscale, torch; print(easyscale.__file__, easyscale.__version__)"' 2>&1 || true)
	echo "     python3: $out"
	check "python3 imports easyscale from the package" grep -q '^/usr/lib/python3/dist-packages/easyscale/__init__.py ' <<<"$out"
	check "postinst byte-compiled it" "$X" sh -c 'ls /usr/lib/python3/dist-packages/easyscale/__pycache__/*.pyc >/dev/null'

	# the lab's plugstack line names the installed plugin, without a helper= argument: the
	# plugin finds its helper where the package put it (/usr/libexec/easyscale)
	if EASYSCALE_SPANK_SO=$plugin EASYSCALE_SPANK_ARGS='' bash tests/lab/lab-up.sh >/dev/null 2>&1 &&
		grep -qx "required $plugin" "$EASYSCALE_LAB_DIR/etc/plugstack.conf.d/easyscale.conf"; then
		ok "the lab's plugstack.conf.d/easyscale.conf names $plugin"
		check "sbatch --help lists --elastic (the installed plugin is loaded)" grep -q -- '--elastic' <("$X" sbatch --help)
		out=$EASYSCALE_LAB_DIR/smoke-pkg.out
		rm -f "$out"
		if id=$("$X" easyscale-sbatch --parsable -J smoke-pkg --elastic=1-2 --logical-workers=4 --gres=gpu:1 -t 2 \
			-o "$out" --wrap 'srun env' 2>&1); then
			ids+=("$id")
			for _ in $(seq 300); do grep -q '^EASYSCALE_GPU_COUNT=' "$out" 2>/dev/null && break; sleep 0.1; done
			check "the installed easyscale-sbatch records the request in the comment (es-req min=1 max=2 lw=4 d1)" \
				grep -q 'Comment=es-req min=1 max=2 lw=4 d1' <("$X" scontrol show job "$id")
			check "its task has the plugin's environment (EASYSCALE_TASK_ID, CUDA_DEVICE_ORDER=PCI_BUS_ID)" \
				sh -c 'grep -q "^EASYSCALE_TASK_ID=0$" "$1" && grep -q "^CUDA_DEVICE_ORDER=PCI_BUS_ID$" "$1"' sh "$out"
			check "the installed helper ran in the task (EASYSCALE_GPU_COUNT)" grep -q '^EASYSCALE_GPU_COUNT=' "$out"
		else
			echo "     $id"
			bad "easyscale-sbatch --elastic=1-2 submits"
		fi
	else
		bad "hooking the installed plugin into the lab"
	fi
	# the installed daemon, one dry cycle against the lab (its defaults: partition normal, v100 and t4)
	cat >"$EASYSCALE_LAB_DIR/smoke-backfill.toml" <<-EOF
		dry_run = true
		state_db = "$EASYSCALE_LAB_DIR/smoke-backfill.db"
		metrics_address = "off"
	EOF
	check "easyscale-backfilld --once --dry-run runs a cycle on the lab" \
		"$X" easyscale-backfilld --config "$EASYSCALE_LAB_DIR/smoke-backfill.toml" --once --dry-run
	"$X" scancel "${ids[@]}" 2>/dev/null || true
	ids=()
	# back to the work tree's plugin before the package goes
	bash tests/lab/lab-up.sh >/dev/null 2>&1 || true

	# remove: only the conffiles stay; purge: nothing stays
	local conf=(/etc/easyscale/backfill.toml /etc/slurm/plugstack.conf.d/easyscale.conf) left
	if "$X" env DEBIAN_FRONTEND=noninteractive apt-get remove -y -q easyscale >"$EASYSCALE_LAB_DIR/apt-remove.log" 2>&1; then
		ok "apt-get remove easyscale"
		check "dpkg keeps only its conffiles" [ "$("$X" dpkg-query -W -f='${Status}' easyscale)" = "deinstall ok config-files" ]
		# shellcheck disable=SC2046 # the package's paths, one word each
		left=$("$X" sh -c 'for f in "$@"; do [ -e "$f" ] && echo "$f"; done; for d in /usr/lib/python3/dist-packages/easyscale /usr/libexec/easyscale; do [ ! -e "$d" ] || echo "$d"; done' \
			sh $(grep -vxF -e /etc/easyscale/backfill.toml -e /etc/slurm/plugstack.conf.d/easyscale.conf <<<"$contents" | grep -v '/$') || true)
		check "no file of the package is left but the conffiles${left:+ (left: ${left//$'\n'/ })}" [ -z "$left" ]
		check "the conffiles are kept" "$X" test -f "${conf[0]}" -a -f "${conf[1]}"
	else
		tail -n 5 "$EASYSCALE_LAB_DIR/apt-remove.log" | sed 's/^/     /'
		bad "apt-get remove easyscale"
	fi
	if "$X" env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q easyscale >"$EASYSCALE_LAB_DIR/apt-purge.log" 2>&1; then
		ok "apt-get purge easyscale"
		check "dpkg forgets it" [ -z "$("$X" dpkg-query -W -f='${Status}' easyscale 2>/dev/null | grep -v 'not-installed')" ]
		left=$("$X" sh -c 'for f in "$@"; do [ -e "$f" ] && echo "$f"; done; true' sh "${conf[@]}" /etc/easyscale /var/lib/easyscale)
		check "purge leaves no conffile, /etc/easyscale or /var/lib/easyscale${left:+ (left: ${left//$'\n'/ })}" [ -z "$left" ]
	else
		tail -n 5 "$EASYSCALE_LAB_DIR/apt-purge.log" | sed 's/^/     /'
		bad "apt-get purge easyscale"
	fi
}

was_up=0
if [ -s "${EASYSCALE_LAB_DIR:-/tmp/easyscale-lab-current}/run/lab.pids" ]; then was_up=1; fi
exports=$(bash tests/lab/lab-up.sh)
eval "$exports"
echo "$exports"
X=$EASYSCALE_LAB_DIR/bin/lab-exec
ids=()
finish() {
	[ ${#ids[@]} -eq 0 ] || "$X" scancel "${ids[@]}" 2>/dev/null || true
	if [ "$was_up" = 0 ]; then bash tests/lab/lab-down.sh; fi
}
trap finish EXIT

# ---------------------------------------------------------------- versions
slurm=$("$X" scontrol --version | awk '{print $2}')
torch=$("$X" python3 -c 'import torch; print(torch.__version__)')
python=$("$X" python3 -c 'import platform; print(platform.python_version())')
echo "slurm ${slurm%.*} ($slurm)"
echo "torch ${torch%.*} ($torch, python $python)"
check "scontrol --version is 24.11" [ "${slurm%.*}" = 24.11 ]
check "sinfo --version is 24.11" [ "$("$X" sinfo --version | awk '{print $2}')" = "$slurm" ]
check "torch is 2.6" [ "${torch%.*}" = 2.6 ]

# ---------------------------------------------------------------- the SPANK plugin
# built against 24.11's spank.h in the root (bin/slurm-24.11, the current lab's default
# plugin path), then hooked by lab-up (plugstack.conf is read anew by every srun/sbatch)
so=bin/slurm-24.11/easyscale_spank.so
if "$X" make -s BIN=bin/slurm-24.11 spank-plugin >/dev/null && make -s BIN=bin/slurm-24.11 spank-helper &&
	bash tests/lab/lab-up.sh >/dev/null 2>&1; then
	check "sbatch --help lists --elastic (the plugin built against 24.11 is loaded)" \
		grep -q -- '--elastic' <("$X" sbatch --help)
	check "srun runs a step with the plugin loaded" [ "$("$X" srun -N1 -t 1 echo ok 2>&1)" = ok ]
else
	bad "building $so in the root"
fi

# ---------------------------------------------------------------- nodes and GRES
nodes=$("$X" sinfo -h -N -o '%N %G %T' | sort -u)
echo "$nodes" | sed 's/^/     /'
check "4 nodes" [ "$(echo "$nodes" | wc -l)" = 4 ]
check "n1, n2 have gpu:v100:4; n3, n4 gpu:t4:4" [ "$(echo "$nodes" | awk '{print $1, $2}' | tr '\n' ' ')" = "n1 gpu:v100:4 n2 gpu:v100:4 n3 gpu:t4:4 n4 gpu:t4:4 " ]

# wait_state ID STATE: until squeue shows the job in STATE (30 s)
wait_state() {
	for _ in $(seq 300); do
		[ "$("$X" squeue -h -j "$1" -o %T 2>/dev/null)" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# ---------------------------------------------------------------- a GPU job
out=$EASYSCALE_LAB_DIR/smoke-gpu.out
rm -f "$out"
id=$("$X" sbatch --parsable -J smoke-gpu --gres=gpu:v100:2 -t 2 -o "$out" \
	--wrap 'echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES SLURM_JOB_GPUS=$SLURM_JOB_GPUS node=$SLURMD_NODENAME"')
ids+=("$id")
for _ in $(seq 300); do [ -s "$out" ] && break; sleep 0.1; done
echo "     job $id: $(cat "$out" 2>/dev/null)"
check "a GPU job sees CUDA_VISIBLE_DEVICES" grep -qE '^CUDA_VISIBLE_DEVICES=[0-3],[0-3] ' "$out"

# ---------------------------------------------------------------- shrink
id=$("$X" sbatch --parsable -J smoke-shrink -N3 --gres=gpu:1 -t 5 -o /dev/null --wrap 'sleep 120')
ids+=("$id")
check "a 3-node job runs" wait_state "$id" RUNNING
"$X" scontrol update JobId="$id" NumNodes=2 >/dev/null 2>&1 || true
check "scontrol update NumNodes=2 shrinks it" [ "$("$X" squeue -h -j "$id" -o %D)" = 2 ]
"$X" scontrol update JobId="$id" NumNodes=1 >/dev/null 2>&1 || true
check "a second update NumNodes=1 shrinks it again" [ "$("$X" squeue -h -j "$id" -o %D)" = 1 ]
"$X" scontrol update JobId="$id" Comment="es smoke" >/dev/null 2>&1 || true
check "its comment can be updated after two resizes" [ "$("$X" squeue -h -j "$id" -o %k)" = "es smoke" ]

# ---------------------------------------------------------------- squeue --start
# n1 runs the shrunk job: a job that needs all 4 nodes waits for it, and backfill plans it
id=$("$X" sbatch --parsable -J smoke-wait -N4 --exclusive -t 5 -o /dev/null --wrap 'true')
ids+=("$id")
start=
for _ in $(seq 100); do
	start=$("$X" squeue -h --start -j "$id" -o '%S %Y' 2>/dev/null || true)
	case "$start" in 20[0-9][0-9]-*\ n*) break ;; esac
	sleep 0.1
done
echo "     job $id: start, planned nodes: $start"
check "squeue --start shows a planned start and nodes for a waiting job" grep -qE '^20[0-9]{2}-[0-9-]+T[0-9:]+ n' <<<"$start"

# ---------------------------------------------------------------- the Debian package
# docs/deploy.md on the lab: the package built for 24.11 (the plugin above) and installed with
# apt-get in the root, whose writes stay in this lab's overlay (current-lib.sh); the
# installed programs, plugin and Python package in use; then remove and purge
"$X" scancel "${ids[@]}" 2>/dev/null || true
ids=()
t_pkg=$SECONDS
deb=
if [ -f "$so" ] && deb=$(make -s deb DEB_SPANK=bin/slurm-24.11 2>"$EASYSCALE_LAB_DIR/make-deb.err" | tail -n1) && [ -f "$deb" ]; then
	ok "make deb DEB_SPANK=bin/slurm-24.11 built $(basename "$deb") ($((SECONDS - t_pkg)) s)"
else
	tail -n 5 "$EASYSCALE_LAB_DIR/make-deb.err" 2>/dev/null | sed 's/^/     /'
	bad "make deb DEB_SPANK=bin/slurm-24.11"
	deb=
fi
if [ -n "$deb" ]; then
	package_checks "$deb"
fi

echo "slurm ${slurm%.*} torch ${torch%.*}: $((SECONDS - t0)) s"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
