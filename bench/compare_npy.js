#!/usr/bin/env node
'use strict';
// Compares two folders of NAME.npy outputs (as `bulkhead run -o DIR` and `ort_bench.js
// --out DIR` write them), file by file: cosine similarity and largest absolute difference
// of B against A, in double precision.
//
//   node compare_npy.js DIR_A DIR_B      prints the JSON array that compareDirs returns
//
// compareDirs(a, b) -> [{name, cosine, max_abs}] over the .npy files of A, sorted by name;
// an entry has `error` instead where B lacks the file or the shapes differ, and
// `nan_mismatch` (count) where one side is NaN and the other is not (those elements are
// left out of both figures; elements NaN in both count as equal).

const fs = require('fs');
const path = require('path');
const { readNpy } = require('./npy');

function compareArrays(x, y) {
  let dot = 0, nx = 0, ny = 0, maxAbs = 0, nanMismatch = 0;
  for (let i = 0; i < x.length; ++i) {
    const u = Number(x[i]);
    const v = Number(y[i]);
    if (Number.isNaN(u) || Number.isNaN(v)) {
      if (Number.isNaN(u) !== Number.isNaN(v)) ++nanMismatch;
      continue;
    }
    dot += u * v;
    nx += u * u;
    ny += v * v;
    const d = Math.abs(u - v);
    if (d > maxAbs || Number.isNaN(d)) maxAbs = d; // inf - inf: NaN, reported as such
  }
  // Two all-zero arrays are the same direction; one all-zero against a non-zero one is not.
  const cosine = nx === 0 || ny === 0 ? (nx === ny ? 1 : 0) : dot / Math.sqrt(nx * ny);
  return { cosine, max_abs: maxAbs, ...(nanMismatch ? { nan_mismatch: nanMismatch } : {}) };
}

function compareDirs(dirA, dirB) {
  const files = fs.readdirSync(dirA).filter((f) => f.endsWith('.npy')).sort();
  return files.map((f) => {
    const name = f.slice(0, -4);
    try {
      const fb = path.join(dirB, f);
      if (!fs.existsSync(fb)) return { name, error: `${f} missing in ${dirB}` };
      const a = readNpy(path.join(dirA, f));
      const b = readNpy(fb);
      if (a.shape.join(',') !== b.shape.join(',')) return { name, error: `shapes differ: [${a.shape}] vs [${b.shape}]` };
      return { name, ...compareArrays(a.data, b.data) };
    } catch (e) {
      return { name, error: e.message };
    }
  });
}

module.exports = { compareDirs };

if (require.main === module) {
  const [a, b] = process.argv.slice(2);
  if (!a || !b) {
    console.error('usage: node compare_npy.js DIR_A DIR_B');
    process.exit(2);
  }
  console.log(JSON.stringify(compareDirs(a, b)));
}
