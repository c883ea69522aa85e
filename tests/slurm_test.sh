#!/usr/bin/env bash
# The SPANK plugin on a real Slurm (Debian 12's 22.05) on this one machine: munge, slurmctld and
# slurmd with a minimal configuration, `stepcast serve` on loopback, then srun with Megatron-LM
# commands: a job that fits gets PASS and runs; one that cannot fit is refused in enforce mode
# with the reason and no task started; warn mode prints and runs; a stopped service lets the
# job run with a warning. Every wait is bounded; the daemons are stopped at the end.
# Needs root and the packages scripts/setup.sh installs; exits 77 (skipped) without root.
set -u
root="$1"; bin="${STEPCAST:?}"; plugin="${STEPCAST_SPANK:?}"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root to run slurmctld/slurmd"; exit 77; }
for b in slurmctld slurmd srun munged; do command -v $b >/dev/null || [ -x /usr/sbin/$b ] || { echo "FAIL: $b missing (scripts/setup.sh)"; exit 1; }; done
W=$(mktemp -d /tmp/stepcast-slurm.XXXXXX); chmod 755 "$W"
fail=0; pids=(); started_munge=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
cleanup() {
  [ -f "$W/slurmd.pid" ] && kill "$(cat "$W/slurmd.pid")" 2>/dev/null
  [ -f "$W/slurmctld.pid" ] && kill "$(cat "$W/slurmctld.pid")" 2>/dev/null
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  sleep 1
  [ -f "$W/slurmd.pid" ] && kill -9 "$(cat "$W/slurmd.pid")" 2>/dev/null
  [ -f "$W/slurmctld.pid" ] && kill -9 "$(cat "$W/slurmctld.pid")" 2>/dev/null
  [ $started_munge -eq 1 ] && pkill -f "munged --socket=$W/munge/munge.socket" 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# munge: our own daemon on our own socket (works whether or not a system munged runs).
[ -f /etc/munge/munge.key ] || mungekey -c -k /etc/munge/munge.key
mkdir -p "$W/munge"; chown munge:munge "$W/munge"; chmod 755 "$W/munge"
runuser -u munge -- /usr/sbin/munged --socket="$W/munge/munge.socket" --pid-file="$W/munge/munged.pid" \
  --log-file="$W/munge/munged.log" --seed-file="$W/munge/munged.seed" --force || { echo "FAIL munged"; exit 1; }
started_munge=1

# stepcast serve on loopback.
(exec "$bin" serve --listen 127.0.0.1:0 --db "$W/stepcast.db" --port-file "$W/port" --quiet >"$W/serve.log" 2>&1) &
serve_pid=$!; pids+=($serve_pid)
for _ in $(seq 100); do [ -s "$W/port" ] && break; sleep 0.1; done
[ -s "$W/port" ] || { echo "FAIL stepcast serve did not start"; cat "$W/serve.log"; exit 1; }
server="127.0.0.1:$(cat "$W/port")"

# Slurm: one node, this machine.
node=$(slurmd -C | head -1)
cat > "$W/slurm.conf" <<CONF
ClusterName=stepcast-ci
SlurmctldHost=$(hostname -s)
AuthType=auth/munge
AuthInfo=socket=$W/munge/munge.socket
CredType=cred/munge
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation=$W/state
SlurmdSpoolDir=$W/spool
SlurmctldPidFile=$W/slurmctld.pid
SlurmdPidFile=$W/slurmd.pid
SlurmctldLogFile=$W/slurmctld.log
SlurmdLogFile=$W/slurmd.log
SlurmUser=root
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
PlugStackConfig=$W/plugstack.conf
CliFilterPlugins=cli_filter/lua
$node State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
# The two lines a cluster admin adds (README): the plugin in plugstack.conf (here with the test's
# server, and GPUs passed as arguments because this machine has none).
echo "required $plugin server=$server mode=off hardware=h100-sxm gpus_per_node=8 deadline_ms=3000" > "$W/plugstack.conf"
cp "$root/plugin/slurm/cli_filter.lua" "$W/cli_filter.lua"   # beside slurm.conf
export STEPCAST_BIN="$bin" STEPCAST_SERVER="$server" STEPCAST_HARDWARE=h100-sxm STEPCAST_GPUS_PER_NODE=8
mkdir -p "$W/state" "$W/spool"
export SLURM_CONF="$W/slurm.conf"
slurmctld -f "$W/slurm.conf" || { echo "FAIL slurmctld"; exit 1; }
slurmd -f "$W/slurm.conf" || { echo "FAIL slurmd"; exit 1; }
state=""
for _ in $(seq 60); do state=$(timeout 5 sinfo -h -o %T 2>/dev/null | head -1); [ "$state" = "idle" ] && break; sleep 0.5; done
[ "$state" = "idle" ] && ok "slurm node idle" || { bad "slurm node not idle ($state)"; tail -20 "$W/slurmctld.log" "$W/slurmd.log"; exit 1; }

# Megatron-LM commands: the task is a shell that records it ran (and the prediction id); the
# Megatron arguments after pretrain_gpt.py are what the plugin reads.
LLAMA70B="--num-layers 80 --hidden-size 8192 --num-attention-heads 64 --group-query-attention --num-query-groups 8
 --ffn-hidden-size 28672 --swiglu --normalization RMSNorm --position-embedding-type rope --disable-bias-linear
 --untie-embeddings-and-output-weights --seq-length 8192 --max-position-embeddings 8192 --micro-batch-size 1
 --global-batch-size 128 --tensor-model-parallel-size 4 --pipeline-model-parallel-size 8
 --num-layers-per-virtual-pipeline-stage 2 --sequence-parallel --use-distributed-optimizer --bf16
 --vocab-size 128256 --attention-dropout 0 --hidden-dropout 0 --lr 1.5e-4"
LLAMA405B_ON_8="--num-layers 126 --hidden-size 16384 --num-attention-heads 128 --group-query-attention
 --num-query-groups 8 --ffn-hidden-size 53248 --swiglu --normalization RMSNorm --position-embedding-type rope
 --disable-bias-linear --untie-embeddings-and-output-weights --seq-length 8192 --max-position-embeddings 8192
 --micro-batch-size 1 --global-batch-size 8 --bf16 --vocab-size 128256"
LLAMA8B_ON_8="--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --group-query-attention
 --num-query-groups 8 --ffn-hidden-size 14336 --swiglu --normalization RMSNorm --position-embedding-type rope
 --disable-bias-linear --untie-embeddings-and-output-weights --seq-length 8192 --max-position-embeddings 8192
 --micro-batch-size 1 --global-batch-size 128 --bf16 --use-torch-fsdp2 --recompute-granularity selective
 --vocab-size 128256 --attention-dropout 0 --hidden-dropout 0"
run() {  # run NAME MODE GPUS ARGS -> srun output in $out, exit code in $rc, marker written?
  local name="$1" mode="$2" gpus="$3"; shift 3
  rm -f "$W/ran.$name"
  out=$(timeout 60 srun -N1 -n1 --stepcast="$mode" --stepcast-gpus="$gpus" \
        bash -c "echo \${STEPCAST_PREDICTION_ID:-none} > $W/ran.$name" pretrain_gpt.py $* 2>&1); rc=$?
}

run fits enforce 64 $LLAMA70B
if [ $rc -eq 0 ] && grep -q "stepcast: PASS" <<<"$out" && [ -f "$W/ran.fits" ]; then ok "fitting job: PASS and it ran"; else bad "fitting job (rc $rc)"; echo "$out"; fi
grep -q "ignored (not modelled): --lr 1.5e-4" <<<"$out" && ok "unmodelled arguments listed" || bad "ignored args not listed"
grep -q "pred-" "$W/ran.fits" 2>/dev/null && ok "task sees STEPCAST_PREDICTION_ID" || bad "prediction id not in the task environment ($(cat "$W/ran.fits" 2>/dev/null))"

run oom enforce 8 $LLAMA405B_ON_8
if [ $rc -ne 0 ] && grep -q "stepcast: FAIL" <<<"$out" && grep -q "memory_fit" <<<"$out" && [ ! -f "$W/ran.oom" ]; then
  ok "non-fitting job refused in enforce mode, reason printed, no task"; else bad "enforce refusal (rc $rc, ran=$([ -f "$W/ran.oom" ] && echo yes || echo no))"; echo "$out"; fi

run warn warn 8 $LLAMA405B_ON_8
if [ $rc -eq 0 ] && grep -q "stepcast: FAIL (warn)" <<<"$out" && [ -f "$W/ran.warn" ]; then ok "warn mode prints and runs"; else bad "warn mode (rc $rc)"; echo "$out"; fi

run off off 8 $LLAMA405B_ON_8
if [ $rc -eq 0 ] && ! grep -q "stepcast:" <<<"$out" && [ -f "$W/ran.off" ]; then ok "off mode is silent"; else bad "off mode (rc $rc)"; echo "$out"; fi

# sbatch: cli_filter.lua pre-flights the batch script's Megatron line.
batch() {  # batch NAME MODE ARGS -> sbatch output in $out, exit code in $rc
  local name="$1" mode="$2"; shift 2
  # GPUs per node come from STEPCAST_GPUS_PER_NODE: this node has no GRES to request.
  printf '#!/bin/bash\n#SBATCH -N 1\n#SBATCH --stepcast=%s\n' "$mode" > "$W/$name.sh"
  printf 'echo ran > %s/batch.%s \\\n  || python3 pretrain_gpt.py %s\n' "$W" "$name" "$*" >> "$W/$name.sh"
  out=$(cd "$W" && timeout 60 sbatch --parsable -o /dev/null "$W/$name.sh" 2>&1); rc=$?
}
batch benforce enforce $LLAMA405B_ON_8
if [ $rc -ne 0 ] && grep -q "FAIL" <<<"$out" && grep -q "refusing the submission" <<<"$out"; then ok "sbatch: enforce refuses a job that cannot fit"; else bad "sbatch enforce (rc $rc)"; echo "$out"; fi
batch bwarn warn $LLAMA405B_ON_8
if [ $rc -eq 0 ] && grep -q "FAIL verdict, submitting anyway" <<<"$out"; then ok "sbatch: warn submits"; else bad "sbatch warn (rc $rc)"; echo "$out"; fi
batch bpass enforce $LLAMA8B_ON_8
if [ $rc -eq 0 ] && grep -q "PASS" <<<"$out"; then ok "sbatch: a fitting job passes"; else bad "sbatch pass (rc $rc)"; echo "$out"; fi
# A batch script as NVIDIA's examples write it (examples/llama/train_llama3_8b_h100_fp8.sh style):
# the command is built from variables, ${VAR:-default}, $((arithmetic)), arrays, += and an if on a
# variable; the filter evaluates them (running nothing) and pre-flights the expanded command.
# Nothing here would run: enforce refuses it (Llama 3 405B cannot fit on 8 GPUs).
cat > "$W/arrays.sh" <<'SH'
#!/bin/bash
#SBATCH -N 1
#SBATCH --stepcast=enforce
GPUS_PER_NODE=8
NUM_NODES=${SLURM_NNODES:-1}
WORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES))
DTYPE="bf16"
NUM_LAYERS=126
DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES   # one node
)
MODEL_ARGS=(
    --num-layers $NUM_LAYERS
    --hidden-size 16384 --num-attention-heads 128
    --group-query-attention --num-query-groups 8 --ffn-hidden-size 53248 --swiglu
    --normalization RMSNorm --position-embedding-type rope --disable-bias-linear
    --untie-embeddings-and-output-weights
)
TRAINING_ARGS=(--seq-length 8192 --max-position-embeddings 8192 --micro-batch-size 1 --global-batch-size 8)
PREC_ARGS=()
if [[ "$DTYPE" == "bf16" ]]; then
    PREC_ARGS+=("--bf16")
fi
DATA_ARGS=("--vocab-size 128256" --mock-data)
torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${MODEL_ARGS[@]} "${TRAINING_ARGS[@]}" ${PREC_ARGS[@]} ${DATA_ARGS[@]}
SH
out=$(cd "$W" && timeout 60 sbatch --parsable -o /dev/null "$W/arrays.sh" 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q "refusing the submission" <<<"$out" && grep -q "memory_fit" <<<"$out"; then
  ok "sbatch: a command built from bash variables and arrays is pre-flighted"; else bad "sbatch arrays (rc $rc)"; echo "$out"; fi
# A value from a command substitution is not evaluated: one line says why, the job is submitted.
printf '#!/bin/bash\n#SBATCH -N 1\nLAYERS=$(cat /etc/layers)\npython3 pretrain_gpt.py --num-layers $LAYERS\n' > "$W/subst.sh"
out=$(cd "$W" && timeout 60 sbatch --parsable -o /dev/null "$W/subst.sh" 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q "no pre-flight for .*subst.sh: --num-layers: .*(LAYERS (line 3): command substitution" <<<"$out"; then
  ok "sbatch: no pre-flight is said in one line, with the reason"; else bad "sbatch substitution (rc $rc)"; echo "$out"; fi
# ---- Issue 23 item 5: the command inside srun ... bash -c "$CMD", multi-line strings, ${VAR,,},
# heredocs, scripts on standard input, --wrap; only the variables the command uses are needed.
L405=$(echo $LLAMA405B_ON_8)   # one line
sbatch_out() {  # sbatch_out SCRIPT_FILE [sbatch args...] -> $out, $rc
  local file="$1"; shift
  out=$(cd "$W" && timeout 60 sbatch --parsable -o /dev/null "$@" "$file" 2>&1); rc=$?
}
cat > "$W/bashc.sh" <<SH
#!/bin/bash
#SBATCH -N 1
#SBATCH --stepcast=enforce
LOG_DIR=/logs/\$(date +%Y%m%d-%H%M%S)
RUN=\${RUN_NAME:-Llama405B}
CMD="python3 pretrain_gpt.py \\
  $L405 \\
  --save \$LOG_DIR --tensorboard-dir \$(pwd)/tb --wandb-exp-name \${RUN,,}"
srun --mpi=pmix -l --container-image=nvcr.io/nvidia/pytorch:25.01-py3 bash -c "cd /opt/megatron && \$CMD" 2>&1 | tee \$LOG_DIR/log
SH
sbatch_out "$W/bashc.sh"
if [ $rc -ne 0 ] && grep -q "refusing the submission" <<<"$out" && grep -q 'ignored (not modelled): --save /logs/\$LOG_DIR' <<<"$out"; then
  ok "sbatch: srun ... bash -c \"\$CMD\" with a multi-line string, \${VAR,,} and an unrelated \$(date) is pre-flighted"
else bad "sbatch bash -c (rc $rc)"; echo "$out"; fi

cat > "$W/heredoc.sh" <<SH
#!/bin/bash
#SBATCH -N 1
#SBATCH --stepcast=enforce
cat > \$HOME/run_megatron.sh <<'EOF'
python3 pretrain_gpt.py $L405
EOF
srun bash \$HOME/run_megatron.sh
SH
sbatch_out "$W/heredoc.sh"
if [ $rc -ne 0 ] && grep -q "refusing the submission" <<<"$out"; then ok "sbatch: a script written by a heredoc and run by srun bash is pre-flighted"
else bad "sbatch heredoc (rc $rc)"; echo "$out"; fi

# A training command that needs a value the filter cannot evaluate: one line with why.
printf '#!/bin/bash\n#SBATCH -N 1\nARGS=$(cat /etc/megatron_args)\npython3 pretrain_gpt.py $ARGS\n' > "$W/wholeargs.sh"
sbatch_out "$W/wholeargs.sh"
if [ $rc -eq 0 ] && grep -q "no pre-flight for .*wholeargs.sh: .*ARGS (line 3): command substitution" <<<"$out"; then
  ok "sbatch: arguments from \$(...) standing for whole words: no pre-flight, said in one line"; else bad "sbatch whole args (rc $rc)"; echo "$out"; fi

# sbatch --wrap.
out=$(cd "$W" && timeout 60 sbatch --parsable -o /dev/null -N 1 --stepcast=enforce --wrap="python3 pretrain_gpt.py $L405" 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q "refusing the submission" <<<"$out"; then ok "sbatch --wrap is pre-flighted"; else bad "sbatch --wrap (rc $rc)"; echo "$out"; fi

# The script on standard input: a regular file (sbatch < job.sh) is read again in pre_submit.
out=$(cd "$W" && timeout 60 sbatch --parsable -o /dev/null < "$W/bashc.sh" 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q "refusing the submission" <<<"$out"; then ok "sbatch < job.sh is pre-flighted"; else bad "sbatch < file (rc $rc)"; echo "$out"; fi

# On a pipe (sbatch <<EOF in bash 5.1+, cat job.sh | sbatch): held, read back from slurmctld,
# pre-flighted after submission; enforce + FAIL cancels it, a passing job is released.
job_state() { timeout 5 squeue -h -j "$1" -o "%T %r" 2>/dev/null; }
out=$(cd "$W" && cat "$W/bashc.sh" | timeout 60 sbatch --parsable -o /dev/null 2>&1); rc=$?
jid=$(grep -Eo '^[0-9]+$' <<<"$out" | tail -1)
if grep -q "holding the job for its pre-flight" <<<"$out" && grep -q "FAIL" <<<"$out" && grep -q "cancelled" <<<"$out" &&
   ! job_state "$jid" | grep -q PENDING; then ok "sbatch on a pipe: held, pre-flighted, cancelled in enforce mode"
else bad "sbatch pipe enforce (rc $rc, job $jid: $(job_state "$jid"))"; echo "$out"; fi
printf '#!/bin/bash\n#SBATCH -N 1\n#SBATCH --stepcast=enforce\necho ran > %s/batch.pipe || python3 pretrain_gpt.py %s\n' \
  "$W" "$(echo $LLAMA8B_ON_8)" > "$W/pipe_pass.sh"
out=$(cd "$W" && cat "$W/pipe_pass.sh" | timeout 60 sbatch --parsable -o /dev/null 2>&1); rc=$?
jid=$(grep -Eo '^[0-9]+$' <<<"$out" | tail -1)
if [ $rc -eq 0 ] && grep -q "PASS" <<<"$out" && ! job_state "$jid" | grep -q "JobHeldUser"; then
  ok "sbatch on a pipe: a passing job is released"; else bad "sbatch pipe pass (rc $rc, job $jid: $(job_state "$jid"))"; echo "$out"; fi

# Real submissions (tests/data/real_inputs). Megatron-LM's Megatron-FSDP DeepSeek-V3 example
# submits on stdin (sbatch <<EOF) the srun ... bash -x -c "${TRAINING_CMD}" script it builds: run
# it with its placeholders filled in (64 nodes: its MBS 4 x DP 512 divides its GBS 2048; on 128 nodes
# Megatron would refuse the batch), its sbatch replaced by a file, and pipe that into sbatch.
sed -e 's|^sbatch <<EOF|cat > "$W_INNER" <<EOF|' -e 's/your_own_num_nodes/64/' -e 's/gpu:your_own_gpu_per_node/gpu:8/' \
  -e 's/your_own_tasks_per_node/8/' -e 's/--time=your_own_time/--time=01:00:00/' -e '/your_own_partition/d' \
  -e '/your_own_account/d' -e '/--gres=gpu/d' "$root/tests/data/real_inputs/megatron/examples_megatron_fsdp_sbatch_mfsdp_deepseek_v3.sh" > "$W/mfsdp_outer.sh"
(cd "$W" && W_INNER="$W/mfsdp_inner.sh" MEGATRON_PATH="$W/megatron" OUTPUT_PATH="$W/mfsdp" WANDB=0 bash "$W/mfsdp_outer.sh" >/dev/null 2>&1)
out=$(cd "$W" && cat "$W/mfsdp_inner.sh" | STEPCAST_MODE=warn timeout 60 sbatch --parsable -o /dev/null 2>&1); rc=$?
if grep -Eq "stepcast preflight: (PASS|WARN|FAIL) +megatron command \(megatron-61L-7168h on 512 x" <<<"$out"; then
  ok "real: Megatron-LM's Megatron-FSDP DeepSeek-V3 sbatch <<EOF submission is pre-flighted"
else bad "real: Megatron-FSDP example (rc $rc)"; echo "$out"; fi
# NVIDIA's GPT-3 175B example as a batch script on 128 nodes (its $1..$5 given).
out=$(cd "$W" && STEPCAST_MODE=warn timeout 60 sbatch --parsable -o /dev/null -N 128 \
      "$root/tests/data/real_inputs/megatron/examples_gpt3_train_gpt3_175b_distributed.sh" /ckpt /tb /data/gpt2-vocab.json \
      /data/gpt2-merges.txt /data/text_document 2>&1); rc=$?
if grep -Eq "stepcast preflight: (PASS|WARN|FAIL) +megatron command \(megatron-96L-12288h on 1024 x" <<<"$out"; then
  ok "real: NVIDIA's GPT-3 175B example is pre-flighted (GPT-2 BPE vocabulary)"; else bad "real: GPT-3 175B (rc $rc)"; echo "$out"; fi
# torchtitan's README line and a Megatron-Bridge recipe, as batch scripts.
printf '#!/bin/bash\n#SBATCH -N 1\nNGPU=8 MODULE=llama3 CONFIG=llama3_8b ./run_train.sh --training.steps 10\n' > "$W/tt.sh"
out=$(cd "$W" && STEPCAST_MODE=warn timeout 60 sbatch --parsable -o /dev/null "$W/tt.sh" 2>&1); rc=$?
if grep -Eq "stepcast preflight: (PASS|WARN|FAIL) +torchtitan command \(Llama 3 8B on 8 x" <<<"$out"; then ok "torchtitan run_train.sh with MODULE/CONFIG is pre-flighted"
else bad "torchtitan run_train.sh (rc $rc)"; echo "$out"; fi
printf '#!/bin/bash\n#SBATCH -N 1\nsrun python scripts/training/run_recipe.py --recipe llama3_8b_pretrain_2gpu_h100_bf16_config train.train_iters=10\n' > "$W/mb.sh"
out=$(cd "$W" && STEPCAST_MODE=warn timeout 60 sbatch --parsable -o /dev/null "$W/mb.sh" 2>&1); rc=$?
if grep -Eq "stepcast preflight: (PASS|WARN|FAIL) +megatron-bridge command" <<<"$out"; then ok "a Megatron-Bridge recipe line is pre-flighted"
else bad "Megatron-Bridge recipe (rc $rc)"; echo "$out"; fi
timeout 10 scancel -u root 2>/dev/null

kill "$serve_pid"; wait "$serve_pid" 2>/dev/null
run down enforce 8 $LLAMA405B_ON_8
if [ $rc -eq 0 ] && grep -q "unreachable" <<<"$out" && [ -f "$W/ran.down" ]; then ok "service stopped: warning, job runs (fail open)"; else bad "fail open (rc $rc)"; echo "$out"; fi

grep -qi "drain" <(timeout 5 sinfo -h -o "%T %E") && bad "node drained" || ok "node not drained"
exit $fail
