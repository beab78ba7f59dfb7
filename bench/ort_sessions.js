#!/usr/bin/env node
'use strict';
// Resident memory of N ONNX Runtime sessions of one model in one process: the peer of
// sessions_bench (bench.sh runs both).
//
//   node ort_sessions.js MODEL.onnx -i NAME=FILE.npy [-i ...] [-n SESSIONS] [-r RUNS] [-t THREADS]
//
// Creates N InferenceSessions (CPU execution provider, graphOptimizationLevel 'all',
// THREADS intra-op threads, ORT's defaults otherwise: its arena and no weight sharing),
// runs each RUNS times, and prints one JSON line {"sessions", "rss_created_mib",
// "rss_after_runs_mib"}: process.memoryUsage().rss (now, not the peak) after creation and
// after the runs — the whole node process, V8 and the ORT library included.

const { readNpy } = require('./npy');

function usage(msg) {
  if (msg) process.stderr.write(`ort_sessions: ${msg}\n`);
  process.stderr.write('usage: node ort_sessions.js MODEL.onnx -i NAME=FILE.npy [-i ...] [-n SESSIONS] [-r RUNS] [-t THREADS]\n');
  process.exit(2);
}

async function main() {
  const a = { model: null, inputs: [], sessions: 1, runs: 2, threads: 1 };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) usage(`${k} needs a value`);
      return argv[++i];
    };
    const int = (v, min, max) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < min || n > max) usage(`${k} must be an integer ${min}..${max}, got '${v}'`);
      return n;
    };
    if (k === '-i') a.inputs.push(next());
    else if (k === '-n') a.sessions = int(next(), 1, 64);
    else if (k === '-r') a.runs = int(next(), 1, 1000);
    else if (k === '-t') a.threads = int(next(), 1, 256);
    else if (k.startsWith('-')) usage(`unknown option ${k}`);
    else if (a.model === null) a.model = k;
    else usage(`unexpected argument ${k}`);
  }
  if (!a.model) usage('no model given');
  const ort = require('onnxruntime-node');
  require('./ort_tmp'); // removes the empty log ONNX Runtime leaves in the temporary folder
  const feeds = {};
  for (const spec of a.inputs) {
    const eq = spec.indexOf('=');
    if (eq <= 0) usage(`bad input '${spec}': expected NAME=FILE.npy`);
    const t = readNpy(spec.slice(eq + 1));
    feeds[spec.slice(0, eq)] = new ort.Tensor(t.dtype, t.data, t.shape);
  }
  const options = { executionProviders: ['cpu'], intraOpNumThreads: a.threads, interOpNumThreads: a.threads,
    graphOptimizationLevel: 'all', logSeverityLevel: 3 };
  const sessions = [];
  for (let i = 0; i < a.sessions; ++i) sessions.push(await ort.InferenceSession.create(a.model, options));
  const mb = () => process.memoryUsage().rss / 1048576;
  const created = mb();
  for (let r = 0; r < a.runs; ++r)
    for (const s of sessions) await s.run(feeds);
  console.log(JSON.stringify({ sessions: a.sessions, rss_created_mib: created, rss_after_runs_mib: mb() }));
}

main().catch((e) => {
  console.error(`ort_sessions: ${e.message}`);
  process.exit(1);
});
