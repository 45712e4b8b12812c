# The profile for the single-node test cluster of slurm/start-local.sh: fake GPUs, small jobs.
_base_ = ["./default.py"]
default = dict(gpus_per_node=0, cpus_per_task=1, mem_gb=1, timeout_min=30, slurm_signal_delay_s=60)
methods = {"K-means": dict(gpus_per_node=0, timeout_min=30), "Joint (unfrozen)": dict(timeout_min=30)}
max_array_size = 1000
array_parallelism = 8
