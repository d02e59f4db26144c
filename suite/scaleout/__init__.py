"""Scale out on Dask: bench sharded over GPUs and hosts, and any list of items (arm x seed agent runs)
spread one per GPU at a time.

Layout: cluster.py (cluster specs: dask-cuda on this host, an existing scheduler, Slurm/PBS through
dask-jobqueue, a CPU LocalCluster), executor.py (run items on the cluster, progress that survives a
dead worker, retries), gpus.py (each worker's GPU, device classes), bench.py (bench on a cluster:
the client's side), shard.py (a shard of bench on a worker),
agent_runs.py (agent runs as items: compare on a cluster), agreement.py (ratios of two runs side by side, per GPU);
the options and commands are in suite/cli/scaleout.py. Dask is imported only when a cluster is used: install the `dask`
extra (and `dask-cuda` on GPU machines)."""

from ..lazy import lazy_exports

_EXPORTS: dict[str, tuple[str, ...]] = {
    "cluster": ("ClusterError", "ClusterSpec", "open_client", "parse_scheduler"),
    "executor": ("Channel", "ItemFailure", "NullChannel", "WorkItem", "run_items"),
    "gpus": ("MixedGPUs", "WorkerGPU", "cluster_gpus"),
    "bench": ("ScaleOut", "plan_shards", "run_bench_distributed"),
    "shard": ("ShardJob", "gpu_runner", "run_shard"),
    "agent_runs": ("RunsLost", "run_agent_items", "run_compare_distributed", "run_on_worker"),
    "agreement": ("ratio_agreement",),
}
# loaded on first use, so that the package imports fast
__all__, __getattr__ = lazy_exports(__name__, _EXPORTS)
