#!/usr/bin/env node
'use strict';
// The measuring half of bench.sh (which installs and builds what this needs, then calls
// it). Runs `bulkhead run` and ort_bench.js alternately, each in its own process, and
// prints the comparison table; writes OUT_DIR/results.json and OUT_DIR/raw.jsonl.
//
//   node run_bench.js --bulkhead BIN --shared DIR --out DIR --models a,b --threads 1,2
//                     --rounds R --runs N --warmup W [--time /usr/bin/time]
//
// Each (model, threads) pair gets R rounds; a round is one bulkhead process and one ORT
// process (N timed runs each after W warm-up runs), and the order within a round flips
// every round so neither tool always runs right after the other's cache pollution.

const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');

const HERE = __dirname;

// name -> { model, inputs: 'light' | folder of NAME.npy files }
function modelTable(shared) {
  const light = (n) => ({ model: path.join(shared, 'onnx-backend-data', 'light', `${n}.onnx`), inputs: 'light' });
  const real = (n) => ({ model: path.join(shared, 'models', n, 'model.onnx'), inputs: path.join(shared, 'models', n, 'inputs') });
  return {
    light_resnet50: light('light_resnet50'),
    light_squeezenet: light('light_squeezenet'),
    ppocrv4_det: real('ppocrv4_det'),
    ppocrv4_rec: real('ppocrv4_rec'),
  };
}

function die(msg) {
  console.error(`bench: ${msg}`);
  process.exit(1);
}

function parseArgs(argv) {
  const a = { time: null };
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i];
    const v = argv[i + 1];
    if (!k.startsWith('--') || v === undefined) die(`run_bench.js: bad arguments near '${k}'`);
    a[k.slice(2)] = v;
  }
  for (const k of ['bulkhead', 'shared', 'out', 'models', 'threads', 'rounds', 'runs', 'warmup'])
    if (a[k] === undefined) die(`run_bench.js: --${k} is required`);
  a.models = a.models.split(',').filter(Boolean);
  a.threads = a.threads.split(',').filter(Boolean).map(Number);
  a.rounds = Number(a.rounds);
  a.runs = Number(a.runs);
  a.warmup = Number(a.warmup);
  return a;
}

function median(xs) {
  const s = [...xs].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const lastLine = (s) => (s || '').trim().split('\n').filter(Boolean).pop() || '';

// Runs argv under GNU time (when given) and returns { status, stdout, stderr, rss_mb, wall_s }.
function runMeasured(argv, timeBin, timeoutMs) {
  let cmd = argv[0];
  let args = argv.slice(1);
  let rssFile = null;
  if (timeBin) {
    rssFile = path.join(os.tmpdir(), `bench-rss-${process.pid}-${Date.now()}`);
    args = ['-f', '%M', '-o', rssFile, ...argv];
    cmd = timeBin;
  }
  const t0 = process.hrtime.bigint();
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: timeoutMs, maxBuffer: 64 << 20 });
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  let rss = null;
  if (rssFile) {
    try {
      // GNU time writes "Command exited with non-zero status N" before the value on failure.
      const kb = Number(lastLine(fs.readFileSync(rssFile, 'utf8')));
      if (Number.isFinite(kb) && kb > 0) rss = kb / 1024;
    } catch (_) { /* no file: the command could not start */ }
    fs.rmSync(rssFile, { force: true });
  }
  let status = r.status;
  let stderr = r.stderr || '';
  if (r.error) { status = -1; stderr += `\n${r.error.message}`; }
  else if (r.signal) { status = -1; stderr += `\nkilled by ${r.signal}${r.signal === 'SIGTERM' ? ' (timeout)' : ''}`; }
  return { status, stdout: r.stdout || '', stderr, rss_mb: rss, wall_s: wall };
}

function prepareInputs(name, spec, outDir) {
  if (spec.inputs === 'light') {
    const dir = path.join(outDir, 'inputs', name);
    const r = spawnSync(process.execPath, [path.join(HERE, 'make_inputs.js'), spec.model, dir], { encoding: 'utf8' });
    if (r.status !== 0) die(`${name}: cannot generate inputs: ${lastLine(r.stderr) || r.error}`);
    return r.stdout.trim().split('\n').filter(Boolean);
  }
  if (!fs.existsSync(spec.inputs)) die(`${name}: input folder missing: ${spec.inputs}`);
  const files = fs.readdirSync(spec.inputs).filter((f) => f.endsWith('.npy')).sort();
  if (!files.length) die(`${name}: no .npy files in ${spec.inputs}`);
  return files.map((f) => `${f.slice(0, -4)}=${path.join(spec.inputs, f)}`);
}

function runBulkhead(a, spec, inputs, threads) {
  const argv = [a.bulkhead, 'run', spec.model, ...inputs.flatMap((i) => ['-i', i]),
    '-t', String(threads), '-r', String(a.runs), '--warmup', String(a.warmup), '-q'];
  const r = runMeasured(argv, a.time, 30 * 60 * 1000);
  const m = /latency over \d+ run\(s\): median ([\d.]+) ms\s+min ([\d.]+) ms/.exec(r.stdout);
  if (r.status !== 0 || !m)
    return { ok: false, error: lastLine(r.stderr) || lastLine(r.stdout) || `exit ${r.status}`, peak_rss_mb: r.rss_mb, wall_s: r.wall_s };
  return { ok: true, median_ms: Number(m[1]), min_ms: Number(m[2]), peak_rss_mb: r.rss_mb, wall_s: r.wall_s };
}

function runOrt(a, spec, inputs, threads) {
  const argv = [process.execPath, path.join(HERE, 'ort_bench.js'), spec.model, ...inputs.flatMap((i) => ['-i', i]),
    '-t', String(threads), '-r', String(a.runs), '-w', String(a.warmup)];
  const r = runMeasured(argv, a.time, 30 * 60 * 1000);
  let j = null;
  try { j = JSON.parse(lastLine(r.stdout)); } catch (_) { /* reported below */ }
  if (r.status !== 0 || !j)
    return { ok: false, error: lastLine(r.stderr) || `exit ${r.status}`, peak_rss_mb: r.rss_mb, wall_s: r.wall_s };
  // Prefer GNU time's figure (same method as for bulkhead); the process's own maxRSS otherwise.
  return { ok: true, median_ms: j.median_ms, min_ms: j.min_ms, create_ms: j.create_ms,
    peak_rss_mb: r.rss_mb !== null ? r.rss_mb : j.peak_rss_mb, self_rss_mb: j.peak_rss_mb, wall_s: r.wall_s };
}

function summarize(rounds) {
  const ok = rounds.filter((r) => r.ok);
  if (!ok.length) return { ok: false, error: rounds.map((r) => r.error).find(Boolean) || 'failed' };
  const rss = ok.map((r) => r.peak_rss_mb).filter((x) => x !== null && x !== undefined);
  return {
    ok: true,
    rounds_ok: ok.length,
    median_ms: median(ok.map((r) => r.median_ms)), // median of the per-process medians
    min_ms: Math.min(...ok.map((r) => r.min_ms)),
    round_medians_ms: ok.map((r) => r.median_ms),
    peak_rss_mb: rss.length ? Math.max(...rss) : null,
    ...(ok[0].create_ms !== undefined ? { create_ms: median(ok.map((r) => r.create_ms)) } : {}),
    ...(ok.length < rounds.length ? { error: rounds.find((r) => !r.ok).error } : {}),
  };
}

function pad(s, n, left) {
  s = String(s);
  return left ? s.padEnd(n) : s.padStart(n);
}

function main() {
  const a = parseArgs(process.argv.slice(2));
  const table = modelTable(a.shared);
  for (const m of a.models) {
    if (!table[m]) die(`unknown model '${m}' (known: ${Object.keys(table).join(', ')})`);
    if (!fs.existsSync(table[m].model)) die(`${m}: model file missing: ${table[m].model}`);
  }
  fs.mkdirSync(a.out, { recursive: true });
  const rawPath = path.join(a.out, 'raw.jsonl');
  fs.writeFileSync(rawPath, '');

  const git = spawnSync('git', ['-C', path.dirname(HERE), 'describe', '--always', '--dirty'], { encoding: 'utf8' });
  const ortVersion = JSON.parse(fs.readFileSync(path.join(HERE, 'node_modules', 'onnxruntime-node', 'package.json'), 'utf8')).version;
  const baseline = a.time ? runMeasured([process.execPath, '-e', "require('onnxruntime-node')"], a.time, 60000).rss_mb : null;
  const meta = {
    date: new Date().toISOString(),
    git: (git.stdout || '').trim() || null,
    bulkhead: a.bulkhead,
    onnxruntime_node: ortVersion,
    node: process.version,
    cpu: (os.cpus()[0] || {}).model || null,
    cores: os.cpus().length,
    loadavg_start: os.loadavg().map((x) => Math.round(x * 100) / 100),
    rounds: a.rounds,
    runs: a.runs,
    warmup: a.warmup,
    rss_method: a.time ? 'GNU time %M (peak resident set of the whole process)' : 'ORT: process.resourceUsage().maxRSS; bulkhead: not measured (no GNU time)',
    node_ort_baseline_rss_mb: baseline,
  };
  console.log(`bench: ${a.models.length} model(s) x threads ${a.threads.join(',')} x ${a.rounds} round(s) x ${a.runs} runs ` +
    `(warm-up ${a.warmup}); load average ${meta.loadavg_start.join(' ')} on ${meta.cores} cores`);

  const results = [];
  for (const name of a.models) {
    const spec = table[name];
    const inputs = prepareInputs(name, spec, a.out);
    for (const threads of a.threads) {
      const bh = [];
      const ort = [];
      for (let round = 0; round < a.rounds; ++round) {
        const order = round % 2 === 0 ? ['bulkhead', 'ort'] : ['ort', 'bulkhead'];
        for (const tool of order) {
          const r = tool === 'bulkhead' ? runBulkhead(a, spec, inputs, threads) : runOrt(a, spec, inputs, threads);
          (tool === 'bulkhead' ? bh : ort).push(r);
          fs.appendFileSync(rawPath, JSON.stringify({ model: name, threads, round, tool, load1: os.loadavg()[0], ...r }) + '\n');
          const what = r.ok ? `median ${r.median_ms.toFixed(3)} ms` : `FAILED: ${r.error}`;
          console.log(`  ${name} t=${threads} round ${round + 1}/${a.rounds} ${pad(tool, 8, true)} ${what}`);
        }
      }
      const b = summarize(bh);
      const o = summarize(ort);
      results.push({ model: name, threads, bulkhead: b, ort: o, ratio: b.ok && o.ok ? b.median_ms / o.median_ms : null });
    }
  }
  meta.loadavg_end = os.loadavg().map((x) => Math.round(x * 100) / 100);

  const f = (x, d) => (x === null || x === undefined ? '-' : x.toFixed(d));
  const cols = [['model', 18, true], ['threads', 7], ['bulkhead ms', 12], ['ORT ms', 10], ['bh/ORT', 7], ['bh RSS MB', 10], ['ORT RSS MB', 11]];
  const line = (vals) => cols.map(([, w, l], i) => pad(vals[i], w, l)).join('  ');
  console.log('');
  console.log(line(cols.map((c) => c[0])));
  console.log(line(cols.map(([, w]) => '-'.repeat(w))));
  const notes = [];
  for (const r of results) {
    console.log(line([r.model, r.threads,
      r.bulkhead.ok ? f(r.bulkhead.median_ms, 2) : 'FAILED', r.ort.ok ? f(r.ort.median_ms, 2) : 'FAILED',
      r.ratio === null ? '-' : f(r.ratio, 2),
      f(r.bulkhead.peak_rss_mb, 1), f(r.ort.peak_rss_mb, 1)]));
    for (const [tool, s] of [['bulkhead', r.bulkhead], ['ORT', r.ort]])
      if (s.error) notes.push(`${r.model} t=${r.threads} ${tool}${s.ok ? ` (${s.rounds_ok}/${a.rounds} rounds ok)` : ''}: ${s.error}`);
  }
  console.log('');
  console.log(`times: median over rounds of each process's median of ${a.runs} timed runs; bh/ORT < 1 means bulkhead is faster.`);
  console.log(`RSS: ${meta.rss_method}, max over rounds.` +
    (baseline ? ` node + onnxruntime-node loaded, no session: ${baseline.toFixed(1)} MB.` : ''));
  console.log(`load average ${meta.loadavg_start.join(' ')} at start, ${meta.loadavg_end.join(' ')} at end (${meta.cores} cores).`);
  for (const n of notes) console.log(`note: ${n}`);
  const busiest = Math.max(meta.loadavg_start[0], meta.loadavg_end[0]);
  if (busiest > meta.cores / 2)
    console.log(`warning: the machine was busy (1-minute load up to ${busiest} on ${meta.cores} cores): ` +
      'both tools were slowed, unevenly; rerun on an idle machine before quoting absolute numbers.');

  const out = path.join(a.out, 'results.json');
  fs.writeFileSync(out, JSON.stringify({ meta, results }, null, 1) + '\n');
  console.log(`wrote ${out} and ${rawPath}`);
  if (results.some((r) => !r.bulkhead.ok || !r.ort.ok)) process.exitCode = 3;
}

main();
