// Drives `vit serve`'s page (GET /) in headless Chromium, as a person would: picks a model, uploads
// an image through the page's file input, waits for the answers, and prints one JSON object with
// what the page shows (top-1 label and index, the embedding line, the latency line, whether the
// attention picture loaded) and a screenshot. Debian's `chromium` is the browser;
// puppeteer-core (npm) drives it, resolved from --pup-dir (installed there once:
//   npm install --prefix ~/.cache/vit-browser puppeteer-core@25), never from this repository.
//
//   node tools/serve/browser_check.mjs --pup-dir ~/.cache/vit-browser --url http://127.0.0.1:8080/ \
//        --model digits --image seven.png --screenshot page.png
// "external" lists every request the page made outside the server (none: it is self-contained).
// Compare "index" with `vit predict --top-k 1` on the same image.
import { createRequire } from "node:module";
import path from "node:path";

function parseArgs(argv) {
  const args = { chromium: "/usr/bin/chromium", timeout: "60000" };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i];
    const value = argv[i + 1];
    if (!key.startsWith("--") || value === undefined) throw new Error(`[browser_check] bad argument '${key}'`);
    args[key.slice(2).replace(/-/g, "_")] = value;
  }
  for (const name of ["pup_dir", "url", "image"]) {
    if (!args[name]) throw new Error(`[browser_check] --${name.replace(/_/g, "-")} is required`);
  }
  return args;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const require = createRequire(path.join(path.resolve(args.pup_dir), "package.json"));
  const puppeteer = require("puppeteer-core");
  const browser = await puppeteer.launch({
    executablePath: args.chromium,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1100, height: 900 });
    const external = [];
    page.on("request", (r) => {
      const u = r.url();
      if (!u.startsWith(new URL(args.url).origin) && !u.startsWith("blob:") && !u.startsWith("data:")) external.push(u);
    });
    await page.goto(args.url, { waitUntil: "networkidle0", timeout: Number(args.timeout) });
    await page.waitForSelector("#model option", { timeout: Number(args.timeout) });
    const models = await page.$$eval("#model option", (os) => os.map((o) => o.value));
    if (args.model) await page.select("#model", args.model);
    const input = await page.$("#file");
    await input.uploadFile(path.resolve(args.image));
    await page.waitForFunction(() => document.body.dataset.done === "1", { timeout: Number(args.timeout) });
    await page.waitForFunction(() => {
      const img = document.getElementById("attention");
      return img.style.display === "none" || img.complete;
    });
    const shown = await page.evaluate(() => ({
      top1: document.getElementById("top1").textContent,
      index: Number(document.getElementById("top1").dataset.index),
      bars: document.querySelectorAll("#bars .bar").length,
      embedding: document.getElementById("embedding").textContent,
      latency: document.getElementById("latency").textContent,
      status: document.getElementById("status").textContent,
      attention: (() => {
        const img = document.getElementById("attention");
        return img.complete && img.naturalWidth > 0 ? `${img.naturalWidth}x${img.naturalHeight}` : "";
      })(),
    }));
    if (args.screenshot) await page.screenshot({ path: args.screenshot, fullPage: true });
    console.log(JSON.stringify({ models, model: args.model || models[0], external, ...shown }));
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  console.error(`[browser_check] ${e.message}`);
  process.exit(1);
});
