'use strict';
// Minimal .npy (NumPy format v1/v2/v3) reader and writer for the benchmark scripts.
// Reads C-order little-endian arrays of the dtypes ONNX Runtime's node binding accepts;
// writes v1.0 headers. No dependencies.

const fs = require('fs');

const MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]); // \x93NUMPY

// numpy descr (without byte-order char) -> [ort type, TypedArray]
const DTYPES = {
  f4: ['float32', Float32Array],
  f8: ['float64', Float64Array],
  i1: ['int8', Int8Array],
  u1: ['uint8', Uint8Array],
  i2: ['int16', Int16Array],
  u2: ['uint16', Uint16Array],
  i4: ['int32', Int32Array],
  u4: ['uint32', Uint32Array],
  i8: ['int64', BigInt64Array],
  u8: ['uint64', BigUint64Array],
  b1: ['bool', Uint8Array],
};

function parseHeader(text, file) {
  const descr = /'descr'\s*:\s*'([^']*)'/.exec(text);
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(text);
  const shape = /'shape'\s*:\s*\(([^)]*)\)/.exec(text);
  if (!descr || !fortran || !shape) throw new Error(`${file}: cannot parse .npy header: ${text.trim()}`);
  if (fortran[1] === 'True') throw new Error(`${file}: Fortran-order arrays are not supported`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  return { descr: descr[1], shape: dims };
}

// Returns { dtype: 'float32' | ..., shape: number[], data: TypedArray } (data is a copy,
// aligned for its element type).
function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || !buf.subarray(0, 6).equals(MAGIC)) throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  let hlen, hstart;
  if (major === 1) { hlen = buf.readUInt16LE(8); hstart = 10; }
  else if (major === 2 || major === 3) { hlen = buf.readUInt32LE(8); hstart = 12; }
  else throw new Error(`${file}: unsupported .npy version ${major}`);
  const { descr, shape } = parseHeader(buf.toString(major === 3 ? 'utf8' : 'latin1', hstart, hstart + hlen), file);
  const order = descr[0];
  const code = descr.slice(1);
  const entry = DTYPES[code];
  if (!entry) throw new Error(`${file}: unsupported dtype '${descr}'`);
  const [dtype, Ctor] = entry;
  if (order === '>' && Ctor.BYTES_PER_ELEMENT > 1) throw new Error(`${file}: big-endian data is not supported`);
  const count = shape.reduce((a, b) => a * b, 1);
  const off = hstart + hlen;
  const bytes = count * Ctor.BYTES_PER_ELEMENT;
  if (buf.length - off < bytes) throw new Error(`${file}: truncated: need ${bytes} data bytes, have ${buf.length - off}`);
  const data = new Ctor(count);
  new Uint8Array(data.buffer).set(buf.subarray(off, off + bytes));
  return { dtype, shape, data };
}

// Writes a C-order little-endian array. dtype: 'float32' | 'int64' | ...
function writeNpy(file, dtype, shape, data) {
  const code = Object.keys(DTYPES).find((k) => DTYPES[k][0] === dtype);
  if (!code) throw new Error(`writeNpy: unsupported dtype ${dtype}`);
  const count = shape.reduce((a, b) => a * b, 1);
  if (data.length !== count) throw new Error(`writeNpy: ${file}: shape [${shape}] needs ${count} elements, got ${data.length}`);
  const descr = (DTYPES[code][1].BYTES_PER_ELEMENT === 1 ? '|' : '<') + code;
  const shapeText = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shapeText}, }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  MAGIC.copy(head, 0);
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'), body]));
}

module.exports = { readNpy, writeNpy };
