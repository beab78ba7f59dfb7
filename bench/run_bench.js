#!/usr/bin/env node
'use strict';
// The measuring half of bench.sh (which installs and builds what this needs, then calls
// it). Runs `bulkhead run` and ort_bench.js alternately, each in its own process, and
// prints the comparison table; writes OUT_DIR/results.json, OUT_DIR/raw.jsonl and
// OUT_DIR/chart.svg.
//
//   node run_bench.js --bulkhead BIN --shared DIR --out DIR --models a,b|all --threads 1,2
//                     --rounds R --runs N|auto --warmup W [--time /usr/bin/time]
//                     [--sessions 1,4,8|none --sessions-model M --sessions-bench BIN]
//                     [--busy none|a,b --busy-threads T] [--bf16 none|all|a,b] [--int8 none|a,b]
//                     [--pin auto|off]
//
// Each (model, threads) pair gets R rounds; a round is one bulkhead process and one ORT
// process (N timed runs each after W warm-up runs), and the order within a round flips
// every round so neither tool always runs right after the other's cache pollution.
// --pin auto (the default): a process with fewer threads than the machine has cores runs
// pinned (taskset) to as many cores, the same ones for both tools within a round, the
// next ones the round after. The cores of a VM can run at different speeds for minutes
// (bench/README.md), so unpinned processes land on a fast or a slow core by chance.
// --runs auto takes each model's own count from the table below.

const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawn, spawnSync } = require('child_process');

const { compareDirs } = require('./compare_npy');

const HERE = __dirname;

// name -> { model, inputs: 'light' | folder of NAME.npy files, runs: timed runs per process
// under --runs auto }. The auto counts are scaled so that the timed runs of one process
// take about 1 s at 1 thread on a 2-core x86-64 machine (silero_vad_v5: 1000 runs of
// ~0.1 ms, enough for a stable median); session creation and the first run come on top
// and dominate for the large light models (vgg19: ~10 s a process). See bench/README.md.
const MODELS = [
  ['light_bvlc_alexnet', 'light', 30],
  ['light_densenet121', 'light', 20],
  ['light_inception_v1', 'light', 30],
  ['light_inception_v2', 'light', 30],
  ['light_resnet50', 'light', 20],
  ['light_shufflenet', 'light', 60],
  ['light_squeezenet', 'light', 60],
  ['light_vgg19', 'light', 5],
  ['light_zfnet512', 'light', 15],
  ['ppocrv4_det', 'real', 15],
  ['ppocrv4_rec', 'real', 40],
  ['silero_vad_v5', 'real', 1000],
];

function modelTable(shared) {
  const table = {};
  for (const [n, kind, runs] of MODELS) {
    table[n] = kind === 'light'
      ? { model: path.join(shared, 'onnx-backend-data', 'light', `${n}.onnx`), inputs: 'light', runs }
      : { model: path.join(shared, 'models', n, 'model.onnx'), inputs: path.join(shared, 'models', n, 'inputs'), runs };
  }
  return table;
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
  a.sessions = !a.sessions || a.sessions === 'none' ? [] : a.sessions.split(',').filter(Boolean).map(Number);
  a['sessions-model'] = a['sessions-model'] || 'light_resnet50';
  a.busy = !a.busy || a.busy === 'none' ? [] : a.busy.split(',').filter(Boolean);
  a['busy-threads'] = Number(a['busy-threads'] || 2);
  a.models = a.models === 'all' ? MODELS.map((m) => m[0]) : a.models.split(',').filter(Boolean);
  a.bf16 = !a.bf16 || a.bf16 === 'none' ? [] : a.bf16 === 'all' ? a.models : a.bf16.split(',').filter(Boolean);
  a.int8 = !a.int8 || a.int8 === 'none' ? [] : a.int8.split(',').filter(Boolean);
  a.threads = a.threads.split(',').filter(Boolean).map(Number);
  a.rounds = Number(a.rounds);
  a.runs = a.runs === 'auto' ? 'auto' : Number(a.runs);
  a.warmup = Number(a.warmup);
  a.pin = a.pin || 'auto';
  if (a.pin !== 'auto' && a.pin !== 'off') die(`run_bench.js: --pin must be auto or off, got '${a.pin}'`);
  return a;
}

function median(xs) {
  const s = [...xs].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const lastLine = (s) => (s || '').trim().split('\n').filter(Boolean).pop() || '';

// The cores a process of `threads` threads runs on in round `round` under --pin auto, as a
// taskset list ("1", "0,1"), or null (pinning off, not fewer threads than cores, or no taskset).
let cpuList = undefined;
function pinFor(a, threads, round) {
  if (a.pin !== 'auto') return null;
  if (cpuList === undefined) {
    // The cores this process may use (a container or an outer taskset may allow fewer).
    const r = spawnSync('taskset', ['-c', '-p', String(process.pid)], { encoding: 'utf8' });
    const m = r.status === 0 ? /:\s*([\d,-]+)\s*$/.exec(r.stdout || '') : null;
    cpuList = m ? m[1].split(',').flatMap((part) => {
      const [lo, hi] = part.split('-').map(Number);
      return hi === undefined ? [lo] : Array.from({ length: hi - lo + 1 }, (_, i) => lo + i);
    }) : null;
  }
  if (!cpuList || threads >= cpuList.length) return null;
  return Array.from({ length: threads }, (_, i) => cpuList[(round * threads + i) % cpuList.length]).join(',');
}

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

const runsFor = (a, spec) => (a.runs === 'auto' ? spec.runs : a.runs);

// One `bulkhead run` process. opts: args (extra arguments, e.g. ['--precision', 'bf16'] or
// ['-o', DIR]), runs and warmup (default: the model's and --warmup), quiet (default true;
// without -q the result also carries `precision_line`, the "precision ..." line that
// `bulkhead run` prints when a precision other than fp32 was asked for).
function runBulkhead(a, spec, inputs, threads, { args = [], runs = runsFor(a, spec), warmup = a.warmup, quiet = true, cpus = null } = {}) {
  const argv = [...(cpus ? ['taskset', '-c', cpus] : []), a.bulkhead, 'run', spec.model, ...inputs.flatMap((i) => ['-i', i]),
    '-t', String(threads), '-r', String(runs), '--warmup', String(warmup), ...(quiet ? ['-q'] : []), ...args];
  const r = runMeasured(argv, a.time, 30 * 60 * 1000);
  const m = /latency over \d+ run\(s\): median ([\d.]+) ms\s+min ([\d.]+) ms/.exec(r.stdout);
  const c = /session created in ([\d.]+) ms/.exec(r.stdout);
  const first = /first run in ([\d.]+) ms/.exec(r.stdout);
  const p = /^ *(precision \S+ \(\d+ nodes compute in bf16\).*)$/m.exec(r.stdout);
  if (r.status !== 0 || !m)
    return { ok: false, error: lastLine(r.stderr) || lastLine(r.stdout) || `exit ${r.status}`, peak_rss_mb: r.rss_mb, wall_s: r.wall_s };
  return { ok: true, median_ms: Number(m[1]), min_ms: Number(m[2]), create_ms: c ? Number(c[1]) : null,
    first_run_ms: first ? Number(first[1]) : null, peak_rss_mb: r.rss_mb, wall_s: r.wall_s, ...(p ? { precision_line: p[1] } : {}), ...(cpus ? { cpus } : {}) };
}

// One ort_bench.js process; opts as for runBulkhead (args: e.g. ['--out', DIR]).
function runOrt(a, spec, inputs, threads, { args = [], runs = runsFor(a, spec), warmup = a.warmup, cpus = null } = {}) {
  const argv = [...(cpus ? ['taskset', '-c', cpus] : []), process.execPath, path.join(HERE, 'ort_bench.js'), spec.model, ...inputs.flatMap((i) => ['-i', i]),
    '-t', String(threads), '-r', String(runs), '-w', String(warmup), ...args];
  const r = runMeasured(argv, a.time, 30 * 60 * 1000);
  let j = null;
  try { j = JSON.parse(lastLine(r.stdout)); } catch (_) { /* reported below */ }
  if (r.status !== 0 || !j)
    return { ok: false, error: lastLine(r.stderr) || `exit ${r.status}`, peak_rss_mb: r.rss_mb, wall_s: r.wall_s };
  // Prefer GNU time's figure (same method as for bulkhead); the process's own maxRSS otherwise.
  return { ok: true, median_ms: j.median_ms, min_ms: j.min_ms, create_ms: j.create_ms,
    first_run_ms: j.first_run_ms === undefined ? null : j.first_run_ms, peak_rss_mb: r.rss_mb !== null ? r.rss_mb : j.peak_rss_mb, self_rss_mb: j.peak_rss_mb, wall_s: r.wall_s, ...(cpus ? { cpus } : {}) };
}

function summarize(rounds) {
  const ok = rounds.filter((r) => r.ok);
  const all = rounds.map((r) => (r.ok ? r.median_ms : null)); // by round, null where it failed
  if (!ok.length) return { ok: false, error: rounds.map((r) => r.error).find(Boolean) || 'failed', all_rounds: all };
  const rss = ok.map((r) => r.peak_rss_mb).filter((x) => x !== null && x !== undefined);
  const create = ok.map((r) => r.create_ms).filter((x) => x !== null && x !== undefined);
  const first = ok.map((r) => r.first_run_ms).filter((x) => x !== null && x !== undefined);
  return {
    ok: true,
    rounds_ok: ok.length,
    median_ms: median(ok.map((r) => r.median_ms)), // median of the per-process medians
    min_ms: Math.min(...ok.map((r) => r.min_ms)),
    round_medians_ms: ok.map((r) => r.median_ms),
    all_rounds: all,
    peak_rss_mb: rss.length ? Math.max(...rss) : null,
    create_ms: create.length ? median(create) : null, // median over rounds of the session creation time
    round_create_ms: create,
    first_run_ms: first.length ? median(first) : null, // median over rounds of the first run's time
    ...(ok.length < rounds.length ? { error: rounds.find((r) => !r.ok).error } : {}),
  };
}

function pad(s, n, left) {
  s = String(s);
  return left ? s.padEnd(n) : s.padStart(n);
}

// Geometric mean of the bh/ORT ratio per thread count, over the models where both tools
// produced a number: { "1": { geomean, models, of }, ... }.
function geomeans(results, threads) {
  const g = {};
  for (const t of threads) {
    const rows = results.filter((r) => r.threads === t);
    const ok = rows.filter((r) => r.ratio !== null && r.ratio > 0);
    g[String(t)] = {
      geomean: ok.length ? Math.exp(ok.reduce((acc, r) => acc + Math.log(r.ratio), 0) / ok.length) : null,
      models: ok.length,
      of: rows.length,
    };
  }
  return g;
}

const xml = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

// A self-contained SVG bar chart: bh/ORT per model, one bar per thread count, a dashed
// line at 1.0 (below it bulkhead is faster). Linear axis from 0 to at most 4: a larger
// ratio is drawn to the top with its value, so one outlier does not flatten the rest.
function chartSvg(results, models, threads, gm, meta) {
  const colors = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948'];
  const color = (i) => colors[i % colors.length];
  const barW = 16;
  const groupW = threads.length * barW + 18;
  const left = 56, right = 30, top = 84, plotH = 260, bottom = 96;
  const width = Math.max(left + right + models.length * groupW, 640);
  const gw = (width - left - right) / Math.max(models.length, 1); // groups spread over the width
  const height = top + plotH + bottom;
  const ratios = results.map((r) => r.ratio).filter((x) => x !== null);
  const CAP = 4;
  const maxR = Math.min(Math.max(1.2, ...ratios) * 1.08, CAP);
  const step = [0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10, 20, 25, 50, 100].find((s) => maxR / s <= 8) || Math.ceil(maxR / 8);
  const yMax = Math.ceil(maxR / step) * step;
  const y = (v) => top + plotH - (v / yMax) * plotH;
  const f2 = (v) => (v >= 10 ? v.toFixed(1) : v.toFixed(2));
  const o = [];
  o.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ` +
    'font-family="sans-serif" font-size="11">');
  o.push(`<rect width="${width}" height="${height}" fill="#fff"/>`);
  o.push(`<text x="${left}" y="20" font-size="14" font-weight="bold">bulkhead / ONNX Runtime, median latency</text>`);
  o.push(`<text x="${left}" y="36" fill="#444">below the dashed line at 1.0 bulkhead is faster; 2.0: it takes twice as long</text>`);
  const gmText = threads.map((t) => {
    const g = gm[String(t)];
    return `${t} thread${t === 1 ? '' : 's'}: geomean ${g.geomean === null ? '-' : g.geomean.toFixed(2)} (${g.models}/${g.of} models)`;
  }).join(';  ');
  o.push(`<text x="${left}" y="52" fill="#444">${xml(gmText)}</text>`);
  o.push(`<text x="${left}" y="67" fill="#888" font-size="10">${xml(`onnxruntime-node ${meta.onnxruntime_node}, ${meta.date.slice(0, 16)}Z, ` +
    `${meta.git || ''}, ${meta.cores} cores, load ${meta.loadavg_start[0]}..${meta.loadavg_end[0]}`)}</text>`);
  for (let v = 0; v <= yMax + 1e-9; v += step) {
    o.push(`<line x1="${left}" x2="${width - right}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#e5e5e5"/>`);
    o.push(`<text x="${left - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end" fill="#444">${+v.toFixed(2)}</text>`);
  }
  o.push(`<text transform="translate(14 ${top + plotH / 2}) rotate(-90)" text-anchor="middle" fill="#444">bh / ORT</text>`);
  const labels = []; // drawn last, over the 1.0 line
  models.forEach((m, gi) => {
    const x0 = left + gi * gw + (gw - threads.length * barW) / 2;
    threads.forEach((t, ti) => {
      const r = results.find((q) => q.model === m && q.threads === t);
      const x = x0 + ti * barW;
      if (!r) return;
      if (r.ratio === null) {
        o.push(`<text transform="translate(${x + barW / 2 + 3} ${y(0) - 4}) rotate(-90)" fill="#c00" font-size="10">FAILED</text>`);
        return;
      }
      const clipped = r.ratio > yMax;
      const v = Math.min(r.ratio, yMax);
      const h = y(0) - y(v);
      o.push(`<rect x="${x}" y="${y(v).toFixed(1)}" width="${barW - 2}" height="${h.toFixed(1)}" fill="${color(ti)}"` +
        `${clipped ? ' stroke="#000" stroke-dasharray="3 2"' : ''}>` +
        `<title>${xml(`${m}, ${t} thread(s): bh/ORT ${r.ratio.toFixed(3)} (bulkhead ${r.bulkhead.median_ms} ms, ORT ${r.ort.median_ms} ms)`)}</title></rect>`);
      labels.push(clipped
        ? `<text transform="translate(${x + barW / 2 + 2} ${(y(v) + 4).toFixed(1)}) rotate(-90)" text-anchor="end" font-size="9" font-weight="bold" fill="#fff">${f2(r.ratio)}</text>`
        : `<text transform="translate(${x + barW / 2 + 2} ${(y(v) - 3).toFixed(1)}) rotate(-90)" font-size="9" fill="#333">${f2(r.ratio)}</text>`);
    });
    const cx = x0 + (threads.length * barW) / 2;
    o.push(`<text transform="translate(${cx} ${top + plotH + 12}) rotate(-40)" text-anchor="end" fill="#222">${xml(m.replace(/^light_/, ''))}</text>`);
  });
  o.push(`<line x1="${left}" x2="${width - right}" y1="${y(1).toFixed(1)}" y2="${y(1).toFixed(1)}" stroke="#c00" stroke-width="1.5" stroke-dasharray="6 3"/>`);
  o.push(`<text x="${width - right + 3}" y="${(y(1) + 4).toFixed(1)}" fill="#c00" font-size="10">1.0</text>`);
  o.push(`<line x1="${left}" x2="${width - right}" y1="${y(0)}" y2="${y(0)}" stroke="#444"/>`);
  o.push(...labels);
  threads.forEach((t, ti) => {
    const lx = width - right - (threads.length - ti) * 80;
    const ly = 20;
    o.push(`<rect x="${lx}" y="${ly - 9}" width="10" height="10" fill="${color(ti)}"/>`);
    o.push(`<text x="${lx + 14}" y="${ly}" fill="#222">${t} thread${t === 1 ? '' : 's'}</text>`);
  });
  o.push('</svg>');
  return o.join('\n') + '\n';
}

// Resident memory of 1..N sessions of one model in one process: bulkhead's sessions_bench
// (its defaults: weights shared; read just after the runs, and again once the sessions have
// been idle for release_idle_after_ms and gave their run memory back) and ONNX Runtime's
// ort_sessions.js, 1 thread, 2 runs per session. Rows: {sessions, bulkhead_mib,
// bulkhead_idle_mib, ort_mib, each also over its own 1-session row}.
function measureSessions(a, table, outDir) {
  const name = a['sessions-model'];
  const spec = table[name];
  if (!spec) return { error: `unknown model '${name}'` };
  const counts = a.sessions.join(',');
  const bh = (extra) => {
    const r = spawnSync(a['sessions-bench'], ['--json', '--model', spec.model, '--counts', counts, '--threads', '1', ...extra],
      { encoding: 'utf8', timeout: 20 * 60 * 1000, maxBuffer: 16 << 20 });
    if (r.status !== 0) return { error: lastLine(r.stderr) || `sessions_bench exit ${r.status}` };
    try { return { rows: JSON.parse(lastLine(r.stdout)).filter((x) => x.share_weights) }; }
    catch (e) { return { error: `sessions_bench printed no JSON: ${e.message}` }; }
  };
  const shared = bh([]);
  const inputs = prepareInputs(name, spec, outDir);
  const rows = [];
  for (const n of a.sessions) {
    const r = spawnSync(process.execPath, [path.join(HERE, 'ort_sessions.js'), spec.model, ...inputs.flatMap((i) => ['-i', i]),
      '-n', String(n), '-r', '2', '-t', '1'], { encoding: 'utf8', timeout: 20 * 60 * 1000 });
    let o = null;
    try { o = JSON.parse(lastLine(r.stdout)); } catch (_) { /* reported as null */ }
    const pick = (res) => (res.rows || []).find((x) => x.sessions === n);
    const s = pick(shared);
    rows.push({ sessions: n, bulkhead_mib: s ? s.rss_after_runs_mib : null, bulkhead_idle_mib: s && s.rss_idle_mib !== undefined ? s.rss_idle_mib : null,
      ort_mib: o ? o.rss_after_runs_mib : null, ort_error: o ? undefined : lastLine(r.stderr) || `exit ${r.status}` });
  }
  const first = rows[0] || {};
  for (const r of rows) {
    for (const k of ['bulkhead_mib', 'bulkhead_idle_mib', 'ort_mib'])
      r[k.replace('_mib', '_ratio')] = r[k] !== null && first[k] ? r[k] / first[k] : null;
  }
  return { model: name, threads: 1, runs_per_session: 2, rows, errors: [shared.error].filter(Boolean),
    method: 'resident memory (/proc/self/statm; node: process.memoryUsage().rss) after every session ran twice ' +
      '(bulkhead also once idle for its release_idle_after_ms); ' +
      'bulkhead: one child process per row; ORT: one node process per row, the node runtime included' };
}

// One other process keeping one core busy: a node busy loop, killed when measured.
function startSpinner() {
  const p = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
  const stop = () => { try { p.kill('SIGKILL'); } catch (_) { /* gone */ } };
  process.on('exit', stop);
  return { stop: () => { stop(); process.removeListener('exit', stop); } };
}

// The busy-machine rows: each model at `threads` threads, quiet and with one core taken by
// another process, both tools, in alternating rounds; what each tool loses under load.
function measureBusy(a, table, rawPath) {
  const threads = a['busy-threads'];
  const rows = [];
  for (const name of a.busy) {
    const spec = table[name];
    const inputs = prepareInputs(name, spec, a.out);
    const got = { quiet: { bulkhead: [], ort: [] }, busy: { bulkhead: [], ort: [] } };
    for (let round = 0; round < a.rounds; ++round) {
      for (const load of round % 2 === 0 ? ['quiet', 'busy'] : ['busy', 'quiet']) {
        const spinner = load === 'busy' ? startSpinner() : null;
        try {
          for (const tool of round % 2 === 0 ? ['bulkhead', 'ort'] : ['ort', 'bulkhead']) {
            const r = tool === 'bulkhead' ? runBulkhead(a, spec, inputs, threads) : runOrt(a, spec, inputs, threads);
            got[load][tool].push(r);
            fs.appendFileSync(rawPath, JSON.stringify({ model: name, threads, round, tool, load, load1: os.loadavg()[0], ...r }) + '\n');
            console.log(`  ${name} t=${threads} ${load} round ${round + 1}/${a.rounds} ${pad(tool, 8, true)} ` +
              (r.ok ? `median ${r.median_ms.toFixed(3)} ms` : `FAILED: ${r.error}`));
          }
        } finally {
          if (spinner) spinner.stop();
        }
      }
    }
    const s = {};
    for (const load of ['quiet', 'busy']) for (const tool of ['bulkhead', 'ort']) s[`${load}_${tool}`] = summarize(got[load][tool]);
    const ms = (x) => (x.ok ? x.median_ms : null);
    const div = (x, y) => (x !== null && y ? x / y : null);
    rows.push({ model: name, threads, ...s,
      bulkhead_slowdown: div(ms(s.busy_bulkhead), ms(s.quiet_bulkhead)),
      ort_slowdown: div(ms(s.busy_ort), ms(s.quiet_ort)),
      quiet_ratio: div(ms(s.quiet_bulkhead), ms(s.quiet_ort)),
      busy_ratio: div(ms(s.busy_bulkhead), ms(s.busy_ort)) });
  }
  return { threads, rows,
    method: 'median over rounds of per-process medians; busy: a node busy loop runs in another process for the whole ' +
      'measurement, so one of the two cores is shared' };
}

const ratioOf = (x, y) => (x && y && x.ok && y.ok ? x.median_ms / y.median_ms : null);

// The median over rounds of one tool's median over the other's in the same round (the same
// cores and minutes), from two summaries of as many rounds; null when no round has both.
function pairedRatio(x, y) {
  if (!x || !y || !x.all_rounds || !y.all_rounds) return null;
  const r = [];
  for (let i = 0; i < Math.min(x.all_rounds.length, y.all_rounds.length); ++i) {
    const p = x.all_rounds[i], q = y.all_rounds[i];
    if (p !== null && q !== null && q > 0) r.push(p / q);
  }
  return r.length ? median(r) : null;
}

// R rounds of the given tools ({key: () => result of runBulkhead/runOrt}), in the listed order
// in even rounds and reversed in odd ones (as the main loop alternates); each process gets a
// raw.jsonl line and a progress line; each tool is called with the round's cores (pinFor).
// Returns {key: summarize(rounds)}.
function measureRounds(a, rawPath, tag, tools) {
  const keys = Object.keys(tools);
  const got = Object.fromEntries(keys.map((k) => [k, []]));
  for (let round = 0; round < a.rounds; ++round) {
    const cpus = pinFor(a, tag.threads, round);
    for (const k of round % 2 === 0 ? keys : [...keys].reverse()) {
      const r = tools[k](cpus);
      got[k].push(r);
      fs.appendFileSync(rawPath, JSON.stringify({ ...tag, round, tool: k, load1: os.loadavg()[0], ...r }) + '\n');
      console.log(`  ${tag.section} ${tag.model} t=${tag.threads} round ${round + 1}/${a.rounds} ${pad(k, 13, true)} ` +
        (r.ok ? `median ${r.median_ms.toFixed(3)} ms` : `FAILED: ${r.error}`));
    }
  }
  return Object.fromEntries(keys.map((k) => [k, summarize(got[k])]));
}

// "precision bf16 (64 nodes compute in bf16)" -> "bf16 (64 nodes)"; "precision fp32 (0 nodes
// compute in bf16): this CPU (...) has no bf16 units (AMX or AVX512-BF16)" -> "fp32: no bf16 units".
function precisionShort(line) {
  const m = /^precision (\S+) \((\d+) nodes compute in bf16\)(?::\s*(.*))?$/.exec(line || '');
  if (!m) return line || '-';
  if (m[1] === 'bf16') return `bf16 (${m[2]} nodes)`;
  return `${m[1]}: ${/no bf16 units/.test(m[3] || '') ? 'no bf16 units' : m[3] || '?'}`;
}

// bf16 against fp32: each model at each thread count, rounds of bulkhead --precision bf16,
// bulkhead fp32 and ORT fp32; and once per model (1 thread, one run) the outputs of bf16
// against fp32, with the "precision ..." line that says whether bf16 was used at all.
function measureBf16(a, table, rawPath) {
  const rows = [];
  const bf16 = ['--precision', 'bf16'];
  for (const name of a.bf16) {
    const spec = table[name];
    const inputs = prepareInputs(name, spec, a.out);
    const dirs = { fp32: path.join(a.out, 'bf16', name, 'fp32'), bf16: path.join(a.out, 'bf16', name, 'bf16') };
    const once = {};
    for (const prec of ['fp32', 'bf16']) {
      fs.rmSync(dirs[prec], { recursive: true, force: true });
      once[prec] = runBulkhead(a, spec, inputs, 1,
        { args: [...(prec === 'bf16' ? bf16 : []), '-o', dirs[prec]], runs: 1, warmup: 0, quiet: false });
    }
    const failed = ['fp32', 'bf16'].find((p) => !once[p].ok);
    const outputsError = failed ? `bulkhead ${failed} -o run: ${once[failed].error}` : null;
    const outputs = failed ? [] : compareDirs(dirs.fp32, dirs.bf16);
    const precisionLine = once.bf16.precision_line || null;
    console.log(`  bf16 ${name}: ${precisionLine || 'no precision line'}` +
      (failed ? `; outputs FAILED: ${outputsError}` : outputs.map((o) => `; ${o.name}: ${o.error ||
        `cosine ${o.cosine.toFixed(6)}, max abs ${absText(o.max_abs)}`}`).join('')));
    for (const threads of a.threads) {
      const s = measureRounds(a, rawPath, { section: 'bf16', model: name, threads }, {
        bulkhead_bf16: (cpus) => runBulkhead(a, spec, inputs, threads, { args: bf16, cpus }),
        bulkhead_fp32: (cpus) => runBulkhead(a, spec, inputs, threads, { cpus }),
        ort: (cpus) => runOrt(a, spec, inputs, threads, { cpus }),
      });
      rows.push({ model: name, threads, runs: runsFor(a, spec), ...s,
        ratio_bf16_ort: ratioOf(s.bulkhead_bf16, s.ort), ratio_bf16_fp32: ratioOf(s.bulkhead_bf16, s.bulkhead_fp32),
        precision_line: precisionLine, outputs, ...(outputsError ? { outputs_error: outputsError } : {}) });
    }
  }
  return { rows,
    method: 'median over rounds of per-process medians; bulkhead bf16 = `bulkhead run --precision bf16`, fp32 = without; ' +
      'ORT fp32 (onnxruntime-node has no bf16 path on x86); outputs: one run each of fp32 and bf16 at 1 thread, ' +
      'cosine similarity and largest absolute difference of bf16 against fp32 per output; precision_line: what ' +
      '`bulkhead run --precision bf16` printed (fp32 where the CPU has no bf16 units)' };
}

// int8: each model quantised by `bulkhead quantize MODEL OUT/qdq/NAME.onnx --calibrate
// <its input folder>` and the QDQ file timed in both tools; once per model (1 thread, one
// run) bulkhead's outputs against ORT's on it. A refused quantisation (e.g. opset < 10) is a
// row with threads null and quantize.error.
function measureInt8(a, table, rawPath, results) {
  const rows = [];
  const qdqDir = path.join(a.out, 'qdq');
  fs.mkdirSync(qdqDir, { recursive: true });
  for (const name of a.int8) {
    const spec = table[name];
    const inputs = prepareInputs(name, spec, a.out);
    const qdq = path.join(qdqDir, `${name}.onnx`);
    fs.rmSync(qdq, { force: true });
    // Calibrate on the folder holding the inputs the model is timed with (reference or generated).
    const calib = path.dirname(inputs[0].slice(inputs[0].indexOf('=') + 1));
    const q = runMeasured([a.bulkhead, 'quantize', spec.model, qdq, '--calibrate', calib], null, 30 * 60 * 1000);
    const quantize = q.status === 0 && fs.existsSync(qdq)
      ? { ok: true, calibrate: calib, wall_s: q.wall_s }
      : { ok: false, calibrate: calib, error: lastLine(q.stderr) || lastLine(q.stdout) || `exit ${q.status}`,
        crashed: q.status !== 1, wall_s: q.wall_s }; // exit 1 with a message: refused; anything else is a bulkhead failure
    console.log(`  int8 ${name}: quantize ${quantize.ok ? `wrote ${qdq} in ${q.wall_s.toFixed(1)} s`
      : `${quantize.crashed ? 'FAILED' : 'refused'}: ${quantize.error}`}`);
    if (!quantize.ok) {
      rows.push({ model: name, threads: null, qdq: null, quantize, outputs: [] });
      continue;
    }
    const qspec = { ...spec, model: qdq };
    const dirs = { bulkhead: path.join(a.out, 'int8', name, 'bulkhead'), ort: path.join(a.out, 'int8', name, 'ort') };
    for (const d of Object.values(dirs)) fs.rmSync(d, { recursive: true, force: true });
    const ob = runBulkhead(a, qspec, inputs, 1, { args: ['-o', dirs.bulkhead], runs: 1, warmup: 0 });
    const oo = runOrt(a, qspec, inputs, 1, { args: ['--out', dirs.ort], runs: 1, warmup: 0 });
    const outputsError = !ob.ok ? `bulkhead -o run: ${ob.error}` : !oo.ok ? `ORT --out run: ${oo.error}` : null;
    const outputs = outputsError ? [] : compareDirs(dirs.ort, dirs.bulkhead);
    console.log(`  int8 ${name}: bulkhead against ORT on the QDQ model` +
      (outputsError ? `: FAILED: ${outputsError}` : outputs.map((o) => `; ${o.name}: ${o.error ||
        `cosine ${o.cosine.toFixed(6)}, max abs ${absText(o.max_abs)}`}`).join('')));
    for (const threads of a.threads) {
      const s = measureRounds(a, rawPath, { section: 'int8', model: name, threads }, {
        bulkhead_int8: (cpus) => runBulkhead(a, qspec, inputs, threads, { cpus }),
        ort_int8: (cpus) => runOrt(a, qspec, inputs, threads, { cpus }),
      });
      const main = results.find((r) => r.model === name && r.threads === threads);
      rows.push({ model: name, threads, runs: runsFor(a, spec), qdq, quantize, ...s,
        ratio_int8_ort: ratioOf(s.bulkhead_int8, s.ort_int8),
        paired_ratio_int8_ort: pairedRatio(s.bulkhead_int8, s.ort_int8),
        bulkhead_fp32: main ? main.bulkhead : null, ratio_int8_fp32: main ? ratioOf(s.bulkhead_int8, main.bulkhead) : null,
        outputs, ...(outputsError ? { outputs_error: outputsError } : {}) });
    }
  }
  return { rows,
    method: 'QDQ model from `bulkhead quantize MODEL OUT --calibrate DIR` (DIR: the folder of the inputs it is timed ' +
      'with), timed in both tools on the same file; median over rounds of per-process medians; bulkhead_fp32: the ' +
      'main table\'s figure for the float model (null when that model/threads was not in it); outputs: one run each ' +
      'at 1 thread, bulkhead against ORT, cosine similarity and largest absolute difference per output' };
}

const absText = (x) => (x === null || x === undefined ? '-' : x === 0 ? '0' : x.toPrecision(3));

// Worst over outputs: the smallest cosine and the largest max_abs; '-' when none compared.
function worstOutputs(outputs) {
  const ok = (outputs || []).filter((o) => !o.error);
  return { cosine: ok.length ? Math.min(...ok.map((o) => o.cosine)) : null, max_abs: ok.length ? Math.max(...ok.map((o) => o.max_abs)) : null };
}

function main() {
  const a = parseArgs(process.argv.slice(2));
  const table = modelTable(a.shared);
  for (const m of [...a.models, ...a.busy, ...a.bf16, ...a.int8]) {
    if (!table[m]) die(`unknown model '${m}' (known: ${Object.keys(table).join(', ')})`);
    if (!fs.existsSync(table[m].model)) die(`${m}: model file missing: ${table[m].model}`);
  }
  fs.mkdirSync(a.out, { recursive: true });
  const rawPath = path.join(a.out, 'raw.jsonl');
  fs.writeFileSync(rawPath, '');

  const git = spawnSync('git', ['-C', path.dirname(HERE), 'describe', '--always', '--dirty'], { encoding: 'utf8' });
  const ortVersion = JSON.parse(fs.readFileSync(path.join(HERE, 'node_modules', 'onnxruntime-node', 'package.json'), 'utf8')).version;
  const baseline = a.time ? runMeasured([process.execPath, '-e', `require('onnxruntime-node'); require(${JSON.stringify(path.join(__dirname, 'ort_tmp.js'))})`], a.time, 60000).rss_mb : null;
  const started = Date.now();
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
    runs_per_model: Object.fromEntries(a.models.map((m) => [m, runsFor(a, table[m])])),
    warmup: a.warmup,
    rss_method: a.time ? 'GNU time %M (peak resident set of the whole process)' : 'ORT: process.resourceUsage().maxRSS; bulkhead: not measured (no GNU time)',
    node_ort_baseline_rss_mb: baseline,
    pin: a.pin === 'off' ? 'off (processes run where the scheduler puts them)'
      : pinFor(a, 1, 0) === null ? 'auto, but taskset is missing or only one core is allowed: not pinned'
      : `auto: processes with fewer threads than the ${cpuList.length} cores run pinned (taskset) to as many, the same for ` +
        'both tools in a round and the next ones the round after; the busy-machine rows are not pinned',
  };
  console.log(`bench: ${a.models.length} model(s) x threads ${a.threads.join(',')} x ${a.rounds} round(s) x ` +
    `${a.runs === 'auto' ? 'per-model' : a.runs} runs ` +
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
        const cpus = pinFor(a, threads, round);
        for (const tool of order) {
          const r = tool === 'bulkhead' ? runBulkhead(a, spec, inputs, threads, { cpus }) : runOrt(a, spec, inputs, threads, { cpus });
          (tool === 'bulkhead' ? bh : ort).push(r);
          fs.appendFileSync(rawPath, JSON.stringify({ model: name, threads, round, tool, load1: os.loadavg()[0], ...r }) + '\n');
          const what = r.ok ? `median ${r.median_ms.toFixed(3)} ms` : `FAILED: ${r.error}`;
          const create = r.ok && r.create_ms !== null && r.create_ms !== undefined ? `, created in ${r.create_ms.toFixed(1)} ms` : '';
          console.log(`  ${name} t=${threads} round ${round + 1}/${a.rounds} ${pad(tool, 8, true)} ${what}${create}` +
            (cpus ? ` (cpu ${cpus})` : ''));
        }
      }
      const b = summarize(bh);
      const o = summarize(ort);
      results.push({ model: name, threads, runs: runsFor(a, spec), bulkhead: b, ort: o,
        ratio: b.ok && o.ok ? b.median_ms / o.median_ms : null, paired_ratio: pairedRatio(b, o) });
    }
  }
  const sessions = a.sessions.length && a['sessions-bench'] ? measureSessions(a, table, a.out) : null;
  const busy = a.busy.length ? measureBusy(a, table, rawPath) : null;
  const bf16 = a.bf16.length ? measureBf16(a, table, rawPath) : null;
  const int8 = a.int8.length ? measureInt8(a, table, rawPath, results) : null;
  meta.loadavg_end = os.loadavg().map((x) => Math.round(x * 100) / 100);
  meta.wall_s = Math.round((Date.now() - started) / 100) / 10;
  const gm = geomeans(results, a.threads);

  const f = (x, d) => (x === null || x === undefined ? '-' : x.toFixed(d));
  const cols = [['model', 18, true], ['threads', 7], ['runs', 5], ['bulkhead ms', 12], ['ORT ms', 10], ['bh/ORT', 7],
    ['paired', 7], ['bh create ms', 12], ['ORT create ms', 13], ['bh 1st run ms', 13], ['ORT 1st run ms', 14],
    ['bh RSS MB', 10], ['ORT RSS MB', 11]];
  const line = (vals) => cols.map(([, w, l], i) => pad(vals[i], w, l)).join('  ');
  console.log('');
  console.log(line(cols.map((c) => c[0])));
  console.log(line(cols.map(([, w]) => '-'.repeat(w))));
  const notes = [];
  for (const r of results) {
    const ms = (x) => f(x, x !== null && x !== undefined && x < 1 ? 3 : 2);
    console.log(line([r.model, r.threads, r.runs,
      r.bulkhead.ok ? ms(r.bulkhead.median_ms) : 'FAILED', r.ort.ok ? ms(r.ort.median_ms) : 'FAILED',
      r.ratio === null ? '-' : f(r.ratio, 2), f(r.paired_ratio, 2),
      f(r.bulkhead.create_ms, 1), f(r.ort.create_ms, 1), f(r.bulkhead.first_run_ms, 1), f(r.ort.first_run_ms, 1),
      f(r.bulkhead.peak_rss_mb, 1), f(r.ort.peak_rss_mb, 1)]));
    for (const [tool, s] of [['bulkhead', r.bulkhead], ['ORT', r.ort]])
      if (s.error) notes.push(`${r.model} t=${r.threads} ${tool}${s.ok ? ` (${s.rounds_ok}/${a.rounds} rounds ok)` : ''}: ${s.error}`);
  }
  console.log('');
  for (const t of a.threads) {
    const g = gm[String(t)];
    console.log(`geomean bh/ORT, ${t} thread${t === 1 ? '' : 's'}: ${g.geomean === null ? '-' : g.geomean.toFixed(2)}` +
      ` over ${g.models}${g.models < g.of ? ` of ${g.of}` : ''} model(s)`);
  }
  console.log('');
  console.log(`times: median over rounds of each process's median of its timed runs ('runs'); bh/ORT < 1 means bulkhead is faster; ` +
    `paired: the median over rounds of bulkhead's median over ORT's in the same round.`);
  console.log(`pinning: ${meta.pin}.`);
  console.log('create: session creation (read the file, parse, optimise, compile), median over rounds; ' +
    "bulkhead's 'session created in' line, ORT's InferenceSession.create. 1st run: the session's first run " +
    '(the first warm-up run), median over rounds; create + 1st run is the time to the first result.');
  console.log(`RSS: ${meta.rss_method}, max over rounds.` +
    (baseline ? ` node + onnxruntime-node loaded, no session: ${baseline.toFixed(1)} MB.` : ''));
  console.log(`load average ${meta.loadavg_start.join(' ')} at start, ${meta.loadavg_end.join(' ')} at end (${meta.cores} cores); ` +
    `${meta.wall_s} s in all.`);
  for (const n of notes) console.log(`note: ${n}`);
  if (sessions) {
    console.log('');
    console.log(`sessions of ${sessions.model} in one process, 1 thread, resident MiB after 2 runs each (over x${a.sessions[0]}):`);
    const scols = [['sessions', 8], ['bulkhead', 16], ['bh once idle', 16], ['ORT', 16]];
    const sline = (vals) => scols.map(([, w], i) => pad(vals[i], w)).join('  ');
    console.log(sline(scols.map((c) => c[0])));
    const cell = (mb, ratio) => (mb === null || mb === undefined ? '-' : `${mb.toFixed(1)} (${ratio === null ? '-' : ratio.toFixed(2)})`);
    for (const r of sessions.rows)
      console.log(sline([r.sessions, cell(r.bulkhead_mib, r.bulkhead_ratio), cell(r.bulkhead_idle_mib, r.bulkhead_idle_ratio),
        cell(r.ort_mib, r.ort_ratio)]));
    for (const e of sessions.errors) console.log(`note: sessions: ${e}`);
  }
  if (busy) {
    console.log('');
    console.log(`busy machine: ${busy.threads} threads while another process keeps one core busy (median ms; slowdown = busy / quiet):`);
    const bcols = [['model', 18, true], ['bh quiet', 9], ['bh busy', 9], ['bh slowdown', 11], ['ORT quiet', 9], ['ORT busy', 9],
      ['ORT slowdown', 12], ['bh/ORT busy', 11]];
    const bline = (vals) => bcols.map(([, w, l], i) => pad(vals[i], w, l)).join('  ');
    console.log(bline(bcols.map((c) => c[0])));
    const m = (x) => (x.ok ? f(x.median_ms, 2) : 'FAILED');
    for (const r of busy.rows)
      console.log(bline([r.model, m(r.quiet_bulkhead), m(r.busy_bulkhead), f(r.bulkhead_slowdown, 2), m(r.quiet_ort), m(r.busy_ort),
        f(r.ort_slowdown, 2), f(r.busy_ratio, 2)]));
  }
  const ms = (x) => (!x ? '-' : x.ok ? f(x.median_ms, x.median_ms < 1 ? 3 : 2) : 'FAILED');
  // Notes for a section: each summary's error (a failed or partly failed tool), and outputs_error.
  const sectionNotes = (section, rows, keys) => {
    for (const r of rows) {
      for (const k of keys)
        if (r[k] && r[k].error) console.log(`note: ${section} ${r.model} t=${r.threads} ${k}` +
          `${r[k].ok ? ` (${r[k].rounds_ok}/${a.rounds} rounds ok)` : ''}: ${r[k].error}`);
      if (r.outputs_error && r.threads === a.threads[0]) console.log(`note: ${section} ${r.model} outputs: ${r.outputs_error}`);
      if (r.threads === a.threads[0])
        for (const o of r.outputs || []) if (o.error || o.nan_mismatch) console.log(`note: ${section} ${r.model} output ${o.name}: ${o.error || `${o.nan_mismatch} NaN(s) on one side only`}`);
    }
  };
  if (bf16) {
    console.log('');
    console.log('bf16: bulkhead --precision bf16 against fp32 and ORT fp32 (median ms); outputs of bf16 against fp32, worst over outputs:');
    const c = [['model', 18, true], ['threads', 7], ['bh bf16', 9], ['bh fp32', 9], ['ORT fp32', 9], ['bf16/ORT', 8],
      ['bf16/fp32', 9], ['cosine', 9], ['max abs', 9], ['precision', 9, true]];
    const l = (vals) => c.map(([, w, left], i) => pad(vals[i], w, left)).join('  ').trimEnd();
    console.log(l(c.map((x) => x[0])));
    console.log(l(c.map(([, w]) => '-'.repeat(w))));
    for (const r of bf16.rows) {
      const w = worstOutputs(r.outputs);
      console.log(l([r.model, r.threads, ms(r.bulkhead_bf16), ms(r.bulkhead_fp32), ms(r.ort), f(r.ratio_bf16_ort, 2),
        f(r.ratio_bf16_fp32, 2), f(w.cosine, 6), absText(w.max_abs), precisionShort(r.precision_line)]));
    }
    sectionNotes('bf16', bf16.rows, ['bulkhead_bf16', 'bulkhead_fp32', 'ort']);
  }
  if (int8) {
    console.log('');
    console.log('int8: QDQ models from `bulkhead quantize`, both tools on the same file (median ms); bh fp32: the float model, ' +
      'main table; outputs: bulkhead against ORT, worst over outputs:');
    const c = [['model', 18, true], ['threads', 7], ['bh int8', 9], ['ORT int8', 9], ['bh/ORT', 7], ['paired', 7], ['bh fp32', 9],
      ['int8/fp32', 9], ['cosine', 9], ['max abs', 9]];
    const l = (vals) => c.map(([, w, left], i) => pad(vals[i], w, left)).join('  ').trimEnd();
    console.log(l(c.map((x) => x[0])));
    console.log(l(c.map(([, w]) => '-'.repeat(w))));
    for (const r of int8.rows) {
      if (!r.quantize.ok) {
        console.log(l([r.model, '-', 'not quantized', '', '', '', '', '', '', '']));
        continue;
      }
      const w = worstOutputs(r.outputs);
      console.log(l([r.model, r.threads, ms(r.bulkhead_int8), ms(r.ort_int8), f(r.ratio_int8_ort, 2), f(r.paired_ratio_int8_ort, 2),
        ms(r.bulkhead_fp32),
        f(r.ratio_int8_fp32, 2), f(w.cosine, 6), absText(w.max_abs)]));
    }
    for (const r of int8.rows)
      if (!r.quantize.ok) console.log(`note: int8 ${r.model}: quantize ${r.quantize.crashed ? 'FAILED' : 'refused'}: ${r.quantize.error}`);
    sectionNotes('int8', int8.rows.filter((r) => r.quantize.ok), ['bulkhead_int8', 'ort_int8']);
  }
  const busiest = Math.max(meta.loadavg_start[0], meta.loadavg_end[0]);
  if (busiest > meta.cores / 2)
    console.log(`warning: the machine was busy (1-minute load up to ${busiest} on ${meta.cores} cores): ` +
      'both tools were slowed, unevenly; rerun on an idle machine before quoting absolute numbers.');

  const out = path.join(a.out, 'results.json');
  fs.writeFileSync(out, JSON.stringify({ meta, geomean_ratio: gm, results, sessions, busy, bf16, int8 }, null, 1) + '\n');
  const chart = path.join(a.out, 'chart.svg');
  fs.writeFileSync(chart, chartSvg(results, a.models, a.threads, gm, meta));
  console.log(`wrote ${out}, ${chart} and ${rawPath}`);
  if (results.some((r) => !r.bulkhead.ok || !r.ort.ok)) process.exitCode = 3;
  if (busy && busy.rows.some((r) => !r.busy_bulkhead.ok || !r.quiet_bulkhead.ok)) process.exitCode = 3;
  if (bf16 && bf16.rows.some((r) => !r.bulkhead_bf16.ok || !r.bulkhead_fp32.ok || r.outputs_error)) process.exitCode = 3;
  // A refused quantisation is a note; a crashed one, a failed bulkhead run or bulkhead -o run is a failure.
  if (int8 && int8.rows.some((r) => (r.quantize.ok ? !r.bulkhead_int8.ok || /^bulkhead/.test(r.outputs_error || '') : r.quantize.crashed)))
    process.exitCode = 3;
}

main();
