# The default SLURM resource profile of `bench run --cluster slurm` (--profile default).
# Keys are submitit AutoExecutor parameters: shared ones (timeout_min, gpus_per_node, cpus_per_task,
# mem_gb, nodes, tasks_per_node) and slurm_-prefixed ones (slurm_partition, slurm_account, slurm_qos,
# slurm_setup, slurm_additional_parameters, slurm_signal_delay_s, ...). Unknown keys are refused.
default = dict(
    timeout_min=24 * 60,
    gpus_per_node=1,
    cpus_per_task=8,
    mem_gb=32,
    slurm_signal_delay_s=120,  # USR2 this long before the time limit: checkpoint and requeue
    slurm_setup=[],  # shell lines run before the job, e.g. "module load cuda/12.4"
)
# Per-method overrides, merged over `default` for that method's runs.
methods = {
    "K-means": dict(gpus_per_node=0, timeout_min=2 * 60),
    "Joint (unfrozen)": dict(timeout_min=48 * 60),
}
max_array_size = 1000  # the cluster's MaxArraySize - 1; larger groups are split into several arrays
array_parallelism = 64  # at most this many tasks of one array run at once (sbatch --array=...%N)
max_requeues = 3  # time-limit requeues per job (submitit's max_num_timeout)
