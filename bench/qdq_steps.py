#!/usr/bin/python3
"""Where two runtimes' int8 results part on a QDQ model, in quantisation steps.

    /usr/bin/python3 bench/qdq_steps.py MODEL.onnx -i NAME=FILE.npy [-i ...] [--threads T]
                                        [--bulkhead BIN] [--keep DIR] [--local first|all]

Every QuantizeLinear output of MODEL becomes a graph output as well (a copy of the model in
a temporary folder, or in --keep DIR), the copy runs once in `bulkhead run -o` and once in
ONNX Runtime (`bench/ort_bench.js --out`), and each quantised tensor is compared in
topological order: the largest difference in steps (integer units of its scale), the share
of elements that differ at all and by more than one step. The float graph outputs are
compared by largest absolute difference. The first tensor that differs by more than one
step is named at the end, and the piece of the graph that makes it (from the quantised
tensors it reads back to it) runs again alone in both, on ONNX Runtime's values of those
tensors: the steps it differs by then are that piece's own (`--local all`: every tensor's).

Two runtimes that requantise with different rounding agree to within a step at each layer
but not after many: a one-step difference at one layer's input can be several at its
output, and the next layer takes that as its input. This shows which it is.

Needs Debian's python3-onnx and python3-numpy, node and bench/node_modules (bench/bench.sh
installs them). Exit status: 0 when it compared, 2 on a usage error, 1 when a run failed.
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(msg, code=1):
    print(f"qdq_steps: {msg}", file=sys.stderr)
    sys.exit(code)


def safe_file_name(name):
    # bulkhead's io::safe_file_name, which bench/ort_bench.js follows too: every byte of
    # the UTF-8 name other than [A-Za-z0-9._-] becomes '_', and a '_' goes in front of an
    # empty name or one that starts with '.'.
    s = "".join(chr(b) if (chr(b).isascii() and (chr(b).isalnum() or chr(b) in "._-")) else "_" for b in name.encode())
    return "_" + s if not s or s[0] == "." else s


def main():
    ap = argparse.ArgumentParser(description="QDQ model: bulkhead against ONNX Runtime, tensor by tensor, in steps")
    ap.add_argument("model")
    ap.add_argument("-i", "--input", action="append", default=[], metavar="NAME=FILE.npy")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--bulkhead", default=os.path.join(HERE, "..", "build", "bulkhead"))
    ap.add_argument("--keep", help="write the copy and both runs' outputs here (kept)")
    ap.add_argument("--local", choices=["first", "all"], default="first",
                    help="run alone the piece making the first tensor more than a step apart, or every tensor's")
    a = ap.parse_args()
    if not a.input:
        fail("give the model's inputs with -i NAME=FILE.npy", 2)
    if a.threads < 1:
        fail(f"--threads must be at least 1, got {a.threads}", 2)
    try:
        import numpy as np
        import onnx
        import onnx.utils
        from onnx import helper
    except ImportError as e:
        fail(f"needs Debian's python3-onnx and python3-numpy ({e}); run it with /usr/bin/python3", 2)
    if not os.path.isfile(a.model):
        fail(f"no model file '{a.model}'", 2)
    if not os.access(a.bulkhead, os.X_OK):
        fail(f"no bulkhead binary at '{a.bulkhead}' (build it, or give --bulkhead)", 2)

    try:
        m = onnx.load(a.model)
    except Exception as e:  # onnx raises several types for a bad file
        fail(f"cannot read '{a.model}' as an ONNX model: {e}", 2)
    inits = {t.name: t for t in m.graph.initializer}
    existing = {o.name for o in m.graph.output}
    quantised = []
    for n in m.graph.node:
        if n.op_type != "QuantizeLinear" or not n.output or not n.output[0]:
            continue
        elem = onnx.TensorProto.UINT8
        if len(n.input) > 2 and n.input[2] in inits:
            elem = inits[n.input[2]].data_type
        quantised.append(n.output[0])
        if n.output[0] not in existing:
            m.graph.output.append(helper.make_tensor_value_info(n.output[0], elem, None))
    if not quantised:
        fail(f"'{a.model}' has no QuantizeLinear node: not a QDQ model", 2)
    files = {}
    for o in m.graph.output:
        other = files.setdefault(safe_file_name(o.name), o.name)
        if other != o.name:
            fail(f"outputs '{other}' and '{o.name}' would be written to the same file", 2)

    work = a.keep or tempfile.mkdtemp(prefix="qdq_steps.")
    os.makedirs(work, exist_ok=True)
    copy = os.path.join(work, "model_with_steps.onnx")
    # Weights inline: the copy lives elsewhere, so external data would not be found.
    onnx.save(m, copy)
    bh_dir, ort_dir = os.path.join(work, "bulkhead"), os.path.join(work, "ort")

    def run_both(model, specs, bh_out, ort_out):
        args = []
        for spec in specs:
            args += ["-i", spec]
        for d in (bh_out, ort_out):
            os.makedirs(d, exist_ok=True)
        for cmd, who in (
            ([a.bulkhead, "run", model] + args + ["-t", str(a.threads), "-r", "1", "--warmup", "0", "-q", "-o", bh_out],
             "bulkhead"),
            (["node", os.path.join(HERE, "ort_bench.js"), model] + args +
             ["-t", str(a.threads), "-r", "1", "-w", "0", "--out", ort_out], "ONNX Runtime"),
        ):
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                last = (r.stderr.strip() or r.stdout.strip()).splitlines()
                fail(f"{who} failed on {model} (exit {r.returncode}): {last[-1] if last else 'no message'}")

    run_both(copy, a.input, bh_dir, ort_dir)

    def load(d, name):
        p = os.path.join(d, safe_file_name(name) + ".npy")
        if not os.path.isfile(p):
            fail(f"'{name}' was not written to {d}")
        return np.load(p)

    def steps(x, y, name):
        if x.shape != y.shape:
            fail(f"'{name}': bulkhead gave shape {x.shape}, ONNX Runtime {y.shape}")
        d = np.abs(x.astype(np.int64) - y.astype(np.int64))
        return (int(d.max()) if d.size else 0), float((d > 0).mean()), float((d > 1).mean())

    # The quantised tensors (or graph inputs) the piece making `name` reads: walk back from
    # its producer through everything that is not itself quantised.
    producer = {o: n for n in m.graph.node for o in n.output}
    graph_inputs = {i.name for i in m.graph.input} - set(inits)
    qset = set(quantised)

    def piece_inputs(name):
        found, seen, todo = [], set(), [name]
        while todo:
            t = todo.pop()
            n = producer.get(t)
            if n is None:
                continue
            for i in n.input:
                if not i or i in seen or i in inits:
                    continue
                seen.add(i)
                if i in qset or i in graph_inputs:
                    found.append(i)
                else:
                    todo.append(i)
        return found

    # The extractor finds a piece's inputs among the value_info entries only: a quantised
    # tensor that is also a graph output is listed there too.
    src = onnx.load(a.model)
    listed = {v.name for v in src.graph.value_info}
    for o in src.graph.output:
        if o.name not in listed:
            src.graph.value_info.append(o)
    extractor = onnx.utils.Extractor(src)

    def local(name, k):
        ins = piece_inputs(name)
        if not ins or any(i in graph_inputs for i in ins):
            return None  # reads the model's own inputs: the whole comparison above is local already
        piece = os.path.join(work, f"piece_{k}.onnx")
        # onnx.utils.extract_model checks the piece and refuses an output whose shape
        # inference left open; the runtimes need no shape there.
        onnx.save(extractor.extract_model(ins, [name]), piece)
        specs = []
        for i in ins:
            f = os.path.join(ort_dir, safe_file_name(i) + ".npy")
            specs.append(f"{i}={f}")
        pb, po = os.path.join(work, f"piece_{k}", "bulkhead"), os.path.join(work, f"piece_{k}", "ort")
        run_both(piece, specs, pb, po)
        return steps(load(pb, name), load(po, name), name)[0]

    print(f"{a.model}: {len(quantised)} quantised tensors, bulkhead against ONNX Runtime, {a.threads} thread(s)")
    print(f"{'tensor':<48} {'shape':<20} {'max steps':>9} {'differ':>8} {'by > 1':>8}" +
          (f" {'alone':>6}" if a.local == "all" else ""))
    first = None
    for k, name in enumerate(quantised):
        x, y = load(bh_dir, name), load(ort_dir, name)
        worst, differ, more = steps(x, y, name)
        alone = ""
        if a.local == "all":
            v = local(name, k)
            alone = f" {'-' if v is None else v:>6}"
        print(f"{name[:48]:<48} {str(tuple(x.shape)):<20} {worst:>9} {differ:>8.4f} {more:>8.4f}{alone}")
        if first is None and worst > 1:
            first = (k, name)
    for o in m.graph.output:
        if o.name in qset:
            continue
        x, y = load(bh_dir, o.name), load(ort_dir, o.name)
        diff = float(np.abs(x.astype(np.float64) - y.astype(np.float64)).max()) if x.size else 0.0
        print(f"output {o.name}: max abs difference {diff:.6g}")
    if first is None:
        print("every quantised tensor within one step")
    else:
        k, name = first
        v = local(name, k)
        if v is None:
            print(f"first tensor more than one step apart: {name} (it reads the model's inputs)")
        else:
            print(f"first tensor more than one step apart: {name}; the piece making it, alone on ONNX Runtime's "
                  f"values of {', '.join(piece_inputs(name))}: {v} step(s)")
    if not a.keep:
        print(f"(files in {work})")


if __name__ == "__main__":
    main()
