#!/usr/bin/env bash
# The hub's benchmark on the GPU box (one H100 or H200, no network, no Node, no Jupyter packages).
#
# 1. Here, on a machine with PyPI: fetch the wheels room/bench/gpu-box-wheels.txt lists
#    (Python 3.12, x86-64) into .whl/ (gitignored; the device carries it beside the tree, 64 MiB in all):
#        bash room/bench/gpu_box.sh download
# 2. There, one device call per line (each within the device's 10 minutes), carry [".whl"]:
#        bash room/bench/gpu_box.sh run 1,10
#        bash room/bench/gpu_box.sh run 30 cold
#        bash room/bench/gpu_box.sh run 30 warm
#    Each call installs the wheels into /opt/labkit-site (and compiles their byte-code), runs
#    `python -m labkit hub bench` (each room size cold, then warm: hub start --warm; a third word picks
#    one) as root with the Python port of the proxy (no Node there) and merges its rows into
#    room/labkit_room/data/gpu_box_rooms.json, which it also copies to $OUT: put the returned file at that
#    path before the next call, so each call adds its rows to the earlier ones' (each row keeps its machine
#    and commit).
#    The room's limits there (cgroup v2, the GPU share) and what one hostile learner costs another,
#    one call each:
#        bash room/bench/gpu_box.sh test        # the room's tests that need this box's kernel and groups
#                                               # (the kernel's namespaces, the reaper, IPC), then tests/test_hub.py
#        bash room/bench/gpu_box.sh neighbour   # hub bench --neighbour: room/labkit_room/data/neighbour_gpu.json
# 3. Back here: python -m labkit docs --write renders the records into docs/INSTRUCTOR_GUIDE.md.
set -euo pipefail
cd "$(dirname "$0")/../.."  # the repository root
PLATFORMS="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64
  --platform manylinux1_x86_64"

case "${1:-}" in
download)
    rm -rf .whl && mkdir .whl
    grep -v '^#' room/bench/gpu-box-wheels.txt | sed 's/ *#.*//' > .whl/requirements.txt
    # shellcheck disable=SC2086
    ${PYTHON:-python3} -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
        --python-version 3.12 --implementation cp $PLATFORMS -d .whl -r .whl/requirements.txt
    rm .whl/requirements.txt
    echo "$(ls .whl/*.whl | wc -l) wheels, $(du -cm .whl/*.whl | tail -1 | cut -f1) MiB in .whl/"
    ;;
run|test|neighbour)
    command -v useradd >/dev/null || { echo "this box has no useradd: the hub needs it to create the learners" >&2; exit 1; }
    [ "$(id -u)" = 0 ] || { echo "the hub runs as root (it creates a system user per learner)" >&2; exit 1; }
    # Each learner's server gets its own /tmp (and /var/tmp, /dev/shm, /run/lock): what the servers run
    # from must lie elsewhere, or the room refuses to start. The wheels go to /opt, and a checkout
    # under one of those folders is copied to /opt first (the records come back through $OUT).
    case "$PWD/" in /tmp/*|/var/tmp/*|/dev/shm/*|/run/lock/*)
        rm -rf /opt/labkit-checkout && cp -a . /opt/labkit-checkout && cd /opt/labkit-checkout ;; esac
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /opt/labkit-site \
        .whl/*.whl
    # Their byte-code, written once here as root: the learners cannot write __pycache__ into /opt/labkit-site,
    # and without it every learner's server and kernel compiles the Jupyter stack again at its start.
    # (Not every file is Python 3 source: compileall's exit status says so, and is no failure.)
    python3 -m compileall -q -j 0 /opt/labkit-site >/dev/null || true
    export PYTHONPATH=/opt/labkit-site:$PWD/room  # the wheels, and the room's package from this tree
    python3 -c 'import torch; print("GPU:", torch.cuda.get_device_name(0), "| torch", torch.__version__)'
    case "$1" in
    run)
        sizes="${2:?give the room sizes, e.g. run 1,10}"
        python3 -m labkit hub bench --learners "$sizes" --start "${3:-cold,warm}" --proxy python --memory 3G \
            --record --merge \
            --shared-note "the GPU box, nothing else running"
        if [ -n "${OUT:-}" ]; then cp room/labkit_room/data/gpu_box_rooms.json "$OUT/"; fi ;;
    test)  # -p no:cacheprovider: the tree's copy may be read-only; the browser check says it needs Chromium
        python3 -m pytest -q -rs -p no:cacheprovider -p no:randomly tests/test_room_groups.py tests/test_reaper.py \
            tests/test_room_kernel.py tests/test_room_learner_paths.py tests/test_room_ipc.py tests/test_hub.py ;;
    neighbour)
        python3 -m labkit hub bench --neighbour --repeats 3 --proxy python --memory 3G --record \
            --shared-note "the GPU box, nothing else running" ;;
    esac
    ;;
*)
    sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 2 ;;  # the comment above
esac
