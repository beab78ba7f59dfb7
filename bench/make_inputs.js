#!/usr/bin/env node
'use strict';
// Writes synthetic inputs for a model, the way the ONNX "light" models are fed:
// each input is float32 arange(n)/n in C order, with every unknown (symbolic or missing)
// dimension set to 1.
//
//   node make_inputs.js MODEL.onnx OUT_DIR
//
// Prints one "NAME=PATH" line per input (the file name is the input name with '/', '\\'
// and ':' replaced by '_'), ready to pass to `bulkhead run -i` and `ort_bench.js -i`.
// Input shapes come from onnxruntime-node's session metadata.

const fs = require('fs');
const path = require('path');
const { writeNpy } = require('./npy');

async function main() {
  const [model, outDir] = process.argv.slice(2);
  if (!model || !outDir) {
    console.error('usage: node make_inputs.js MODEL.onnx OUT_DIR');
    process.exit(2);
  }
  const ort = require('onnxruntime-node');
  require('./ort_tmp'); // removes the empty log ONNX Runtime leaves in the temporary folder
  // No graph optimisation: only the input metadata is needed, and constant folding the
  // light models' ConstantOfShape weights would take seconds (vgg19: ~550 MB).
  const session = await ort.InferenceSession.create(path.resolve(model), { logSeverityLevel: 3, graphOptimizationLevel: 'disabled' });
  fs.mkdirSync(outDir, { recursive: true });
  for (const meta of session.inputMetadata) {
    if (!meta.isTensor) throw new Error(`input '${meta.name}' is not a tensor`);
    if (meta.type !== 'float32') throw new Error(`input '${meta.name}' is ${meta.type}; only float32 inputs are generated`);
    const shape = (meta.shape || []).map((d) => (typeof d === 'number' && d >= 0 ? d : 1));
    const n = shape.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    for (let i = 0; i < n; ++i) data[i] = i / n; // == float32(i) / float32(n): a double quotient rounds to the same float
    const file = path.join(outDir, meta.name.replace(/[\/\\:]/g, '_') + '.npy');
    writeNpy(file, 'float32', shape, data);
    console.log(`${meta.name}=${file}`);
  }
  await session.release();
}

main().catch((e) => {
  console.error(`make_inputs: ${e && e.message ? e.message : e}`);
  process.exit(1);
});
