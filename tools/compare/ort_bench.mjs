// Times one ONNX model in ONNX Runtime (the onnxruntime-node package, CPU execution provider) and
// prints one JSON object: {"median_ms", "p90_ms", "iters", "threads", "ort_version", ...}.
// Run by tools/compare/compare_engines.py, which installs onnxruntime-node into a cache folder and passes
// that folder as --ort-dir (the package is resolved from there, not from this repository).
//
//   node tools/compare/ort_bench.mjs --ort-dir ~/.cache/vit-ort/onnxruntime-node-1.30.0 --model m.onnx \
//        --shape 1,3,224,224 --threads 2 --iters 10 --warmup 2
//   ... --input x.bin --output y.bin    # one run on the given float32 input (no timing), for checks
//       [--output-name embedding]      # which output to write (default: the first)
//       [--per-row 1]                  # each image alone (batch 1), the outputs stacked
//   ... --optimized-out opt.onnx        # also write ORT's optimised graph (what runs: fused nodes)
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

function parseArgs(argv) {
  const args = { warmup: 2, iters: 10, threads: 1 };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i];
    const value = argv[i + 1];
    if (!key.startsWith("--") || value === undefined) throw new Error(`[ort_bench] bad argument '${key}'`);
    args[key.slice(2).replace(/-/g, "_")] = value;
  }
  for (const name of ["ort_dir", "model", "shape"]) {
    if (!args[name]) throw new Error(`[ort_bench] --${name.replace(/_/g, "-")} is required`);
  }
  args.warmup = Number(args.warmup);
  args.iters = Number(args.iters);
  args.threads = Number(args.threads);
  args.shape = args.shape.split(",").map(Number);
  return args;
}

function median(sorted) {
  return sorted[Math.floor(sorted.length / 2)];
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const require = createRequire(path.join(path.resolve(args.ort_dir), "package.json"));
  const ort = require("onnxruntime-node");
  const options = {
    executionProviders: ["cpu"],
    intraOpNumThreads: args.threads,
    interOpNumThreads: 1,
    executionMode: "sequential",
    graphOptimizationLevel: "all",
  };
  if (args.optimized_out) options.optimizedModelFilePath = args.optimized_out;
  const session = await ort.InferenceSession.create(args.model, options);
  const count = args.shape.reduce((a, b) => a * b, 1);
  let data;
  if (args.input) {
    const bytes = fs.readFileSync(args.input);
    data = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
    if (data.length !== count) throw new Error(`[ort_bench] --input holds ${data.length} floats, shape needs ${count}`);
  } else {
    data = new Float32Array(count);
    for (let i = 0; i < count; ++i) data[i] = Math.random() * 2 - 1;
  }
  const feeds = { [session.inputNames[0]]: new ort.Tensor("float32", data, args.shape) };
  if (args.output) {
    const name = args.output_name || session.outputNames[0];
    // --per-row 1: each image of the batch alone (batch 1), the outputs stacked: what a server
    // answering one image at a time computes (dynamic int8 quantizes each call's whole tensor).
    const rows = args.per_row === "1" ? args.shape[0] : 1;
    const each = count / rows;
    const parts = [];
    let dims;
    for (let r = 0; r < rows; ++r) {
      const shape = rows > 1 ? [1, ...args.shape.slice(1)] : args.shape;
      const x = new ort.Tensor("float32", data.subarray(r * each, (r + 1) * each), shape);
      const out = await session.run({ [session.inputNames[0]]: x });
      if (!(name in out)) throw new Error(`[ort_bench] no output '${name}' (outputs: ${session.outputNames.join(", ")})`);
      parts.push(Buffer.from(out[name].data.buffer, out[name].data.byteOffset, out[name].data.byteLength));
      dims = [...out[name].dims];
    }
    dims[0] = args.shape[0];
    fs.writeFileSync(args.output, Buffer.concat(parts));
    console.log(JSON.stringify({ output: args.output, dims }));
    return;
  }
  for (let i = 0; i < args.warmup; ++i) await session.run(feeds);
  const times = [];
  for (let i = 0; i < args.iters; ++i) {
    const start = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  times.sort((a, b) => a - b);
  console.log(JSON.stringify({
    median_ms: median(times),
    p90_ms: times[Math.min(times.length - 1, Math.floor(0.9 * times.length))],
    iters: args.iters,
    threads: args.threads,
    ort_version: ort.env.versions ? ort.env.versions.node : "unknown",
  }));
}

main().catch((err) => {
  console.error(err.message || err);
  process.exit(1);
});
