#!/usr/bin/env bash
# The main job on embedded defaults (HiGHS, no licence, no server):
# schedule a layer from YAML, emit Gemmini C, run and verify it (the mapping's explicit program and the
# loop-instruction program), compare against the baselines.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p out
layer=examples/conv3x3.yaml
cosa schedule "$layer" --arch gemmini -o out/conv3x3_mapping.yaml
cosa emit gemmini "$layer" --mapping out/conv3x3_mapping.yaml --main -o out/conv3x3.c
cosa run gemmini "$layer" --mapping out/conv3x3_mapping.yaml
# the same layer as Gemmini's library calls it (loop instructions), tile arguments from the loop-tile MIP
cosa run gemmini "$layer"
cosa bound "$layer" --arch gemmini
# every distinct ResNet-50 layer; random search gets 300 samples per layer here (the benchmark
# bench/schedule_quality.py gives it 10x the MIP's time instead); the MIP stops after 20 s per layer
# and returns its incumbent (two 3x3 layers need longer to prove optimality)
cosa compare resnet50 --arch gemmini --schedulers cosa,gemmini-default,random --random-samples 300 --jobs 2 \
  --time-limit 20 --csv out/compare.csv --plot out/compare.png
