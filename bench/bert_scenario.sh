# Sourced by the simulator benchmarks: scenario NODES ALGO writes the benchmark's BERT-large data-parallel
# scenario (8 GPUs per node, the given all-reduce algorithm) under $work and prints its path. Needs $root
# (the repository) and $work (a scratch folder).
scenario() { # nodes allreduce -> path
  local nodes=$1 algo=$2 f="$work/bert-$1-$2.json"
  cat > "$f" <<JSON
{
  "name": "bench-bert-large-$nodes-nodes",
  "model": {"preset": "bert-large"},
  "data": {"seq_len": 512, "lengths": {"distribution": "histogram", "file": "$root/scenarios/data/wikipedia-bert-seqlen-512.csv"}, "unpadded": true},
  "batch": {"local": 16},
  "optimizer": {"name": "adam", "clip": "per_bucket"},
  "precision": "fp16",
  "parallelism": {"bucket_MiB": 25, "allreduce": "$algo"},
  "cluster": {"device": "a100-sxm4-80gb", "nodes": $nodes, "gpus_per_node": 8, "nics_per_node": 4, "nic_Gbps": 200},
  "target": {"steps": 1},
  "simulation": {"steps": 1}
}
JSON
  echo "$f"
}
