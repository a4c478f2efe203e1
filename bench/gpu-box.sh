#!/usr/bin/env bash
# bench/gpu-box.sh: the check of lavender on a real GPU box, in under 5
# minutes on one GPU. It needs a lavender built with cgo (the -gpu release
# tarball, or `go build ./cmd/lavender` where gcc is found), the NVIDIA
# driver (nvidia-smi), and python3 with torch and CUDA.
#
#   bench/gpu-box.sh ./lavender [OUTDIR]
#
# It starts serve with a capturing Bark stub, compares every GPU metric with
# nvidia-smi's reading of the same moment side by side, runs a short real
# CUDA training under `lavender phase run`, forces a real CUDA out-of-memory
# under another phase, and saves what it saw in OUTDIR (default $OUT, or a
# temporary dir): metrics.txt, nvidia-smi.csv, compare.txt, pushes.txt,
# status.json, runlog.txt, serve.log, timings.txt. It prints compare.txt and
# pushes.txt at the end. Nothing is installed.
set -euo pipefail
bin=$(realpath "${1:?usage: bench/gpu-box.sh ./lavender [OUTDIR]}")
out=${2:-${OUT:-$(mktemp -d)}}
mkdir -p "$out"
work=$(mktemp -d)
cleanup() { kill "${serve_pid:-}" "${stub_pid:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
started=$SECONDS
mark() { printf '%4ds %s\n' "$((SECONDS - started))" "$*" | tee -a "$out/timings.txt"; }

command -v nvidia-smi >/dev/null || { echo "gpu-box: no nvidia-smi: not a GPU box" >&2; exit 1; }
"$bin" version | head -1 | tee "$out/version.txt"

# A Bark stub on loopback: answers Bark's JSON and writes each push's path,
# one line each, to pushes.txt.
cat > "$work/stub.py" <<'PY'
import http.server, json, sys, urllib.parse
log = open(sys.argv[2], "a", buffering=1)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        log.write(urllib.parse.unquote(self.path) + "\n")
        body = json.dumps({"code": 200, "message": "success"}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    do_POST = do_GET
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
stub_port=19876 port=19877
python3 "$work/stub.py" "$stub_port" "$out/pushes.txt" & stub_pid=$!
mkdir -p "$work/conf"
echo "http://127.0.0.1:$stub_port/GPUBOXKEY/\$0" > "$work/conf/box.bark.env"
chmod 600 "$work/conf/box.bark.env"
"$bin" serve --web.listen-address="127.0.0.1:$port" --bark.config-dir="$work/conf" --runlog.dir="$work/logs" \
  --watchdog.interval=2s --phase.stall-after=1m --log.level=debug > "$out/serve.log" 2>&1 & serve_pid=$!
for _ in $(seq 50); do curl -fsS "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1 && break; sleep 0.2; done
mark "serve ready"
grep -m1 'GPU telemetry' "$out/serve.log" | tee -a "$out/timings.txt" || true

# The same moment, twice: lavender's scrape and nvidia-smi's query.
query=index,pci.bus_id,utilization.gpu,memory.used,memory.total,power.draw,power.limit,temperature.gpu
curl -fsS "http://127.0.0.1:$port/metrics" > "$out/metrics.txt"
nvidia-smi --query-gpu="$query" --format=csv,noheader,nounits > "$out/nvidia-smi.csv"
mark "scrape and nvidia-smi"
python3 - "$out/metrics.txt" "$out/nvidia-smi.csv" > "$out/compare.txt" <<'PY'
import re, sys
m = {}
for line in open(sys.argv[1]):
    g = re.match(r'(lavender_gpu_\w+)\{([^}]*)\} (\S+)', line)
    if g:
        labels = dict(re.findall(r'(\w+)="([^"]*)"', g.group(2)))
        m[(g.group(1), labels.get("gpu"))] = float(g.group(3))
print(f"{'gpu':>3} {'what':<14} {'lavender':>12} {'nvidia-smi':>12}")
for row in open(sys.argv[2]):
    i, bus, util, used, total, power, limit, temp = [x.strip() for x in row.split(",")]
    for what, name, smi, scale in [
        ("utilization %", "lavender_gpu_utilization_ratio", util, 100),
        ("memory MiB", "lavender_gpu_memory_used_bytes", used, 1 / 2**20),
        ("total MiB", "lavender_gpu_memory_total_bytes", total, 1 / 2**20),
        ("power W", "lavender_gpu_power_watts", power, 1),
        ("limit W", "lavender_gpu_power_limit_watts", limit, 1),
        ("temp C", "lavender_gpu_temperature_celsius", temp, 1),
    ]:
        v = m.get((name, i))
        print(f"{i:>3} {what:<14} {'absent' if v is None else format(v * scale, '.1f'):>12} {smi:>12}")
PY

# A short real CUDA training, then a real CUDA out-of-memory, each a phase.
cat > "$work/train.py" <<'PY'
import sys, time, torch
dev = torch.device("cuda")
if sys.argv[1] == "train":
    model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    end = time.time() + 40
    while time.time() < end:
        x = torch.randn(1024, 4096, device=dev)
        loss = model(x).pow(2).mean(); opt.zero_grad(); loss.backward(); opt.step()
    torch.cuda.synchronize(); print("trained, loss", loss.item())
else:
    free, total = torch.cuda.mem_get_info()
    torch.empty(int(total * 2), dtype=torch.uint8, device=dev)  # more than the GPU has
PY
export LAVENDER_URL="127.0.0.1:$port"
"$bin" phase run "GPU box train" -- python3 "$work/train.py" train > "$out/train.txt" 2>&1 || true
mark "training phase ended"
curl -fsS "http://127.0.0.1:$port/metrics" | grep -E '^lavender_gpu_(utilization|power|processes)' > "$out/metrics-after-train.txt" || true
"$bin" phase run "GPU box OOM" -- python3 "$work/train.py" oom > "$out/oom.txt" 2>&1 || true
mark "OOM phase ended"
sleep 6 # two polls: the failed phase's push
curl -fsS "http://127.0.0.1:$port/api/v1/status" > "$out/status.json"
"$bin" runlog show --runlog.dir="$work/logs" > "$out/runlog.txt" || true
mark "done"
echo "--- compare (lavender vs nvidia-smi, same moment)"; cat "$out/compare.txt"
echo "--- pushes"; cat "$out/pushes.txt"
echo "--- saved in $out"
