#!/usr/bin/env node
'use strict';
// Times one model in ONNX Runtime (onnxruntime-node, CPU execution provider) — the peer
// that bench.sh runs side by side with `bulkhead run`.
//
//   node ort_bench.js MODEL.onnx -i NAME=FILE.npy [-i ...] [-t THREADS] [-r RUNS] [-w WARMUP] [--out DIR]
//
// Session: intraOpNumThreads = interOpNumThreads = THREADS, graphOptimizationLevel 'all',
// executionProviders ['cpu']. Runs WARMUP untimed runs, then RUNS timed ones (each timed
// around `await session.run(feeds)`), and prints one JSON line:
//   {"median_ms", "min_ms", "create_ms", "first_run_ms", "peak_rss_mb", "runs", "warmup", "threads", "ort_version"}
// create_ms is the wall time of InferenceSession.create (load + optimise); first_run_ms
// that of the session's first run (the first warm-up run, or the first timed one); peak_rss_mb is
// process.resourceUsage().maxRSS (KiB) / 1024 at the end, i.e. the whole node process,
// V8 and the ORT library included. --out DIR also writes each output of the last timed run
// as DIR/NAME.npy (NAME made file-safe the way `bulkhead run -o` does it), before the JSON
// line, which stays the last line of stdout.

const fs = require('fs');
const path = require('path');
const { readNpy, writeNpy } = require('./npy');

function usage(msg) {
  if (msg) process.stderr.write(`ort_bench: ${msg}\n`);
  process.stderr.write('usage: node ort_bench.js MODEL.onnx -i NAME=FILE.npy [-i ...] [-t THREADS] [-r RUNS] [-w WARMUP] [--out DIR]\n');
  process.exit(2);
}

function parseArgs(argv) {
  const a = { model: null, inputs: [], threads: 1, runs: 20, warmup: 2, out: null };
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) usage(`${k} needs a value`);
      return argv[++i];
    };
    const int = (v, min) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < min) usage(`${k} must be an integer >= ${min}, got '${v}'`);
      return n;
    };
    if (k === '-i' || k === '--input') a.inputs.push(next());
    else if (k === '-t' || k === '--threads') a.threads = int(next(), 1);
    else if (k === '-r' || k === '--runs') a.runs = int(next(), 1);
    else if (k === '-w' || k === '--warmup') a.warmup = int(next(), 0);
    else if (k === '--out') a.out = next();
    else if (k === '-h' || k === '--help') usage();
    else if (k.startsWith('-')) usage(`unknown option ${k}`);
    else if (a.model === null) a.model = k;
    else usage(`unexpected argument ${k}`);
  }
  if (!a.model) usage('no model given');
  return a;
}

// The file name `bulkhead run -o` gives an output (io::safe_file_name): every byte of the
// UTF-8 name other than [A-Za-z0-9._-] becomes '_', and a leading '_' where the name is
// empty or starts with '.'.
function safeFileName(name) {
  let s = '';
  for (const c of Buffer.from(name, 'utf8')) s += /[A-Za-z0-9._-]/.test(String.fromCharCode(c)) ? String.fromCharCode(c) : '_';
  return s === '' || s[0] === '.' ? `_${s}` : s;
}

function median(xs) {
  const s = [...xs].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  let ort;
  try {
    ort = require('onnxruntime-node');
    require('./ort_tmp'); // removes the empty log ONNX Runtime leaves in the temporary folder
  } catch (e) {
    console.error(`ort_bench: cannot load onnxruntime-node (${e.message}); run bench/bench.sh, which installs it`);
    process.exit(1);
  }

  const feeds = {};
  for (const spec of a.inputs) {
    const eq = spec.indexOf('=');
    if (eq <= 0 || eq === spec.length - 1) usage(`bad input '${spec}': expected NAME=FILE.npy`);
    const name = spec.slice(0, eq);
    const file = spec.slice(eq + 1);
    const t = readNpy(file);
    feeds[name] = new ort.Tensor(t.dtype, t.data, t.shape);
  }

  const options = {
    executionProviders: ['cpu'],
    intraOpNumThreads: a.threads,
    interOpNumThreads: a.threads,
    graphOptimizationLevel: 'all',
    logSeverityLevel: 3, // errors only: keeps "removing unused initializer" warnings off stderr
  };
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(path.resolve(a.model), options);
  const createMs = Number(process.hrtime.bigint() - t0) / 1e6;

  for (const name of session.inputNames)
    if (!(name in feeds)) throw new Error(`model input '${name}' not given (-i ${name}=FILE.npy)`);
  for (const name of Object.keys(feeds))
    if (!session.inputNames.includes(name)) throw new Error(`'${name}' is not an input of the model (inputs: ${session.inputNames.join(', ')})`);

  let firstMs = null; // the session's first run, warm-up or timed
  for (let i = 0; i < a.warmup; ++i) {
    const s = process.hrtime.bigint();
    await session.run(feeds);
    if (firstMs === null) firstMs = Number(process.hrtime.bigint() - s) / 1e6;
  }
  const ms = [];
  let outputs = null;
  for (let i = 0; i < a.runs; ++i) {
    const s = process.hrtime.bigint();
    const o = await session.run(feeds);
    ms.push(Number(process.hrtime.bigint() - s) / 1e6);
    if (firstMs === null) firstMs = ms[0];
    if (a.out) outputs = o; // kept only when asked for: without --out nothing outlives its run
  }
  const peakRssMb = process.resourceUsage().maxRSS / 1024;
  if (a.out) {
    fs.mkdirSync(a.out, { recursive: true });
    for (const name of session.outputNames) {
      const t = outputs[name];
      writeNpy(path.join(a.out, `${safeFileName(name)}.npy`), t.type, t.dims, t.data);
    }
  }
  await session.release();
  const r3 = (x) => Math.round(x * 1000) / 1000;
  console.log(JSON.stringify({
    median_ms: r3(median(ms)),
    min_ms: r3(Math.min(...ms)),
    create_ms: r3(createMs),
    first_run_ms: r3(firstMs),
    peak_rss_mb: Math.round(peakRssMb * 10) / 10,
    runs: a.runs,
    warmup: a.warmup,
    threads: a.threads,
    ort_version: ort.env.versions && ort.env.versions.common ? ort.env.versions.common : null,
  }));
}

main().catch((e) => {
  console.error(`ort_bench: ${e && e.message ? e.message : e}`);
  process.exit(1);
});
