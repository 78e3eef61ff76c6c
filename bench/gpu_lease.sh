#!/usr/bin/env bash
# The GPU checks and benches in one call on a lent GPU machine (the device tool of the
# workplace, which has no Rust toolchain): the programs are built here and carried, compressed,
# in .devrun/ (ignored by git), with the Vulkan loader's packages in .gl/ (its README says how to
# fetch them). Build them with:
#
#   cargo bench --bench gpu_bench --no-run && cargo test -p torchfn --test api --no-run \
#     && cargo test -p torchfn-kernels --lib --no-run
#   mkdir -p .devrun && cp target/release/deps/gpu_bench-<hash> .devrun/gpu_bench \
#     && cp target/debug/deps/api-<hash> .devrun/api \
#     && cp target/debug/deps/torchfn_kernels-<hash> .devrun/kernels && strip .devrun/* && xz -T2 -9 .devrun/*
#
# then run `bash bench/gpu_lease.sh [TEST_NAME...]` there with .gl and .devrun carried. It prints the GPU's
# name, runs gpu_bench with PyTorch's CUDA column (the machine's python3 has torch), then the
# kernels' own GPU tests and the whole integration suite (or each test named, exactly, in its own
# process) with TORCHFN_REQUIRE_GPU=1, so every GPU test runs on the real GPU.
# BENCH_LIMIT and TEST_LIMIT bound each part in seconds (BENCH_LIMIT=0 skips the bench). Logs
# go to $OUT.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$icd" ] && export VK_DRIVER_FILES=$icd
# The programs read files by the path they were built in (env!("CARGO_MANIFEST_DIR")).
built=/work/main
[ -e "$built" ] || { mkdir -p "$(dirname "$built")" && ln -s "$PWD" "$built"; }
mkdir -p "$built/target/tmp"
echo "vm.overcommit_memory: $(cat /proc/sys/vm/overcommit_memory)"; free -g | head -2
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv
mkdir -p /tmp/bin
for p in .devrun/*.xz; do
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
        "$p" "/tmp/bin/$(basename "$p" .xz)"
done
chmod +x /tmp/bin/*
export CARGO_TARGET_DIR=/tmp/target PYTORCH_PYTHON=python3 PYTHONUNBUFFERED=1
if [ "${BENCH_LIMIT:-240}" -gt 0 ]; then
    timeout "${BENCH_LIMIT:-240}" /tmp/bin/gpu_bench --bench --warm-up-time 1 --measurement-time 2 2>&1 \
        | tee "$OUT/gpu_bench.log" | grep -E "^gpu/|time:|^\||wgpu|PyTorch|failed|panick"
    echo "gpu_bench exit: ${PIPESTATUS[0]}"
fi
export TORCHFN_REQUIRE_GPU=1
if [ -x /tmp/bin/kernels ]; then
    timeout "${TEST_LIMIT:-150}" /tmp/bin/kernels --test-threads 16 wgpu >"$OUT/kernels.log" 2>&1
    echo "kernels exit: $?"
    grep -E "^test .*(FAILED|panicked)|^failures:|test result" "$OUT/kernels.log" | head -20
fi
if [ $# -eq 0 ]; then
    timeout "${TEST_LIMIT:-150}" /tmp/bin/api --test-threads 16 >"$OUT/api.log" 2>&1
    echo "api exit: $?"
    grep -E "^test .*(FAILED|panicked)|^failures:|test result" "$OUT/api.log" | head -40
else
    # Each named test in its own process, all at once, so that none waits on another's lock.
    mkdir -p /tmp/logs
    for t in "$@"; do
        (start=$SECONDS; timeout "${TEST_LIMIT:-150}" /tmp/bin/api --exact "$t" >"/tmp/logs/$t.log" 2>&1
         echo "$t: exit $? after $((SECONDS - start)) s") &
    done
    wait
    tail -n 20 /tmp/logs/*.log >"$OUT/api.log"
fi
