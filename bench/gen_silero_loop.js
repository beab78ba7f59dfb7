#!/usr/bin/env node
'use strict';
// Generates tests/data/silero_loop/: a 40-call streaming reference for Silero VAD v5,
// computed by ONNX Runtime (onnxruntime-node, CPU EP, 1 intra-op and 1 inter-op thread,
// graphOptimizationLevel 'all').
//
//   node bench/gen_silero_loop.js [MODEL.onnx] [OUT_DIR]
//     MODEL   default $BULKHEAD_SHARED/models/silero_vad_v5/model.onnx
//             ($BULKHEAD_SHARED defaults to <repo>/../shared)
//     OUT_DIR default <repo>/tests/data/silero_loop
//   (install ORT first: ONNXRUNTIME_NODE_INSTALL=skip npm install --prefix bench onnxruntime-node@1.30.0)
//
// The loop: call k = 0..39 feeds
//   input = chunk k                      float32[1,576]
//   state = stateN of call k-1           float32[2,1,128]  (all zeros for k = 0)
//   sr    = 16000                        int64 scalar
// and records output (float32[1,1]) and stateN (float32[2,1,128]).
//
// Files (NumPy .npy v1.0, little-endian, C order):
//   chunks.npy   float32[40,576]     every call's `input`
//   outputs.npy  float32[40]         every call's `output`
//   states.npy   float32[40,2,128]   every call's `stateN` (the [2,1,128] with the 1 dropped)
//
// Chunk formula (chunks.npy is authoritative; this is how it was made). For chunk k in
// [0,40) and sample j in [0,576), with t = 576*k + j, fs = 16000, pi = M_PI, all
// arithmetic in double, the result rounded once to float32:
//   w(h)     = exp(-d1*d1) + 0.5*exp(-d2*d2),  d1 = (150*h - 700)/300, d2 = (150*h - 1200)/300
//   voice(t) = sum over h = 1..20 (in that order) of w(h) * sin(2*pi*150*h*t/fs)
//                       a 150 Hz buzz with two formant-like humps at 700 and 1200 Hz
//   syl(t)   = max(0, sin(2*pi*4*t/fs))                4 Hz "syllables"
//   env(k)   = 1 if 8 <= k < 32 else 0                 voiced only in chunks 8..31
//   x[k][j]  = float32(0.3*env(k)*syl(t)*voice(t) + 0.02*(2*u_t - 1))
// where u_t is the t-th output (t = 0, 1, 2, ... in that order, one per sample) of
// mulberry32 seeded with 12345, as a double in [0,1):
//   uint32_t a = 12345;
//   double next() { a += 0x6D2B79F5u; uint32_t t = a;
//                   t = (t ^ (t >> 15)) * (t | 1u);
//                   t = (t + (t ^ (t >> 7)) * (t | 61u)) ^ t;
//                   return (t ^ (t >> 14)) / 4294967296.0; }
// (uint32_t arithmetic wraps mod 2^32, matching JavaScript's Math.imul and `| 0`.)
// Evaluate products left to right as written (2*pi*150*h*t/fs is ((((2*pi)*150)*h)*t)/fs).
// sin() and exp() may differ from JavaScript's Math.sin/Math.exp by an ulp of a double, so a C++
// re-computation can land one float32 ulp away on rare samples; compare with a tolerance
// (1e-6 absolute is ample) or read chunks.npy.

const fs = require('fs');
const path = require('path');
const { writeNpy } = require('./npy');

const CALLS = 40;
const CHUNK = 576;
const SEED = 12345;
const FS = 16000;

function mulberry32(seed) {
  let a = seed >>> 0;
  return function next() {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function makeChunks() {
  const rand = mulberry32(SEED);
  const x = new Float32Array(CALLS * CHUNK);
  const w = [];
  for (let h = 1; h <= 20; ++h) {
    const d1 = (150 * h - 700) / 300;
    const d2 = (150 * h - 1200) / 300;
    w.push(Math.exp(-d1 * d1) + 0.5 * Math.exp(-d2 * d2));
  }
  for (let k = 0; k < CALLS; ++k) {
    const env = k >= 8 && k < 32 ? 1 : 0;
    for (let j = 0; j < CHUNK; ++j) {
      const t = CHUNK * k + j;
      let voice = 0;
      for (let h = 1; h <= 20; ++h) voice += w[h - 1] * Math.sin((2 * Math.PI * 150 * h * t) / FS);
      const syl = Math.max(0, Math.sin((2 * Math.PI * 4 * t) / FS));
      const u = rand();
      x[t] = 0.3 * env * syl * voice + 0.02 * (2 * u - 1);
    }
  }
  return x;
}

async function main() {
  const repo = path.resolve(__dirname, '..');
  const shared = process.env.BULKHEAD_SHARED || path.join(repo, '..', 'shared');
  const model = process.argv[2] || path.join(shared, 'models', 'silero_vad_v5', 'model.onnx');
  const outDir = process.argv[3] || path.join(repo, 'tests', 'data', 'silero_loop');
  if (!fs.existsSync(model)) {
    console.error(`gen_silero_loop: model not found: ${model} (set BULKHEAD_SHARED or pass the path)`);
    process.exit(1);
  }
  const ort = require('onnxruntime-node');
  require('./ort_tmp'); // removes the empty log ONNX Runtime leaves in the temporary folder
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    logSeverityLevel: 3,
  });

  const chunks = makeChunks();
  const outputs = new Float32Array(CALLS);
  const states = new Float32Array(CALLS * 2 * 128);
  const sr = new ort.Tensor('int64', BigInt64Array.from([16000n]), []);
  let state = new ort.Tensor('float32', new Float32Array(2 * 128), [2, 1, 128]);
  for (let k = 0; k < CALLS; ++k) {
    const input = new ort.Tensor('float32', chunks.slice(k * CHUNK, (k + 1) * CHUNK), [1, CHUNK]);
    const r = await session.run({ input, state, sr });
    const out = r.output;
    const stateN = r.stateN;
    if (out.data.length !== 1) throw new Error(`call ${k}: output has ${out.data.length} elements, expected 1`);
    if (stateN.data.length !== 256 || stateN.dims.join(',') !== '2,1,128')
      throw new Error(`call ${k}: stateN has shape [${stateN.dims}], expected [2,1,128]`);
    outputs[k] = out.data[0];
    states.set(stateN.data, k * 256);
    state = new ort.Tensor('float32', Float32Array.from(stateN.data), [2, 1, 128]);
  }
  await session.release();

  fs.mkdirSync(outDir, { recursive: true });
  writeNpy(path.join(outDir, 'chunks.npy'), 'float32', [CALLS, CHUNK], chunks);
  writeNpy(path.join(outDir, 'outputs.npy'), 'float32', [CALLS], outputs);
  writeNpy(path.join(outDir, 'states.npy'), 'float32', [CALLS, 2, 128], states);
  const fmt = (v) => v.toFixed(6);
  console.log(`onnxruntime-node ${ort.env.versions.common}, model ${model}`);
  console.log(`outputs: ${Array.from(outputs, fmt).join(' ')}`);
  console.log(`wrote ${outDir}/{chunks,outputs,states}.npy`);
}

main().catch((e) => {
  console.error(`gen_silero_loop: ${e && e.message ? e.message : e}`);
  process.exit(1);
});
