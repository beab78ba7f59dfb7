'use strict';
// ONNX Runtime 1.30's library leaves an empty "mat-debug-<pid>.log" in the temporary
// folder of every process that loads it. Requiring this module (before or after
// onnxruntime-node) removes this process's one when the process exits, if it is still
// empty; a file with something in it is left for whoever wants to read it.
const fs = require('fs');
const os = require('os');
const path = require('path');

const file = path.join(os.tmpdir(), `mat-debug-${process.pid}.log`);
process.on('exit', () => {
  try {
    if (fs.statSync(file).size === 0) fs.unlinkSync(file);
  } catch (e) {
    // not there: nothing to remove
  }
});
